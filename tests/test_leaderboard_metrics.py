"""The leaderboard ranks by any of the three metrics, says which, and shows the floors."""

from __future__ import annotations

import sqlite3

import pytest

from bayesbench.cli import main
from bayesbench.leaderboard import METRICS, markdown, render, select_rows
from bayesbench.results import SCHEMA, read_rows, write_rows


def _summary(mean: float) -> dict:
    return {"mean": mean, "ci_low": mean, "ci_high": mean, "n_sequences": 64, "n_positions": 320}


def _row(arch: str, seed: int, mae: float, pos: float, kl: float) -> dict:
    floors = {"uniform": {"entropy_mae": _summary(1.85), "entropy_mae_positional": _summary(1.849),
                          "kl": _summary(1.851)},
              "marginal": {"entropy_mae": _summary(1.84), "entropy_mae_positional": _summary(1.839),
                           "kl": _summary(1.841)}}
    ev = {"positions": "the value positions", "entropy_mae": _summary(mae), "entropy_mae_positional": _summary(pos),
          "kl": _summary(kl), "floors": floors}
    return {"run_id": f"run-{arch}", "seed": seed, "member": seed, "task": "bijection", "task_label": "bijection V=8",
            "arch": arch, "params": 1000, "steps": 10, "wall_s": 1.0, "status": "ok", "entropy_mae_bits": mae,
            "entropy_mae_positional_bits": pos, "kl_bits": kl,
            "metrics": {"primary": "values", "evals": {"values": ev}}}


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "lb.sqlite")
    # A ranks first by entropy MAE, B by the positional metric and by KL.
    write_rows([_row("A", 0, 0.10, 0.080, 0.30), _row("A", 1, 0.12, 0.090, 0.32),
                _row("B", 0, 0.20, 0.010, 0.05), _row("B", 1, 0.22, 0.012, 0.06)], path)
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
    for m in METRICS:  # the notes define all three
        assert METRICS[m] in table


def test_cli_metric_option_and_bad_metric(db, capsys):
    assert main(["leaderboard", "--db", db, "--metric", "kl"]) == 0
    assert "**KL** (bits)" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["leaderboard", "--db", db, "--metric", "accuracy"])
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(ValueError, match="metric must be one of"):
        render(select_rows(db), "md", "accuracy")


def test_csv_and_json_carry_the_positional_metric(db):
    csv = render(select_rows(db), "csv").splitlines()
    assert "entropy_mae_positional_bits" in csv[0].split(",")
    assert any(",0.01," in line for line in csv[1:])
    import json

    runs = json.loads(render(select_rows(db), "json"))["runs"]
    b0 = next(r for r in runs if r["arch"] == "B" and r["seed"] == 0)
    assert b0["entropy_mae_positional_bits"] == 0.01 and b0["evals"]["values"]["entropy_mae_positional_bits"] == 0.01


def test_an_older_store_gains_the_new_columns(tmp_path):
    path = str(tmp_path / "old.sqlite")
    old = SCHEMA.replace("    entropy_mae_positional_bits REAL,\n", "").replace(
        "    entropy_mae_positional_ci_low REAL,\n", "").replace("    entropy_mae_positional_ci_high REAL,\n", "")
    assert "positional" not in old
    conn = sqlite3.connect(path)
    conn.executescript(old)
    conn.close()
    write_rows([_row("A", 0, 0.1, 0.05, 0.2)], path)
    assert read_rows(path)[0]["entropy_mae_positional_bits"] == 0.05
