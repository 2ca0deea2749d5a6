"""The results store: one SQLite row per (run, seed).

Default file `./results/bayesbench.sqlite`; override with `--db` or the BAYESBENCH_DB
environment variable. Several processes may write at once: WAL journal, a busy timeout, each
write in its own `BEGIN IMMEDIATE` transaction, retried while the database is locked.

A store that cannot be used (a directory, a file that is not SQLite or is damaged, a place that
cannot be written) raises `StoreError`, a ValueError naming the file and what is wrong, and the
file is left as it is; `prepare_store` finds that out before any training.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sqlite3
import time
from datetime import datetime, timezone

DEFAULT_DB = os.path.join("results", "bayesbench.sqlite")
BUSY_TIMEOUT_MS = 60_000

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    seed INTEGER NOT NULL,
    member INTEGER NOT NULL,
    group_id TEXT,
    preset TEXT,
    task TEXT NOT NULL,
    task_label TEXT NOT NULL,
    task_config TEXT NOT NULL,
    arch TEXT NOT NULL,
    config TEXT NOT NULL,
    params INTEGER NOT NULL,
    steps INTEGER NOT NULL,
    wall_s REAL,
    steps_per_s REAL,
    sequences_per_s REAL,
    status TEXT NOT NULL,
    final_loss REAL,
    entropy_mae_bits REAL,
    entropy_mae_ci_low REAL,
    entropy_mae_ci_high REAL,
    kl_bits REAL,
    kl_ci_low REAL,
    kl_ci_high REAL,
    metrics TEXT,
    curves TEXT,
    loss_curve TEXT,
    environment TEXT,
    created_at TEXT NOT NULL,
    UNIQUE (run_id, seed)
);
CREATE INDEX IF NOT EXISTS runs_task_arch ON runs (task_label, arch, created_at);
"""

COLUMNS = ("run_id", "seed", "member", "group_id", "preset", "task", "task_label", "task_config", "arch",
           "config", "params", "steps", "wall_s", "steps_per_s", "sequences_per_s", "status", "final_loss",
           "entropy_mae_bits", "entropy_mae_ci_low", "entropy_mae_ci_high", "kl_bits", "kl_ci_low",
           "kl_ci_high", "metrics", "curves", "loss_curve", "environment", "created_at")
JSON_COLUMNS = ("task_config", "config", "metrics", "curves", "loss_curve", "environment")


class StoreError(ValueError):
    """The results store (or its evaluation cache) cannot be used; the message says why."""


def db_path(path: str | None = None) -> str:
    """The store's path: the argument, else $BAYESBENCH_DB, else ./results/bayesbench.sqlite."""
    return path or os.environ.get("BAYESBENCH_DB") or DEFAULT_DB


def cache_dir_for(path: str | None = None) -> str:
    """The evaluation-set cache beside the store: `<store folder>/cache`."""
    return os.path.join(os.path.dirname(os.path.abspath(db_path(path))), "cache")


def _store_error(path: str, err: BaseException) -> StoreError:
    """One line for an SQLite or OS error on the store at `path`."""
    text = str(err)
    if "not a database" in text:
        why = "is not an SQLite database (file is not a database); it was left as it is"
    elif "malformed" in text or "corrupt" in text:
        why = f"is damaged ({text}); it was left as it is: restore a copy or choose another --db"
    elif "readonly" in text or "read-only" in text:
        why = f"cannot be written ({text}): choose a writable --db"
    elif "unable to open" in text:
        why = (f"cannot be opened or created ({text}): is its folder missing or read-only? "
               "choose a writable --db")
    else:
        why = f"cannot be used ({type(err).__name__}: {text})"
    return StoreError(f"results store {path} {why}")


def connect(path: str | None = None) -> sqlite3.Connection:
    """Open (creating if needed) the store in WAL mode with a busy timeout."""
    path = db_path(path)
    if os.path.isdir(path):
        raise StoreError(f"results store {path} is a directory; --db must name a file, "
                         f"e.g. {os.path.join(path, 'bayesbench.sqlite')}")
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as err:
        raise StoreError(f"results store {path}: its folder {folder} cannot be created ({err.strerror})") from None
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    except sqlite3.Error as err:
        raise _store_error(path, err) from None
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _retry(lambda: conn.execute("PRAGMA journal_mode = WAL"))
        _retry(lambda: conn.executescript(SCHEMA))
    except sqlite3.Error as err:
        conn.close()
        raise _store_error(path, err) from None
    return conn


