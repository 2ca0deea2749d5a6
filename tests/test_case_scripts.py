"""The analysis scripts behind docs/reproducing.md's bijection tables: case_curves.py's points are
the scores of a run trained straight to that step, and recipe_table.py reads a store's rows and
the pairs their checkpoints use."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from bayesbench.cli import main
from bayesbench.scoring.by_case import case_scores, pairs_used
from bayesbench.scoring.evaluate import eval_set, predict
from bayesbench.scoring.metrics import score
from bayesbench.store.database import read_records
from bayesbench.tasks import get_task
from bayesbench.training.config import TrainConfig
from bayesbench.training.run import train

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = {"n_layer": 1, "n_head": 2, "d_model": 16, "d_ffn": 32}


def script(name: str):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "scripts", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_case_curve_points_equal_a_run_trained_to_that_step(tmp_path, capsys):
    out = tmp_path / "c.json"
    train_cfg = {"batch_size": 16, "lr": 1e-3}
    assert script("case_curves").main(["--steps", "6", "--at", "3,6", "--eval-sequences", "64", "--seeds", "0,1",
                                       "--model", json.dumps(SMALL), "--train", json.dumps(train_cfg),
                                       "--task", '{"supervise": "authors"}', "--out", str(out)]) == 0
    curve = json.loads(out.read_text())["curve"]
    assert [row["step"] for row in curve] == [3, 6]
    task = get_task("bijection", V=8, variant="code", L=7, supervise="authors")
    scored = get_task("bijection", V=8, variant="code", L=7, supervise="values")
    batch = eval_set(scored, 64)
    for row in curve:
        res = train(task, "transformer", [0, 1], TrainConfig(steps=row["step"], **train_cfg),
                    model_cfg=SMALL, max_len=task.seq_len, progress=False)
        log_q = predict(res.model, batch)
        for e, member in enumerate(row["members"]):
            s = score(batch.posterior.double(), batch.mask, log_q=log_q[e])
            assert member["entropy_mae_positional"] == pytest.approx(s.entropy_mae_positional.mean, rel=1e-12)
            assert member["kl:repeated"] == pytest.approx(case_scores(scored, batch, log_q[e])["repeated"].kl.mean,
                                                          rel=1e-12)
            assert member["pairs_used"] == pairs_used(scored, batch, log_q[e]).best
    assert "step      6" in capsys.readouterr().out


def test_recipe_table_reads_the_rows_and_their_checkpoints(tmp_path, capsys):
    db, runs = str(tmp_path / "r.sqlite"), str(tmp_path / "runs")
    assert main(["train", "--task", "bijection", "--arch", "transformer", "--seeds", "0,1", "--steps", "3",
                 "--eval-sequences", "32", "--db", db, "--runs-dir", runs, "--no-progress"]) == 0
    capsys.readouterr()
    rows = read_records(db)
    assert script("recipe_table").main(["--db", db, "--group", rows[0].group_id]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    maes = " ".join(f"{r.evaluation.evals['values'].entropy_mae_positional.mean:.3f}"
                    for r in sorted(rows, key=lambda r: r.seed))
    assert line.startswith("| transformer | 64 | 0.0005 | constant | 3 | 192 |") and maes in line
    with pytest.raises(SystemExit, match="no rows of group"):
        script("recipe_table").main(["--db", db, "--group", "nope"])
