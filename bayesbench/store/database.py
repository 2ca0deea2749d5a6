"""The results store: one SQLite row per (run, seed), written from and read back as `RunRecord`s.

Default file `./results/bayesbench.sqlite`; override with `--db` or the BAYESBENCH_DB
environment variable. Several processes may write at once: WAL journal, a busy timeout, each
write in its own `BEGIN IMMEDIATE` transaction, retried while the database is locked.

The table `runs` is meant to be read with plain SQL too: docs/results.md documents every column
and the JSON layouts of the JSON columns. A store written by another version of bayesbench
loads when its table has these columns, and otherwise fails with a message naming what differs.
The table `learning_curves` holds every member's learning curve, one row per (run, seed,
evaluation, step, metric); it is written in the same transaction as the run's rows, and a store
without it reads as having no curves.

The tables and their columns are `store/schema.py`'s; bringing a store of an older version up
to this one, `store/migrations.py`'s.

A store that cannot be used (a directory, a file that is not SQLite or is damaged, a place that
cannot be written, a foreign `runs` table) raises `StoreError`, a ValueError naming the file and
what is wrong, and the file is left as it is; `prepare_store` finds that out before any training.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sqlite3
import time
from datetime import datetime, timezone

from ..checks import file_id
from ..identity import identity_key
from ..metric_table import final_metrics
from ..running.disk import DiskFull, is_disk_full
from .migrations import ROW_MIGRATIONS, add_missing_columns, as_migrated, row_identity
from .records import (
    FINAL_LOSS_MEANING,
    EvalResult,
    LearningCurve,
    MemberEvaluation,
    PermutationCheck,
    PositionCurves,
    RunRecord,
    json_safe,
)
from .schema import CURVE_COLUMNS, JSON_COLUMNS, SCHEMA_VERSION, columns, optional_columns, schema

DEFAULT_DB = os.path.join("results", "bayesbench.sqlite")
BUSY_TIMEOUT_MS = 60_000


class StoreError(ValueError):
    """The results store (or its evaluation cache) cannot be used; the message says why."""


def db_path(path: str | None = None) -> str:
    """The store's path: the argument, else $BAYESBENCH_DB, else ./results/bayesbench.sqlite."""
    return path or os.environ.get("BAYESBENCH_DB") or DEFAULT_DB


def check_store_exists(path: str | None, first: str) -> None:
    """A store named for reading (`path`, else $BAYESBENCH_DB; not the default place, which a fresh
    checkout lacks) must exist: a typo is not an empty store. The error is "no store at PATH" and
    `first`, how to make one there. Every reader says it so: the commands (`--db`) and the
    Python API (`db=`)."""
    named = path or os.environ.get("BAYESBENCH_DB")
    if named and not os.path.exists(named):
        raise StoreError(f"no store at {named} ({first})")


def cache_dir_for(path: str | None = None) -> str:
    """The evaluation-set cache beside the store: `<store folder>/cache`."""
    return os.path.join(os.path.dirname(os.path.abspath(db_path(path))), "cache")


def _store_error(path: str, err: BaseException) -> StoreError | DiskFull:
    """One line for an SQLite or OS error on the store at `path` (a full disk: `DiskFull`)."""
    text = str(err)
    if is_disk_full(err, os.path.dirname(os.path.abspath(path))):
        return DiskFull(path)
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


