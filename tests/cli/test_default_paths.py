"""Every command without its optional paths (--db, --runs-dir, --out): what the README shows,
typed as written, from an empty folder. Results land in ./results, checkpoints in ./runs."""

from __future__ import annotations

import os

from bayesbench.cli import main


def test_studies_and_readers_without_db_or_runs_dir(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BAYESBENCH_DB", raising=False)
    # before: profile trained, then failed with "expected str, bytes or os.PathLike object, not NoneType"
    assert main(["profile", "--preset", "quick", "--steps", "10", "--seeds", "0,1", "--every", "5",
                 "--checkpoints", "2", "--eval-sequences", "32", "--probe-sequences", "4", "--no-progress"]) == 0
    assert "Report: " + str(tmp_path / "results" / "reports") in capsys.readouterr().out
    assert main(["emsgd", "--seeds", "2", "--length", "20", "--steps", "5", "--threads", "1", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["train", "--task", "bijection", "--arch", "mlp", "--seeds", "0", "--steps", "2",
                 "--eval-sequences", "16", "--no-progress"]) == 0
    for argv in (["leaderboard"], ["export"], ["plot"], ["plot", "--curves"], ["tasks", "--preset", "quick",
                                                                             "--sequences", "16"]):
        assert main(argv) == 0, argv
    capsys.readouterr()
    assert os.path.exists(tmp_path / "results" / "bayesbench.sqlite") and os.path.isdir(tmp_path / "runs")
    assert os.listdir(tmp_path / "results" / "plots")


def test_readers_in_an_empty_folder_say_there_is_nothing_and_leave_nothing(tmp_path, monkeypatch, capsys):
    """leaderboard and plot with no store: a message, exit 0, and no results/ (or results/plots/)
    folder made for nothing (plot made an empty results/plots before)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BAYESBENCH_DB", raising=False)
    for argv in (["leaderboard"], ["plot"], ["plot", "--curves"]):
        assert main(argv) == 0, argv
    out = capsys.readouterr().out
    assert "no results in the store yet" in out and "no stored runs to plot" in out
    assert os.listdir(tmp_path) == []
