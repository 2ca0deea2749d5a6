"""`bayesbench belief-probe RUN` end to end on a run trained for a few steps: the summary, the
stored rows, the report and figure; bad flags refused in one line naming the flag (a tunnel with
no belief state: tests/dynamics/test_belief_probe.py)."""

from __future__ import annotations

import json
import os

import pytest
from rundirs import run_dirs

from bayesbench.cli import main
from bayesbench.dynamics import read_dynamics, read_study


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("belief")
    db, runs = str(tmp / "r.sqlite"), str(tmp / "runs")
    out = {"db": db}
    for task, arch in (("mess3", "lstm"),):
        argv = ["train", "--task", task, "--arch", arch, "--seeds", "0,1", "--steps", "3", "--eval-sequences", "32",
                "--task-args", "L=8", "--db", db, "--runs-dir", runs, "--no-progress"]
        assert main(argv) == 0
        (out[task],) = run_dirs(argv)
    return out


def test_belief_probe_stores_reports_and_draws(trained, capsys):
    capsys.readouterr()
    assert main(["belief-probe", trained["mess3"], "--sequences", "64", "--db", trained["db"], "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["seeds"] == [0, 1] and list(out["streams"]) == ["embed", "layer 0", "layer 1", "final"]
    for s in out["streams"].values():
        assert s["r2"]["n"] == 2 and s["r2"]["ci_low"] <= s["r2"]["mean"] <= s["r2"]["ci_high"]
        assert len(s["per_seed_shuffled"]) == 2
    study = read_study(out["study_id"], path=trained["db"])
    assert study["kind"] == "belief_probe" and study["status"] == "done"
    assert len(read_dynamics(out["study_id"], names=["belief_r2"], path=trained["db"])) == 2 * 4  # seeds x streams
    assert os.path.exists(out["figure"]) and "R^2 by stream" in open(out["report"]).read()
    capsys.readouterr()
    assert main(["belief-probe", trained["mess3"], "--sequences", "64", "--db", trained["db"]]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("best stream ") and "shuffle control" in lines[0] and lines[1].startswith("report: ")


@pytest.mark.parametrize("extra,words", [
    (["--test-fraction", "1.5"], "--test-fraction must be a number in (0, 1)"),
    (["--sequences", "4"], "--sequences must be an integer >= 8"),
])
def test_bad_flags_are_refused_naming_the_flag(trained, capsys, extra, words):
    capsys.readouterr()
    assert main(["belief-probe", trained["mess3"], "--db", trained["db"], *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]
