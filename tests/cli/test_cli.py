"""The `bayesbench` command end to end with tiny step counts: train --json, run, eval,
leaderboard in every format, plot, models and the kept `tunnels` subcommand."""

from __future__ import annotations

import json
import math
import os

import pytest
import torch
from rundirs import run_dirs

from bayesbench.cli import build_parser, main
from bayesbench.scoring.metrics import entropy_bits
from bayesbench.tasks import get_task

RUN_KEYS = {"run_id", "seed", "task", "arch", "params", "steps", "final_loss", "entropy_mae_bits", "kl_bits", "wall_s"}


@pytest.fixture()
def store(tmp_path):
    return {"db": str(tmp_path / "r.sqlite"), "runs": str(tmp_path / "runs"), "tmp": tmp_path}


def _run(capsys, *argv) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


_TRAIN = ["train", "--task", "bijection", "--arch", "transformer", "--preset", "quick", "--seeds", "0,1",
          "--steps", "4", "--eval-sequences", "64", "--no-progress", "--json"]


def _train_json(capsys, store, *extra) -> dict:
    return json.loads(_run(capsys, *_TRAIN, "--db", store["db"], "--runs-dir", store["runs"], *extra))


def _uniform_mae_bits(task, n: int = 4096) -> float:
    """Entropy MAE (bits) of the uniform predictor on `task`: mean |log2 C - H(Bayes)| over the
    scored positions, computed here from the task's exact posterior (independently of bayesbench's
    evaluation code)."""
    batch = task.sample(n, torch.Generator().manual_seed(123))
    h_bayes = entropy_bits(batch.posterior)[batch.mask]
    return float((math.log2(task.num_classes) - h_bayes).abs().mean())


def test_train_json_and_leaderboard_formats(capsys, store):
    data = _train_json(capsys, store)
    assert [r["seed"] for r in data["runs"]] == [0, 1]
    # 4 steps at lr 1e-3 leave the transformer's predictions near uniform (init std 0.02): its
    # entropy MAE must be the uniform predictor's, about 1.25 bits at the value positions of the
    # quick bijection (V=8, 7 pairs, keys with replacement)
    uniform = _uniform_mae_bits(get_task("bijection", V=8, variant="code", L=7, supervise="values"))
    for r in data["runs"]:
        assert RUN_KEYS <= set(r) and r["task"] == "bijection" and r["arch"] == "transformer" and r["steps"] == 4
        assert r["entropy_mae_bits"] == pytest.approx(uniform, abs=0.05) and r["params"] > 0
        lo, hi = r["entropy_mae_ci"]
        assert lo < r["entropy_mae_bits"] < hi and r["evals"]["values"]["entropy_mae_bits"] == r["entropy_mae_bits"]
    lb = json.loads(_run(capsys, "leaderboard", "--db", store["db"], "--json"))
    assert {r["run_id"] for r in lb["runs"]} == {data["runs"][0]["run_id"]}
    md = _run(capsys, "leaderboard", "--db", store["db"], "--format", "md")
    assert "| bijection V=8 L=7 repl |" in md and "entropy MAE" in md and "scored positions" in md
    assert "*uniform (floor)*" in md and "*marginal (floor)*" in md
    md = _run(capsys, "leaderboard", "--db", store["db"], "--metric", "entropy_mae_positional")
    assert "**positional entropy MAE** (bits)" in md.splitlines()[0]
    csv = _run(capsys, "leaderboard", "--db", store["db"], "--format", "csv", "--task", "bijection")
    assert csv.splitlines()[0].startswith("task,eval,arch") and len(csv.splitlines()) == 1 + 2 * 2  # seeds x evals


def test_run_quick_subset_prints_leaderboard_and_plots(capsys, store):
    out = _run(capsys, "run", "--preset", "quick", "--tasks", "bijection", "hmm", "--archs", "transformer", "mlp",
               "--seeds", "2", "--steps", "3", "--eval-sequences", "64", "--db", store["db"],
               "--runs-dir", store["runs"], "--no-progress")
    assert "Leaderboard" in out and "| hmm S=5 K=20 rows | K=50 |" in out and "| bijection V=8 L=7 repl |" in out
    assert "label-permutation" in out
    assert "bijection V=8 L=7 repl: transformer is" in out and "mean entropy MAE (bits) over seeds, best first:" in out
    rows = json.loads(_run(capsys, "leaderboard", "--db", store["db"], "--json"))["runs"]
    assert len(rows) == 2 * 2 * 2  # tasks x archs x seeds
    hmm = [r for r in rows if r["task"] == "hmm"][0]
    assert set(hmm["evals"]) == {"K=20", "K=30", "K=50"} and hmm["permutation"]["eval"] == "K=20"
    out = _run(capsys, "plot", "--db", store["db"], "--out", str(store["tmp"] / "plots"))
    pngs = [line for line in out.splitlines() if line.endswith(".png")]
    names = sorted(os.path.basename(p) for p in pngs)
    assert names == ["bijection_V=8_L=7_repl_values.png", "bijection_V=8_L=7_repl_values_query.png",
                     "hmm_S=5_K=20_rows_K=20.png", "hmm_S=5_K=20_rows_K=30.png", "hmm_S=5_K=20_rows_K=50.png",
                     "hmm_S=5_K=20_rows_length_generalisation.png"]
    assert all(os.path.getsize(p) > 1000 for p in pngs)