def connect(path: str | None = None, *, read_only: bool = False) -> sqlite3.Connection:
    """Open (creating if needed) the store in WAL mode with a busy timeout.

    `read_only=True` (for reading: the leaderboard, plots) opens an existing file without
    writing anything, so a store in a read-only folder or file can still be read; its schema is
    checked but neither created nor upgraded (`read_rows` then reads what is there)."""
    path = db_path(path)
    if os.path.isdir(path):
        raise StoreError(f"results store {path} is a directory; --db must name a file, "
                         f"e.g. {os.path.join(path, 'bayesbench.sqlite')}")
    if read_only:
        return _connect_read_only(path)
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
        if conn.execute("PRAGMA user_version").fetchone()[0] <= SCHEMA_VERSION:
            _retry(lambda: add_missing_columns(conn))  # so every store has the columns rows are written with
        _retry(lambda: _check_schema(conn, path))  # before anything writes: a foreign file stays as it was
        _retry(lambda: conn.execute("PRAGMA journal_mode = WAL"))
        _retry(lambda: conn.executescript(schema()))
        if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
            for migrate in ROW_MIGRATIONS:
                _retry(functools.partial(migrate, conn))
            _retry(lambda: conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}"))
    except sqlite3.Error as err:
        conn.close()
        raise _store_error(path, err) from None
    except ValueError:
        conn.close()
        raise
    return conn


