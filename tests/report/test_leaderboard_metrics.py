"""The leaderboard ranks by any of the three metrics, says which, and shows the floors; the
store keeps the positional metric per seed (older stores gain its columns)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from bayesbench.cli import main
from bayesbench.metric_table import METRICS, final_metrics
from bayesbench.report.leaderboard import markdown, render
from bayesbench.report.selection import select_rows
from bayesbench.scoring.metrics import Summary
from bayesbench.store.database import read_records, read_rows, write_records
from bayesbench.store.records import EvalResult, MemberEvaluation, PositionCurves, RunRecord
from bayesbench.store.schema import schema


def _summary(mean: float) -> Summary:
    return Summary(mean, mean - 0.001, mean + 0.001, 64, 320)


FLOORS = {"uniform": {"entropy_mae": _summary(1.85), "entropy_mae_positional": _summary(1.849), "kl": _summary(1.851)},
          "marginal": {"entropy_mae": _summary(1.84), "entropy_mae_positional": _summary(1.839),
                       "kl": _summary(1.841)}}


def _record(arch: str, seed: int, mae: float, pos: float, kl: float) -> RunRecord:
    ev = EvalResult("bijection(V=8)", "the value positions",
                    {"entropy_mae": _summary(mae), "kl": _summary(kl), "entropy_mae_positional": _summary(pos)}, FLOORS)
    curves = {"values": PositionCurves([0, 2], [mae, mae], [kl, kl], [1.0, 0.5], [1.0, 0.5])}
    return RunRecord(run_id=f"run-{arch}", seed=seed, member=seed, group_id="g", preset="quick", task="bijection",
                     task_label="bijection V=8", task_config={"task": "bijection", "V": 8}, arch=arch, config={},
                     params=1000, steps=10, wall_s=1.0, steps_per_s=10.0, sequences_per_s=320.0, status="ok",
                     final_loss=0.5, evaluation=MemberEvaluation("values", {"values": ev}, curves))


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "lb.sqlite")
    # A ranks first by entropy MAE, B by the positional metric and by KL.
    write_records([_record("A", 0, 0.10, 0.080, 0.30), _record("A", 1, 0.12, 0.090, 0.32),
                   _record("B", 0, 0.20, 0.010, 0.05), _record("B", 1, 0.22, 0.012, 0.06)], path)
    return path


def _archs(table: str) -> list[str]:
    return [line.split("|")[3].strip() for line in table.splitlines() if line.startswith("| bijection")]


@pytest.mark.parametrize("metric,order", [("entropy_mae", ["A", "B"]), ("entropy_mae_positional", ["B", "A"]),
                                          ("kl", ["B", "A"])])
def test_ranking_by_each_metric_names_it(db, metric, order):
    table = markdown(select_rows(db), metric)
    header = table.splitlines()[0]
    short = {"entropy_mae": "entropy MAE", "entropy_mae_positional": "positional entropy MAE", "kl": "KL"}[metric]
    assert f"**{short}** (bits)" in header
    assert f"Ranked by **{short}**" in table
    assert _archs(table)[:2] == order
    assert _archs(table)[2:] == ["*uniform (floor)*", "*marginal (floor)*"]
    uniform = next(line for line in table.splitlines() if "uniform (floor)" in line)
    want = {"entropy_mae": "1.8500", "entropy_mae_positional": "1.8490", "kl": "1.8510"}[metric]
    assert uniform.split("|")[8].strip() == want
    first = next(line for line in table.splitlines()
                 if line.startswith(f"| bijection V=8 | values (trained) | {order[0]}"))
    assert first.rstrip(" |").endswith("1.0x")  # the best by this metric
    for m in final_metrics():  # the notes define all three
        assert METRICS[m].description in table


def test_cli_metric_option_and_bad_metric(db, capsys):
    assert main(["leaderboard", "--db", db, "--metric", "kl"]) == 0
    assert "**KL** (bits)" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["leaderboard", "--db", db, "--metric", "accuracy"])
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(ValueError, match="metric must be one of"):
        render(select_rows(db), "md", "accuracy")


def test_store_csv_and_json_carry_the_positional_metric_and_floors(db):
    rows = read_rows(db)
    assert sorted(r["entropy_mae_positional_bits"] for r in rows) == [0.01, 0.012, 0.08, 0.09]
    back = read_records(db)
    assert back[0].evals["values"].floors["uniform"]["entropy_mae_positional"].mean == 1.849
    csv = render(select_rows(db), "csv").splitlines()
    assert "entropy_mae_positional_bits" in csv[0].split(",")
    assert any(",0.01," in line for line in csv[1:])
    runs = json.loads(render(select_rows(db), "json"))["runs"]
    b0 = next(r for r in runs if r["arch"] == "B" and r["seed"] == 0)
    assert b0["entropy_mae_positional_bits"] == 0.01
    assert b0["evals"]["values"]["entropy_mae_positional_bits"] == 0.01
    assert b0["evals"]["values"]["floors"]["uniform"]["kl_bits"] == 1.851


def test_an_older_store_gains_the_new_columns(tmp_path):
    path = str(tmp_path / "old.sqlite")
    old = schema()
    for col in ("entropy_mae_positional_bits", "entropy_mae_positional_ci_low", "entropy_mae_positional_ci_high"):
        old = old.replace(f"    {col} REAL,\n", "")
    assert "positional" not in old
    conn = sqlite3.connect(path)
    conn.executescript(old)
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    write_records([_record("A", 0, 0.1, 0.05, 0.2)], path)
    assert read_rows(path)[0]["entropy_mae_positional_bits"] == 0.05


def test_each_evaluation_is_one_block_followed_by_its_floors():
    """Two evaluations of one task whose means interleave (A's second eval below B's first) still
    print as two blocks, each ranked and followed by its floor rows once."""
    def rec(arch: str, values: float, with_query: float) -> RunRecord:
        evs = {name: EvalResult("bijection(V=8)", name, {metric: _summary(m) for metric in
                                                         ("entropy_mae", "kl", "entropy_mae_positional")}, FLOORS)
               for name, m in (("values", values), ("values+query", with_query))}
        curves = {name: PositionCurves([0], [m], [m], [1.0], [1.0]) for name, m in (("values", values),
                                                                                       ("values+query", with_query))}
        return RunRecord(run_id=f"run-{arch}", seed=0, member=0, group_id="g", preset="quick", task="bijection",
                         task_label="bijection V=8", task_config={"task": "bijection", "V": 8}, arch=arch, config={},
                         params=1000, steps=10, wall_s=1.0, steps_per_s=10.0, sequences_per_s=320.0, status="ok",
                         final_loss=0.5, evaluation=MemberEvaluation("values", evs, curves))

    table = markdown([rec("A", 0.1, 0.2), rec("B", 0.5, 0.6)])
    rows = [(line.split("|")[2].strip(), line.split("|")[3].strip()) for line in table.splitlines()
            if line.startswith("| bijection")]
    assert rows == [("values (trained)", "A"), ("values (trained)", "B"), ("values", "*uniform (floor)*"),
                    ("values", "*marginal (floor)*"), ("values+query", "A"), ("values+query", "B"),
                    ("values+query", "*uniform (floor)*"), ("values+query", "*marginal (floor)*")]