def prepare_store(path: str | None = None) -> str:
    """Open or create the store, check that it can be written and has this version's columns,
    and create its evaluation cache folder, all before any training; returns the store's path.
    Raises StoreError naming what cannot be used."""
    path = db_path(path)
    conn = connect(path)
    try:
        def probe():
            conn.execute("BEGIN IMMEDIATE")  # takes the write lock: fails here if it cannot be written
            conn.execute("ROLLBACK")
        _retry(probe)
        have = {r["name"] for r in conn.execute("PRAGMA table_info(runs)")}
    except sqlite3.Error as err:
        raise _store_error(path, err) from None
    finally:
        conn.close()
    missing = [c for c in COLUMNS if c not in have]
    if missing:
        raise StoreError(f"results store {path} holds a 'runs' table of something else (it lacks "
                         f"{', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}); choose another --db")
    cache = cache_dir_for(path)
    try:
        os.makedirs(cache, exist_ok=True)
        probe_file = os.path.join(cache, f".write-test-{os.getpid()}")
        with open(probe_file, "wb"):
            pass
        os.unlink(probe_file)
    except OSError as err:
        raise StoreError(f"the evaluation cache {cache} beside results store {path} cannot be created or "
                         f"written ({err.strerror}); choose a --db in a writable folder") from None
    return path


def _retry(action, attempts: int = 20):
    """Run `action`, retrying with back-off while SQLite says the database is locked or busy."""
    for i in range(attempts):
        try:
            return action()
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) and "busy" not in str(err) or i == attempts - 1:
                raise
            time.sleep(min(2.0, 0.05 * 2**i))


def _clean(value):
    """JSON cannot hold NaN/inf: store them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def write_rows(rows: list[dict], path: str | None = None) -> int:
    """Insert rows in one transaction; returns the count.

    A row whose (run_id, seed) is already stored (a re-evaluation) updates the stored one but
    keeps its `created_at` and `environment`: they describe the training run, and the
    leaderboard's "latest run" is the latest trained, not the latest re-scored.
    """
    for row in rows:
        missing = {"run_id", "seed", "task", "task_label", "arch", "params", "steps", "status"} - set(row)
        if missing:
            raise ValueError(f"rows must have {sorted(missing)}")
    records = []
    for row in rows:
        row = {"created_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), **row}
        unknown = set(row) - set(COLUMNS)
        if unknown:
            raise ValueError(f"unknown result columns {sorted(unknown)}; known: {', '.join(COLUMNS)}")
        records.append(tuple(json.dumps(_clean(row.get(c)), allow_nan=False) if c in JSON_COLUMNS
                             else _clean(row.get(c)) for c in COLUMNS))
    keep = ("run_id", "seed", "created_at", "environment")
    sql = (f"INSERT INTO runs ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))}) "
           f"ON CONFLICT (run_id, seed) DO UPDATE SET "
           + ", ".join(f"{c} = excluded.{c}" for c in COLUMNS if c not in keep))
    conn = connect(path)
    try:
        def transaction():
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(sql, records)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        _retry(transaction)
    except sqlite3.Error as err:
        raise _store_error(db_path(path), err) from None
    finally:
        conn.close()
    return len(records)


def read_rows(path: str | None = None, *, where: str = "", params: tuple = ()) -> list[dict]:
    """Rows as dicts (JSON columns decoded), oldest first; `where` is an SQL condition."""
    if not os.path.exists(db_path(path)):
        return []
    conn = connect(path)
    try:
        sql = "SELECT * FROM runs" + (f" WHERE {where}" if where else "") + " ORDER BY created_at, id"
        rows = _retry(lambda: conn.execute(sql, params).fetchall())
    except sqlite3.Error as err:
        raise _store_error(db_path(path), err) from None
    finally:
        conn.close()
    out = []
    for r in rows:
        d = dict(r)
        try:
            for c in JSON_COLUMNS:
                d[c] = json.loads(d[c]) if d[c] is not None else None
        except (TypeError, ValueError) as err:
            raise StoreError(f"results store {db_path(path)} is damaged: row {d.get('id')} (run {d.get('run_id')}, "
                             f"seed {d.get('seed')}) has unreadable {c} ({err}); it was left as it is") from None
        out.append(d)
    return out


def environment(device: str, attention: str | None = None) -> dict:
    """Versions, device and the backends a run used (attention kernel, oracle extension)."""
    import torch

    import bayesbench

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    dev = str(device)
    name = torch.cuda.get_device_name(torch.device(dev)) if dev.startswith("cuda") else platform.processor() or "cpu"
    return {
        "bayesbench": bayesbench.__version__, "torch": torch.__version__, "triton": triton_version,
        "python": platform.python_version(), "platform": platform.platform(), "device": dev,
        "device_name": name, "threads": torch.get_num_threads(), "attention_backend": attention,
        "oracle_extension": bayesbench.extension_status(),
    }