def test_eval_rescores_a_checkpoint(capsys, store):
    data = _train_json(capsys, store)
    (run_dir,) = run_dirs(_TRAIN + ["--db", store["db"], "--runs-dir", store["runs"]])
    again = json.loads(_run(capsys, "eval", run_dir, "--db", store["db"], "--eval-sequences", "64", "--json"))
    assert [r["entropy_mae_bits"] for r in again["runs"]] == pytest.approx(
        [r["entropy_mae_bits"] for r in data["runs"]])
    assert again["runs"][0]["run_id"] == data["runs"][0]["run_id"]


def test_a_rerun_trains_nothing_and_resume_is_accepted_as_a_no_op(capsys, store):
    """Running `train` again finds the job's rows stored under its key: nothing is trained or
    written, the same rows are printed; `--resume` (kept for old scripts) changes nothing."""
    from bayesbench.store.database import read_rows

    first = _train_json(capsys, store)
    ids = sorted((r["run_id"], r["seed"], r["id"], r["created_at"]) for r in read_rows(store["db"]))
    (run_dir,) = run_dirs(_TRAIN + ["--db", store["db"], "--runs-dir", store["runs"]])
    mtime = os.path.getmtime(os.path.join(run_dir, "checkpoint.pt"))
    for extra in ((), ("--resume",)):
        assert main([*_TRAIN, "--db", store["db"], "--runs-dir", store["runs"], *extra]) == 0
        captured = capsys.readouterr()
        assert json.loads(captured.out) == first
        assert "1 job: 1 already stored (skipped), 0 to run" in captured.err  # --json: progress lines on stderr
    assert sorted((r["run_id"], r["seed"], r["id"], r["created_at"]) for r in read_rows(store["db"])) == ids
    assert os.path.getmtime(os.path.join(run_dir, "checkpoint.pt")) == mtime
    assert first["runs"][0]["run_id"] == os.path.basename(run_dir)[-16:]  # the run id is the job's key


def test_threads_default_to_one_whatever_the_caller_had_recorded_and_restored(capsys, store):
    """The torch thread count changes the last digits of a result, so `train` uses a fixed default
    (1), not the process's count, records it in every row's environment and leaves the caller's
    count as it was; --threads 2 is recorded as 2."""
    from bayesbench.store.database import read_rows

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        _train_json(capsys, store)
        assert torch.get_num_threads() == 2
        assert {r["environment"]["threads"] for r in read_rows(store["db"])} == {1}
        _train_json(capsys, store, "--threads", "2", "--db", store["db"] + ".2")
        assert {r["environment"]["threads"] for r in read_rows(store["db"] + ".2")} == {2}
    finally:
        torch.set_num_threads(before)


def test_models_tunnels_and_help(capsys):
    out = _run(capsys, "models", "--preset", "paper")
    assert "2,688,596" in out  # 6 layers, d 192, 39 positions and "transformer" in out and "mlp-prefix" in out
    out = _run(capsys, "tunnels", "--batch-size", "16")
    assert "H_Bayes" in out
    quick = _run(capsys, "tunnels", "--preset", "quick", "--batch-size", "16")  # the preset's tasks at its sizes
    assert quick.count("H_Bayes") == 3 and "bijection(V=8" in quick and "hmm(" in quick and "sticky(" in quick
    assert "quick" in _run(capsys, "models")  # default preset: quick, as every other command
    help_text = build_parser().format_help()
    for cmd in ("run", "train", "eval", "leaderboard", "plot", "tunnels"):
        assert cmd in help_text


def test_errors_are_clear(capsys, store):
    assert main(["train", "--task", "bijection", "--arch", "nope", "--steps", "1", "--db", store["db"],
                 "--runs-dir", store["runs"], "--no-progress"]) == 2
    assert "unknown arch 'nope'" in capsys.readouterr().err
    assert main(["run", "--tasks", "nope", "--db", store["db"]]) == 2  # neither the preset's nor a registered tunnel
    assert "not in preset" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--task", "bijection", "--arch", "mlp", "--seeds", "0,0"])


def test_progress_is_lines_when_stderr_is_not_a_terminal(tmp_path):
    """With stderr not a terminal there is no bar: a line per job checkpoint says where it is."""
    import subprocess
    import sys

    argv = [sys.executable, "-m", "bayesbench.cli", "train", "--task", "sticky", "--arch", "mlp", "--seeds", "0",
            "--steps", "20", "--eval-sequences", "16", "--db", str(tmp_path / "r.sqlite"), "--runs-dir",
            str(tmp_path / "runs")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    steps = [line for line in done.stdout.splitlines() if ": step " in line and " of 20 (" in line]
    assert len(steps) >= 5 and "step 20 of 20 (100%)" in steps[-1]
    quiet = subprocess.run(argv + ["--no-progress", "--db", str(tmp_path / "q.sqlite")], capture_output=True,
                           text=True, timeout=600)
    assert ": step " not in quiet.stdout
