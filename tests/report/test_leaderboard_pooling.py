"""The leaderboard keeps every run: a row pools all stored seeds of one (task, arch, config)
across runs (a seed stored twice counts once, its newest row); `latest` is the old view."""

from __future__ import annotations

import pytest

from bayesbench.report.leaderboard import markdown
from bayesbench.report.rows import aggregate
from bayesbench.report.selection import select_rows
from bayesbench.store.database import write_rows


def _summary(mean: float) -> dict:
    return {"mean": mean, "ci_low": mean - 0.01, "ci_high": mean + 0.01, "n_sequences": 64, "n_positions": 512}


def _row(run_id: str, seed: int, mae: float, *, lr: float = 1e-3, arch: str = "gru", wall: float = 10.0) -> dict:
    ev = {"task": "bijection(V=8)", "positions": "all", "entropy_mae": _summary(mae), "kl": _summary(2 * mae)}
    return {"run_id": run_id, "seed": seed, "member": 0, "task": "bijection", "task_label": "bijection V=8",
            "task_config": {"task": "bijection", "V": 8}, "arch": arch, "params": 100, "steps": 5, "wall_s": wall,
            "status": "ok", "entropy_mae_bits": mae, "kl_bits": 2 * mae,
            "config": {"model_args": {"n_layer": 2}, "train": {"lr": lr}, "max_len": 17, "eval_lengths": [],
                       "eval_sequences": 64, "seeds": [seed], "checkpoint": f"runs/{run_id}"},
            "metrics": {"primary": "standard", "evals": {"standard": ev}}}


@pytest.fixture()
def db(tmp_path):
    path = str(tmp_path / "r.sqlite")
    write_rows([_row("a", 0, 0.10, wall=10), _row("a", 1, 0.20, wall=10)], path)
    write_rows([_row("b", 2, 0.30, wall=30)], path)
    write_rows([_row("c", 1, 0.40)], path)  # seed 1 again: its newest row counts
    write_rows([_row("d", 0, 0.90, lr=1e-2)], path)  # another configuration: its own row
    return path


def test_rows_pool_seeds_across_runs(db):
    agg = aggregate(select_rows(db))
    assert len(agg) == 2
    pooled = next(row for row in agg if row.n_runs == 3)
    assert pooled.seeds == [0, 1, 2] and pooled.values["entropy_mae"] == [0.10, 0.40, 0.30]
    assert pooled.means["entropy_mae"] == pytest.approx(0.8 / 3) and pooled.wall_s == pytest.approx(50 / 3)
    lo, hi = pooled.ci
    assert lo < 0.8 / 3 < hi
    other = next(row for row in agg if row.n_runs == 1)
    assert other.seeds == [0] and other.values["entropy_mae"] == [0.90]
    md = markdown(select_rows(db))
    assert "| 3 in 3 runs: 0,1,2 |" in md and "| 1: 0 |" in md


def test_latest_and_per_run_views(db):
    latest = select_rows(db, latest=True)
    assert {r.run_id for r in latest} == {"d"}
    per_run = aggregate(select_rows(db), per_run=True)
    assert sorted(len(row.seeds) for row in per_run) == [1, 1, 1, 2]
