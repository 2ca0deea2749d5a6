"""The `dynamics` and `studies` tables of the results store.

A *study* is one profile / geometry / EM-vs-SGD run: a row in `studies` (its id, kind, config
and summary numbers as JSON). Its measurements are rows of `dynamics`, one number each:

    dynamics(study_id, seed, step, layer, head, name, value)

`layer` and `head` are -1 where a quantity is not per layer or per head; `step` is -1 for
quantities of the finished model. The long format keeps the table readable by plain SQL, e.g.

    SELECT step, AVG(value) FROM dynamics WHERE study_id = ? AND name = 'attn_entropy'
    GROUP BY step;

Writes go in batches (one transaction each) through the same connection rules as the runs table
(WAL, busy timeout, retries), so a profiler flushing every K steps never blocks a trainer.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable

from ..checks import file_id
from ..store.database import _retry, connect, db_path

SCHEMA = """
CREATE TABLE IF NOT EXISTS studies (
    study_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    run_id TEXT,
    config TEXT NOT NULL,
    summary TEXT,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS dynamics (
    study_id TEXT NOT NULL,
    seed INTEGER NOT NULL,
    step INTEGER NOT NULL,
    layer INTEGER NOT NULL,
    head INTEGER NOT NULL,
    name TEXT NOT NULL,
    value REAL
);
CREATE INDEX IF NOT EXISTS dynamics_study_name ON dynamics (study_id, name, step);
"""


@dataclass(frozen=True)
class Measurement:
    """One measured number, one row of `dynamics`: `name` of (seed, step, layer, head); -1 means
    'not applicable'. (Not a `RunRecord`: those are the `runs` table's rows.)"""

    seed: int
    step: int
    layer: int
    head: int
    name: str
    value: float


def _open(path: str | None):
    """The store opened for writing studies (their tables created if missing)."""
    conn = connect(path)
    _retry(lambda: conn.executescript(SCHEMA))
    return conn


def _open_to_read(path: str | None):
    """The store opened read-only (nothing written: a store in a read-only file or folder can be
    read), or None when it does not exist or holds no studies' tables."""
    if not os.path.exists(db_path(path)):
        return None
    conn = connect(path, read_only=True)
    tables = {r[0] for r in _retry(lambda: conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('studies', 'dynamics')").fetchall())}
    if tables != {"studies", "dynamics"}:
        conn.close()
        return None
    return conn


def _transaction(conn, work) -> None:
    def run():
        conn.execute("BEGIN IMMEDIATE")
        try:
            work()
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    _retry(run)


def _finite_or_none(x: float) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def register_study(study_id: str, kind: str, config: dict, *, run_id: str | None = None,
                   summary: dict | None = None, status: str = "running", path: str | None = None) -> None:
    """Create or update the `studies` row of a study (config and summary stored as JSON)."""
    file_id("study_id", study_id)  # figures and folders are named by it
    if run_id is not None:
        file_id("run_id", run_id)
    conn = _open(path)
    try:
        row = (study_id, kind, run_id, json.dumps(config, default=str),
               json.dumps(summary, default=str) if summary is not None else None, status,
               datetime.now(timezone.utc).isoformat(timespec="milliseconds"))
        _transaction(conn, lambda: conn.execute(
            "INSERT INTO studies (study_id, kind, run_id, config, summary, status, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (study_id) DO UPDATE SET kind = excluded.kind, "
            "run_id = excluded.run_id, config = excluded.config, "
            "summary = COALESCE(excluded.summary, studies.summary), status = excluded.status", row))
    finally:
        conn.close()


def write_dynamics(study_id: str, measurements: Iterable[Measurement | tuple], path: str | None = None) -> int:
    """Append measurements of a study in one transaction; returns how many were written.

    Each is a `Measurement` or a (seed, step, layer, head, name, value) tuple. Non-finite values
    are stored as NULL (SQL has no NaN), never dropped.
    """
    rows = []
    for m in measurements:
        seed, step, layer, head, name, value = (m.seed, m.step, m.layer, m.head, m.name, m.value) \
            if isinstance(m, Measurement) else m
        rows.append((study_id, int(seed), int(step), int(layer), int(head), str(name), _finite_or_none(value)))
    if not rows:
        return 0
    conn = _open(path)
    try:
        _transaction(conn, lambda: conn.executemany(
            "INSERT INTO dynamics (study_id, seed, step, layer, head, name, value) VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows))
    finally:
        conn.close()
    return len(rows)


def read_dynamics(study_id: str, names: Iterable[str] | None = None, path: str | None = None) -> list[Measurement]:
    """A study's measurements (optionally only some names), ordered by name, step, seed, layer, head."""
    conn = _open_to_read(path)
    if conn is None:
        return []
    try:
        sql = "SELECT seed, step, layer, head, name, value FROM dynamics WHERE study_id = ?"
        params: list = [study_id]
        if names is not None:
            names = list(names)
            sql += f" AND name IN ({', '.join('?' * len(names))})"
            params += names
        sql += " ORDER BY name, step, seed, layer, head"
        rows = _retry(lambda: conn.execute(sql, params).fetchall())
    finally:
        conn.close()
    return [Measurement(r[0], r[1], r[2], r[3], r[4], float("nan") if r[5] is None else r[5]) for r in rows]


def read_study(study_id: str, path: str | None = None) -> dict | None:
    """The `studies` row as a dict (config and summary decoded), or None if there is none."""
    conn = _open_to_read(path)
    if conn is None:
        return None
    try:
        row = _retry(lambda: conn.execute("SELECT * FROM studies WHERE study_id = ?", (study_id,)).fetchone())
    finally:
        conn.close()
    if row is None:
        return None
    d = dict(row)
    d["config"] = json.loads(d["config"])
    d["summary"] = json.loads(d["summary"]) if d["summary"] else None
    return d


def list_studies(kind: str | None = None, path: str | None = None) -> list[dict]:
    """Every study (optionally of one kind), oldest first, without their measurements."""
    conn = _open_to_read(path)
    if conn is None:
        return []
    try:
        sql = "SELECT study_id, kind, run_id, status, created_at FROM studies"
        rows = _retry(lambda: conn.execute(sql + (" WHERE kind = ?" if kind else "") + " ORDER BY created_at",
                                           (kind,) if kind else ()).fetchall())
    finally:
        conn.close()
    return [dict(r) for r in rows]


def delete_study(study_id: str, path: str | None = None) -> None:
    """Remove a study and its measurements (used to discard a failed or superseded study)."""
    if not os.path.exists(db_path(path)):
        return
    conn = _open(path)
    try:
        def work():
            conn.execute("DELETE FROM dynamics WHERE study_id = ?", (study_id,))
            conn.execute("DELETE FROM studies WHERE study_id = ?", (study_id,))
        _transaction(conn, work)
    finally:
        conn.close()