def _connect_read_only(path: str) -> sqlite3.Connection:
    """The store opened for reading only (`connect(read_only=True)`). A WAL store in a folder this
    process cannot write may lack the shared-memory file SQLite wants: then it is opened as an
    immutable file (nobody can be writing it there)."""
    from urllib.parse import quote

    uri = "file:" + quote(os.path.abspath(path))
    last: sqlite3.Error = sqlite3.OperationalError("unable to open database file")
    for mode in ("mode=ro", "mode=ro&immutable=1"):
        try:
            conn = sqlite3.connect(f"{uri}?{mode}", uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            _retry(lambda: _check_schema(conn, path, read_only=True))
            return conn
        except sqlite3.OperationalError as err:
            last = err
            if "unable to open" not in str(err):
                break
        except sqlite3.Error as err:
            last = err
            break
    raise _store_error(path, last) from None


def _check_schema(conn: sqlite3.Connection, path: str, *, read_only: bool = False) -> None:
    """Refuse a store written by a newer schema, a `runs` table that lacks a column this version
    reads or writes (stores from before SCHEMA_VERSION existed have them all), and an SQLite file
    of another program (tables, none of them bayesbench's `runs`): bayesbench adds its tables
    only to an empty file or to its own store."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise StoreError(f"results store {path} has schema version {version}, newer than this bayesbench's "
                         f"{SCHEMA_VERSION}: upgrade bayesbench, or use another --db")
    tables = sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT "
                                               "LIKE 'sqlite_%'").fetchall())
    if tables and "runs" not in tables:
        shown = ", ".join(tables[:5]) + (" ..." if len(tables) > 5 else "")
        raise StoreError(f"results store {path} is another program's SQLite database (its tables: {shown}); "
                         "bayesbench writes only to an empty file or its own store: choose another --db")
    have = {r[1] for r in conn.execute("PRAGMA table_info(runs)").fetchall()}
    missing = [c for c in columns() if c not in have and not (read_only and c in optional_columns())]
    if have and missing:
        raise StoreError(f"results store {path} has a 'runs' table without the columns {missing} "
                         "(written by another program or an incompatible bayesbench); use another --db")



def row_settings(record: RunRecord) -> dict:
    """The settings that define a leaderboard row, what must match for two runs' seeds to be
    pooled in one row (`config_key`): the row's identity without its seeds (`bayesbench.identity`:
    task and label, evaluation, architecture and model options, training, device type, torch
    threads and code; `config["identity"]`, or from its fields for a row stored without one,
    `row_identity`), and its tuning when a search chose its hyperparameters
    (`config["tuning"]`: a tuned row is never pooled with an untuned one)."""
    config = record.config or {}
    identity = config.get("identity") or row_identity(
        {"task_config": record.task_config, "task_label": record.task_label, "arch": record.arch, "config": config,
         "environment": record.environment})
    return {**identity, **({"tuning": config["tuning"]} if config.get("tuning") is not None else {})}


def config_key(record: RunRecord) -> str:
    """`row_settings` hashed (`identity.identity_key`; an untuned row's is its `config["identity_key"]`):
    runs with the same key pool their seeds in one row."""
    return identity_key(row_settings(record))



def prepare_store(path: str | None = None) -> str:
    """Open or create the store (checking its columns), check that it can be written, and
    create its evaluation cache folder, all before any training; returns the store's path.
    Raises StoreError naming what cannot be used."""
    path = db_path(path)
    conn = connect(path)
    try:
        def probe():
            conn.execute("BEGIN IMMEDIATE")  # takes the write lock: fails here if it cannot be written
            conn.execute("ROLLBACK")
        _retry(probe)
    except sqlite3.Error as err:
        raise _store_error(path, err) from None
    finally:
        conn.close()
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


def stored_metrics(head: EvalResult) -> list[str]:
    """The final metrics of the table (`bayesbench.metric_table`) that `head` holds a score of: each has
    its three columns (an older record without one leaves them NULL)."""
    return [name for name in final_metrics() if getattr(head, name, None) is not None]


def to_row(record: RunRecord) -> dict:
    """The columns of `record` (JSON columns as Python objects; docs/results.md)."""
    head = record.headline
    ev = record.evaluation
    row = {
        "run_id": record.run_id, "seed": record.seed, "member": record.member, "group_id": record.group_id,
        "preset": record.preset, "task": record.task, "task_label": record.task_label,
        "task_config": record.task_config, "arch": record.arch, "config": record.config, "params": record.params,
        "steps": record.steps, "wall_s": record.wall_s, "steps_per_s": record.steps_per_s,
        "sequences_per_s": record.sequences_per_s, "status": record.status, "final_loss": record.final_loss,
        **{f"{name}_{part}": getattr(getattr(head, name), field) for name in stored_metrics(head)
           for part, field in (("bits", "mean"), ("ci_low", "ci_low"), ("ci_high", "ci_high"))},
        "metrics": {"primary": ev.primary, "evals": {name: e.to_json() for name, e in ev.evals.items()},
                    "permutation": ev.permutation.to_json() if ev.permutation is not None else None,
                    "param_breakdown": record.param_breakdown, "final_loss": FINAL_LOSS_MEANING},
        "curves": {name: c.to_json() for name, c in ev.curves.items()},
        "loss_curve": record.loss_curve, "environment": record.environment,
        "stop_step": record.stop_step, "stop_reason": record.stop_reason,
    }
    if record.learning_curve is not None:
        row["config"] = {**(record.config or {}), "curve": record.learning_curve.meta()}
    if record.created_at is not None:
        row["created_at"] = record.created_at
    return row


def curve_rows(record: RunRecord) -> list[tuple]:
    """The `learning_curves` rows of a record's curve (CURVE_COLUMNS order; NaN as NULL)."""
    c = record.learning_curve
    if c is None:
        return []
    return [(record.run_id, record.seed, c.eval or "", step, metric, json_safe(float(values[i])), c.sequences[i],
             c.tokens[i], c.wall_s[i])
            for metric, values in c.values.items() for i, step in enumerate(c.step)]


def _curve_from_points(meta: dict | None, points: list[dict]) -> LearningCurve | None:
    """A member's LearningCurve from its stored points and the `curve` entry of its config."""
    meta = meta or {}
    if points:  # one evaluation per curve: the one its configuration names (the first stored otherwise)
        name = meta.get("eval") or points[0]["eval"]
        points = [p for p in points if p["eval"] == name] or points
    if not points:
        return None
    steps = sorted({p["step"] for p in points})
    index = {s: i for i, s in enumerate(steps)}
    first = {p["step"]: p for p in points}
    values: dict[str, list[float]] = {}
    for p in points:
        values.setdefault(p["metric"], [math.nan] * len(steps))[index[p["step"]]] = \
            math.nan if p["value"] is None else p["value"]
    uniform = {k: math.nan if v is None else v for k, v in (meta.get("uniform") or {}).items()}
    return LearningCurve(eval=points[0]["eval"] or meta.get("eval"), task=meta.get("task", ""),
                         n_sequences=meta.get("n_sequences", 0), step=steps,
                         sequences=[first[s]["sequences"] for s in steps], tokens=[first[s]["tokens"] for s in steps],
                         wall_s=[first[s]["wall_s"] for s in steps], values=values, uniform=uniform,
                         cadence=meta.get("cadence"))


def from_row(row: dict, points: list[dict] | None = None) -> RunRecord:
    """A stored row (JSON columns decoded) back as a RunRecord, with its learning curve from
    `points` (its `learning_curves` rows as dicts; None or empty: no curve)."""
    metrics = row["metrics"] or {}
    if "evals" not in metrics or "primary" not in metrics:
        raise ValueError(f"stored run {row['run_id']} seed {row['seed']} has no per-evaluation metrics "
                         "(metrics.evals / metrics.primary): it was not written by bayesbench's run record")
    curves = row["curves"] or {}
    evaluation = MemberEvaluation(
        primary=metrics["primary"],
        evals={name: EvalResult.from_json(e) for name, e in metrics["evals"].items()},
        curves={name: PositionCurves.from_json(c) for name, c in curves.items()},
        permutation=PermutationCheck.from_json(metrics.get("permutation")))
    return RunRecord(
        run_id=row["run_id"], seed=row["seed"], member=row["member"], group_id=row["group_id"],
        preset=row["preset"], task=row["task"], task_label=row["task_label"], task_config=row["task_config"],
        arch=row["arch"], config=row["config"], params=row["params"], steps=row["steps"], wall_s=row["wall_s"],
        steps_per_s=row["steps_per_s"], sequences_per_s=row["sequences_per_s"], status=row["status"],
        final_loss=row["final_loss"], evaluation=evaluation, param_breakdown=metrics.get("param_breakdown") or {},
        loss_curve=row["loss_curve"] or [], environment=row["environment"] or {}, created_at=row["created_at"],
        learning_curve=_curve_from_points((row["config"] or {}).get("curve"), points or []),
        stop_step=row.get("stop_step"), stop_reason=row.get("stop_reason"))


def write_records(records: list[RunRecord], path: str | None = None) -> int:
    """Store one row per record and the points of its learning curve (`write_rows` of `to_row`
    and `curve_rows`, all in one transaction); returns the count."""
    curves = {(r.run_id, r.seed): curve_rows(r) for r in records if r.learning_curve is not None}
    return write_rows([to_row(r) for r in records], path, curves=curves)


def write_rows(rows: list[dict], path: str | None = None, *, curves: dict[tuple, list[tuple]] | None = None) -> int:
    """Insert raw rows (column -> value, JSON columns as Python objects) in one transaction;
    returns the count. `curves`: (run_id, seed) -> its `learning_curves` rows (CURVE_COLUMNS
    order), which replace that member's stored curve in the same transaction.

    A row whose (run_id, seed) is already stored (a re-evaluation) updates the stored one but
    keeps its `created_at` and `environment`: they describe the training run, and the
    leaderboard's "latest run" is the latest trained, not the latest re-scored.
    """
    for row in rows:
        missing = {"run_id", "seed", "task", "task_label", "arch", "params", "steps", "status"} - set(row)
        if missing:
            raise ValueError(f"rows must have {sorted(missing)}")
        file_id("run_id", row["run_id"])  # pages and files are named by it (`report/site.py`)
    names = columns()  # the metrics registered now (a metric registered after import included)
    values = []
    for row in rows:
        row = {"created_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), **row}
        unknown = set(row) - set(names)
        if unknown:
            raise ValueError(f"unknown result columns {sorted(unknown)}; known: {', '.join(names)}")
        values.append(tuple(json.dumps(json_safe(row.get(c)), allow_nan=False) if c in JSON_COLUMNS
                            else json_safe(row.get(c)) for c in names))
    keep = ("run_id", "seed", "created_at", "environment")
    sql = (f"INSERT INTO runs ({', '.join(names)}) VALUES ({', '.join('?' * len(names))}) "
           f"ON CONFLICT (run_id, seed) DO UPDATE SET "
           + ", ".join(f"{c} = excluded.{c}" for c in names if c not in keep))
    insert_points = (f"INSERT INTO learning_curves ({', '.join(CURVE_COLUMNS)}) "
                     f"VALUES ({', '.join('?' * len(CURVE_COLUMNS))})")
    conn = connect(path)
    try:
        def transaction():
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(sql, values)
                for (run_id, seed), points in (curves or {}).items():
                    conn.execute("DELETE FROM learning_curves WHERE run_id = ? AND seed = ?", (run_id, seed))
                    conn.executemany(insert_points, points)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # SQLite may have rolled back itself (a full disk)
                    conn.execute("ROLLBACK")
                raise
        _retry(transaction)
    except sqlite3.Error as err:
        raise _store_error(db_path(path), err) from None
    finally:
        conn.close()
    return len(values)


def read_records(path: str | None = None, *, where: str = "", params: tuple = ()) -> list[RunRecord]:
    """Stored records, oldest first, with their learning curves; `where` is an SQL condition on
    the columns of `runs` (docs/results.md)."""
    rows = read_rows(path, where=where, params=params)
    points = read_curve_points(path, sorted({r["run_id"] for r in rows})) if rows else {}
    return [from_row(r, points.get((r["run_id"], r["seed"]))) for r in rows]


def read_curve_points(path: str | None, run_ids: list[str]) -> dict[tuple[str, int], list[dict]]:
    """(run_id, seed) -> its `learning_curves` rows as dicts, for the given runs; {} for a store
    without the table (written before learning curves existed)."""
    if not os.path.exists(db_path(path)):
        return {}
    conn = connect(path, read_only=True)  # no schema change here
    out: dict[tuple[str, int], list[dict]] = {}
    try:
        has = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'learning_curves'").fetchone()
        if not has:
            return {}
        for i in range(0, len(run_ids), 500):  # SQLite's bound-parameter limit
            chunk = run_ids[i:i + 500]
            sql = (f"SELECT * FROM learning_curves WHERE run_id IN ({', '.join('?' * len(chunk))}) "
                   "ORDER BY run_id, seed, step, metric")
            for r in _retry(lambda: conn.execute(sql, chunk).fetchall()):
                out.setdefault((r["run_id"], r["seed"]), []).append(dict(r))
    except sqlite3.Error as err:
        raise _store_error(db_path(path), err) from None
    finally:
        conn.close()
    return out


def read_rows(path: str | None = None, *, where: str = "", params: tuple = ()) -> list[dict]:
    """Raw rows as dicts (JSON columns decoded), oldest first; `where` is an SQL condition."""
    if not os.path.exists(db_path(path)):
        return []
    conn = connect(path, read_only=True)
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'").fetchone() is None:
            return []  # an empty file: nothing stored yet
        sql = "SELECT * FROM runs" + (f" WHERE {where}" if where else "") + " ORDER BY created_at, id"
        rows = _retry(lambda: conn.execute(sql, params).fetchall())
    except sqlite3.Error as err:
        raise _store_error(db_path(path), err) from None
    finally:
        conn.close()
    out = []
    for r in rows:
        d = {**{c: None for c in optional_columns()}, **dict(r)}  # a store without them read as it is: empty
        try:
            for c in JSON_COLUMNS:
                d[c] = json.loads(d[c]) if d[c] is not None else None
            as_migrated(d)  # a store opened read-only is not migrated: its rows read as if it were
        except (TypeError, ValueError) as err:
            raise StoreError(f"results store {db_path(path)} is damaged: row {d.get('id')} (run {d.get('run_id')}, "
                             f"seed {d.get('seed')}) has unreadable {c} ({err}); it was left as it is") from None
        out.append(d)
    return out
