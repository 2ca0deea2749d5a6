"""The SQLite results store: round trip, replacement per (run, seed), the env override, and
several processes writing at once without losing a row."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3

import pytest

from bayesbench.running.provenance import environment
from bayesbench.store.database import db_path, read_rows, write_rows


def _row(run_id: str, seed: int, **kw) -> dict:
    return {"run_id": run_id, "seed": seed, "member": seed, "task": "bijection", "task_label": "bijection V=8",
            "task_config": {"V": 8}, "arch": "transformer", "config": {"lr": 1e-3}, "params": 123, "steps": 10,
            "status": "ok", "entropy_mae_bits": 0.5, "metrics": {"evals": {}}, "curves": {"x": [1.0, float("nan")]},
            **kw}


def test_round_trip_and_replace(tmp_path):
    db = str(tmp_path / "r.sqlite")
    assert read_rows(db) == []
    write_rows([_row("a", 0), _row("a", 1)], db)
    rows = read_rows(db)
    assert [(r["run_id"], r["seed"]) for r in rows] == [("a", 0), ("a", 1)]
    assert rows[0]["curves"] == {"x": [1.0, None]}  # NaN -> null
    # a row written without its code reads as made by the first versions of the built-in parts
    assert rows[0]["config"] == {"lr": 1e-3, "code": {"task": {"version": 1}, "model": {"version": 1},
                                                      "training": {"version": 1}}}
    write_rows([_row("b", 0)], db)
    first = read_rows(db, where="run_id = ? AND seed = ?", params=("a", 1))[0]
    write_rows([_row("a", 1, entropy_mae_bits=0.25, environment={"device": "elsewhere"})], db)  # re-evaluation
    rows = read_rows(db, where="run_id = ? AND seed = ?", params=("a", 1))
    assert len(rows) == 1 and rows[0]["entropy_mae_bits"] == 0.25
    # ... keeps the training run's time stamp and environment, so run "b" stays the latest
    assert rows[0]["created_at"] == first["created_at"] and rows[0]["environment"] == first["environment"]
    assert [r["run_id"] for r in read_rows(db)][-1] == "b"
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with pytest.raises(ValueError, match="unknown result columns"):
        write_rows([_row("c", 0, colour="red")], db)
    with pytest.raises(ValueError, match="must have"):
        write_rows([{"run_id": "c"}], db)


def test_db_path_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("BAYESBENCH_DB", raising=False)
    assert db_path() == "results/bayesbench.sqlite"
    monkeypatch.setenv("BAYESBENCH_DB", str(tmp_path / "env.sqlite"))
    assert db_path() == str(tmp_path / "env.sqlite")
    assert db_path("x.sqlite") == "x.sqlite"
    write_rows([_row("e", 0)], None)
    assert (tmp_path / "env.sqlite").exists()


def test_environment_names_versions_and_backends():
    env = environment("cpu", "sdpa")
    assert env["torch"] and env["device"] == "cpu" and env["attention_backend"] == "sdpa"
    assert "oracle_extension" in env


def _writer(db: str, worker: int, n: int) -> None:
    for i in range(n):
        write_rows([_row(f"w{worker}-{i}", 0), _row(f"w{worker}-{i}", 1)], db)


def test_concurrent_writer_processes_lose_nothing(tmp_path):
    db = str(tmp_path / "c.sqlite")
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(db, w, 15)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert all(p.exitcode == 0 for p in procs)
    rows = read_rows(db)
    assert len(rows) == 4 * 15 * 2
    assert len({(r["run_id"], r["seed"]) for r in rows}) == len(rows)
