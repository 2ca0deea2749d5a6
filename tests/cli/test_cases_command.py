"""`bayesbench cases`: a trained bijection run's error by case, equal to the library's numbers."""

from __future__ import annotations

import json
import os

from bayesbench.cli import main
from bayesbench.scoring.by_case import case_scores, pairs_used
from bayesbench.scoring.evaluate import eval_set, predict
from bayesbench.tasks import get_task
from bayesbench.training.checkpoint import load_result


def test_cases_of_a_trained_run_match_the_library(tmp_path, capsys):
    db, runs = str(tmp_path / "r.sqlite"), str(tmp_path / "runs")
    common = ["--steps", "3", "--eval-sequences", "32", "--db", db, "--runs-dir", runs, "--no-progress"]
    assert main(["train", "--task", "bijection", "--arch", "transformer", "--seeds", "0,1", *common]) == 0
    assert main(["train", "--task", "sticky", "--arch", "mlp", "--seeds", "0", *common]) == 0
    capsys.readouterr()
    bij = next(os.path.join(runs, "quick", d) for d in os.listdir(os.path.join(runs, "quick")) if "bijection" in d)
    assert main(["cases", bij, "--eval-sequences", "64", "--detail", "free", "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert [m["seed"] for m in run["members"]] == [0, 1] and run["step"] == 3
    task = get_task("bijection", V=8, variant="code", L=7)
    batch = eval_set(task, 64)
    log_q = predict(load_result(os.path.join(bij, "checkpoint.pt")).model, batch)
    want, used = case_scores(task, batch, log_q[1], ("free",)), pairs_used(task, batch, log_q[1])
    got = run["members"][1]
    assert set(got["cases"]) == set(want) >= {"repeated", "new", "query", "new:free=8"}
    for name, s in want.items():
        assert got["cases"][name]["kl"] == s.kl.mean and got["cases"][name]["positions"] == s.n_positions
    assert got["pairs_used"] == used.best
    assert main(["cases", bij, "--eval-sequences", "64"]) == 0
    table = capsys.readouterr().out
    assert "| seed | KL repeated | KL new | KL query | pairs used m | KL to it |" in table
    sticky = next(os.path.join(runs, "quick", d) for d in os.listdir(os.path.join(runs, "quick")) if "sticky" in d)
    assert main(["cases", sticky]) == 2
    assert "bijection task only" in capsys.readouterr().err
    assert main(["cases", bij, "--detail", "pair"]) == 2
    assert "--detail must name some of free, lag" in capsys.readouterr().err


def test_the_case_split_is_a_curve_metric_of_the_leaderboard_plot_and_compare(tmp_path, capsys):
    db, runs = str(tmp_path / "r.sqlite"), str(tmp_path / "runs")
    common = ["--steps", "3", "--eval-sequences", "32", "--curve-sequences", "32", "--db", db, "--runs-dir", runs,
              "--no-progress"]
    assert main(["train", "--task", "bijection", "--arch", "transformer", "--seeds", "0,1", *common]) == 0
    assert main(["train", "--task", "sticky", "--arch", "mlp", "--seeds", "0", *common]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "--db", db, "--curve-metric", "kl:repeated", "--threshold", "5"]) == 0
    md = capsys.readouterr().out
    assert "steps to KL at repeated keys <= 5 bits" in md.splitlines()[0]
    bij = next(x for x in md.splitlines() if x.startswith("| bijection") and "(trained)" in x)
    sticky = next(x for x in md.splitlines() if x.startswith("| sticky") and "(trained)" in x)
    assert "every seed at that measured step (2/2" in bij  # KL <= 5 bits from the first point on
    assert sticky.split("|")[-4].strip() == "-"  # the sticky chain has no repeated keys: no such curve
    out = tmp_path / "plots"
    assert main(["plot", "--curves", "--metric", "kl:new", "--db", db, "--out", str(out)]) == 0
    assert [p.name for p in out.iterdir()] and all("bijection" in p.name for p in out.iterdir())
    assert main(["train", "--task", "sticky", "--arch", "mlp", "--seeds", "1", *common]) == 0  # a second run
    capsys.readouterr()
    sticky_runs = [r["run_id"] for r in json.loads(_leaderboard_json(capsys, db))["runs"] if r["task"] == "sticky"]
    assert len(set(sticky_runs)) == 2
    assert main(["compare", *sorted(set(sticky_runs)), "--metric", "kl:new", "--db", db]) == 2
    assert "has no learning curve of kl:new" in capsys.readouterr().err


def _leaderboard_json(capsys, db: str) -> str:
    assert main(["leaderboard", "--db", db, "--all", "--json"]) == 0
    return capsys.readouterr().out
