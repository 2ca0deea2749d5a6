"""Bringing a results store written by an older bayesbench up to `schema.SCHEMA_VERSION`, and
reading one that cannot be written as if it had been.

A store of a lower version (0: one that never set `PRAGMA user_version`) is migrated when it is
opened for writing (`store/database.py` `connect`), each step in its own transaction, the
numbers of its rows left as they are:

- `add_missing_columns`: the `runs` columns it lacks (`schema.OPTIONAL_COLUMNS`), NULL in its rows;
- `ROW_MIGRATIONS`, in order: every row's code (`record_legacy_code`), every row's identity and
  identity_key, rebuilt from the row's fields (`record_identities`, `row_identity`: the only
  place an identity is rebuilt from a stored row), and (6) a task run with options labelled
  with what ran (`relabel_task_options`). A row whose run_id was its job's key is keyed anew,
  so the same command finds it again (`_rewrite_identities`).

A store opened read-only is not migrated: `as_migrated` gives each row it reads the code and
label the migration would.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Callable

from .. import versions
from ..identity import RunSpec, identity_key
from ..presets import RESOLVED_TASKS, labelled, options_label
from .schema import columns, optional_columns


def add_missing_columns(conn: sqlite3.Connection) -> None:
    """Give an existing `runs` table the optional columns it lacks (`schema.optional_columns`, a
    metric registered since the store was made among them), so rows of every store are written and
    read with one set of columns."""
    have = {r[1] for r in conn.execute("PRAGMA table_info(runs)").fetchall()}
    if not have or not set(columns()) - set(optional_columns()) <= have:
        return  # no table yet, or not a bayesbench table (the schema check names it; nothing is altered)
    for name, kind in optional_columns().items():
        if name not in have:
            try:
                conn.execute(f"ALTER TABLE runs ADD COLUMN {name} {kind}")
            except sqlite3.OperationalError as err:  # another process added it first
                if "duplicate column" not in str(err):
                    raise


def legacy_code(row: dict) -> dict:
    """The code of a row stored before rows recorded it (`versions.legacy`): its built-in parts
    at their first version, an outside tunnel's or model's contents unknown (keyed by path)."""
    config = row.get("config") or {}
    spec = (config.get("model") or {}).get("spec") or row.get("arch")
    return versions.legacy(row.get("task_config"), spec)


def record_legacy_code(conn: sqlite3.Connection) -> None:
    """Give every row without config.code its `legacy_code`, in one transaction; the numbers and
    keys of the rows stay as they are."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        rows = conn.execute("SELECT id, arch, task_config, config FROM runs").fetchall()
        for r in rows:
            config = json.loads(r["config"]) if r["config"] else {}
            if "code" in config:
                continue
            config["code"] = legacy_code({"arch": r["arch"], "config": config,
                                          "task_config": json.loads(r["task_config"]) if r["task_config"] else {}})
            conn.execute("UPDATE runs SET config = ? WHERE id = ?", (json.dumps(config, allow_nan=False), r["id"]))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise



def row_identity(row: dict, *, compiled: bool = False) -> dict:
    """The identity (`bayesbench.identity.RunSpec`) of a stored row that does not record one,
    from the fields it does: its task configuration and label, evaluation, architecture (an
    outside model's spec), model options, position table, training (`config.train`: what
    `TrainConfig.identity()` gives, but for torch.compile, which such rows do not record: off
    unless `compiled`), device type, torch threads and code."""
    config = row.get("config") or {}
    env = row.get("environment") or {}
    train = config.get("train")
    if train is not None and compiled:
        train = {**train, "compile": True}
    device = env.get("device")
    return RunSpec(task=row.get("task_config") or {}, label=row["task_label"],
                   eval_lengths=tuple(config.get("eval_lengths") or ()),
                   eval_scored=tuple(config.get("eval_scored") or ()), eval_sequences=config.get("eval_sequences"),
                   arch=(config.get("model") or {}).get("spec") or row["arch"], model=config.get("model_args") or {},
                   max_len=config.get("max_len"), train=train,
                   device_type=None if device is None else str(device).split(":")[0],
                   threads=env.get("threads"), code=config.get("code")).identity


# How stores of schema version 4 and below keyed a job (`_stored_key`): the trainer's read-back
# interval they hashed with the training (its default, unless a row's own was set), and the
# separator of a sweep file's task options in its label ("bijection V=8 [L=8, variant=paper]").
_STORED_SYNC_EVERY = 20
_SWEEP_OPTIONS = re.compile(r", (?=[A-Za-z_][A-Za-z0-9_]*=)")


def _stored_key(row: dict, compiled: bool) -> str | None:
    """The key a store of schema version 4 or below gave the job of `row` (its run_id, if the
    row is one of `bayesbench run`, `train` or `sweep`), rebuilt from the row's fields with
    torch.compile on or off; None for a row without training."""
    config, env = row.get("config") or {}, row.get("environment") or {}
    if config.get("train") is None or config.get("seeds") is None:
        return None
    threads, code = env.get("threads"), versions.keyed(config.get("code"))
    ident = {"task": row.get("task_config"), "label": row.get("task_label"),
             "eval_lengths": config.get("eval_lengths") or [], "eval_scored": config.get("eval_scored") or [],
             "eval_sequences": config.get("eval_sequences"),
             "arch": (config.get("model") or {}).get("spec") or row.get("arch"), "model": config.get("model_args"),
             "max_len": config.get("max_len"),
             "train": {**config["train"], "compile": compiled, "sync_every": _STORED_SYNC_EVERY},
             "seeds": config["seeds"], "device": str(env.get("device")).split(":")[0],
             **({"threads": threads} if threads != 1 else {}), **({"code": code} if code else {})}
    return hashlib.sha256(json.dumps(ident, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def _unified_label(row: dict) -> str:
    """A sweep row's label with its task options in the one format of schema 5
    (`presets.options_label`); `_ran_label` then says what ran."""
    label = row.get("task_label") or ""
    found = re.fullmatch(r"(.*) \[(.*)\]", label)
    if not found or not str(row.get("group_id") or "").startswith("sweep-"):
        return label
    return options_label(found[1], dict(item.split("=", 1) for item in _SWEEP_OPTIONS.split(found[2])))


def _ran_label(label: str, task_config: dict | None) -> str:
    """The label (`presets.labelled`: the settings that ran) of a row that stores of schema 5 and
    below labelled with its task options as given (`presets.options_label`: 'bijection V=8 L=7
    repl [L=19 V=20 variant=code]' becomes 'bijection V=20 L=19 repl'); any other label as it is."""
    found = re.fullmatch(r"(.*?) \[(.*)\]", label or "")
    if found is None:
        return label
    base = RESOLVED_TASKS.get(found[1])
    if base is None or not task_config or base["task"] != task_config.get("task"):
        return label
    return labelled(found[1], base, task_config)  # the row's task_config: Task.config() of what ran


def relabel_task_options(conn: sqlite3.Connection) -> None:
    """Schema 6: every row labelled with its task options as given (`_ran_label`) gets the label
    of what ran, in its task_label and its identity (`_rewrite_identities`); a row whose run_id is
    its job's key (`identity_key` of its identity and seeds) is keyed anew, so the same command
    finds it again."""
    def change(row: dict) -> tuple[str, dict, str | None] | None:
        config = row["config"] or {}
        label, identity = _ran_label(row["task_label"], row["task_config"]), config.get("identity")
        if label == row["task_label"] or not isinstance(identity, dict):
            return None
        relabelled, seeds = {**identity, "label": label}, config.get("seeds")
        keyed = seeds is not None and identity_key(identity, seeds) == row["run_id"]
        return label, relabelled, identity_key(relabelled, seeds) if keyed else None

    _rewrite_identities(conn, "id, run_id, seed, task_label, task_config, config", change)


def record_identities(conn: sqlite3.Connection) -> None:
    """Give every row without config.identity its identity (`row_identity`) and identity_key
    (`_rewrite_identities`); the numbers of the rows stay as they are.

    A row whose run_id is the key its job had (`_stored_key`: a row of `run`, `train` or `sweep`)
    is keyed anew (`identity.identity_key` of its identity and seeds: the key the same command
    gives the job now, so it finds the row again); a sweep row's label gets the one format of task
    options. Any other row keeps its run_id."""
    def change(row: dict) -> tuple[str, dict, str | None] | None:
        config = row["config"] or {}
        if "identity" in config:
            return None
        compiled = next((c for c in (False, True) if _stored_key(row, c) == row["run_id"]), None)
        label = _unified_label(row)
        identity = row_identity({**row, "task_label": label}, compiled=bool(compiled))
        return label, identity, identity_key(identity, config["seeds"]) if compiled is not None else None

    _rewrite_identities(conn, "id, run_id, seed, group_id, task_label, task_config, arch, config, environment",
                        change)


def _rewrite_identities(conn: sqlite3.Connection, columns: str,
                        change: Callable[[dict], tuple[str, dict, str | None] | None]) -> None:
    """In one transaction, newest row first: `change(row)` (its JSON columns read) gives the
    (label, identity, key) a row takes, or None to leave it. A row given a key takes it as its
    run_id, its learning curve and the studies made of it following, unless another row already
    holds that (run_id, seed): of two rows that would take it the newer does, the older keeps its
    run_id (the leaderboard pools both and counts the seed once)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        rows = [dict(r) for r in conn.execute(f"SELECT {columns} FROM runs ORDER BY created_at DESC, id DESC")]
        held = {(r["run_id"], r["seed"]) for r in rows}
        renamed: dict[str, str] = {}
        for row in rows:
            for column in ("task_config", "config", "environment"):
                if column in row:
                    row[column] = json.loads(row[column]) if row[column] else None
            changed = change(row)
            if changed is None:
                continue
            label, identity, keyed = changed
            run_id = row["run_id"]
            if keyed is not None and (keyed, row["seed"]) not in held:
                held.discard((run_id, row["seed"]))
                held.add((keyed, row["seed"]))
                conn.execute("UPDATE learning_curves SET run_id = ? WHERE run_id = ? AND seed = ?",
                             (keyed, run_id, row["seed"]))
                renamed[run_id] = keyed
                run_id = keyed
            config = {**(row["config"] or {}), "identity": identity, "identity_key": identity_key(identity)}
            conn.execute("UPDATE runs SET run_id = ?, task_label = ?, config = ? WHERE id = ?",
                         (run_id, label, json.dumps(config, allow_nan=False), row["id"]))
        studies = {r[1] for r in conn.execute("PRAGMA table_info(studies)").fetchall()}
        if "run_id" in studies:
            conn.executemany("UPDATE studies SET run_id = ? WHERE run_id = ?",
                             [(new, old) for old, new in renamed.items()])
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise



#: The migrations of an old store's rows, in the order `connect` runs them (each in its own
#: transaction, each leaving a row it already applied to as it is).
ROW_MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    record_legacy_code, record_identities, relabel_task_options)


def as_migrated(row: dict) -> None:
    """Give a row read from a store that was not migrated (opened read-only) the code
    (`legacy_code`) and label (`_unified_label`, `_ran_label`) its migration would give it, in
    place; a migrated row is left as it is. Its JSON columns must be decoded."""
    if row["config"] is not None and "code" not in row["config"]:
        row["config"]["code"] = legacy_code(row)
    if row["config"] is not None and "identity" not in row["config"]:  # the label its migration gives it
        row["task_label"] = _unified_label(row)
    row["task_label"] = _ran_label(row["task_label"], row["task_config"])
