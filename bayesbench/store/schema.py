"""The results store's tables: their columns, index and schema version (docs/results.md says
what each column holds and the JSON layouts of the JSON columns).

`runs` holds one row per (run, seed); `learning_curves` one row per (run, seed, evaluation,
step, metric). Opening, writing and reading them is `store/database.py`'s; bringing a store of
an older version up to `SCHEMA_VERSION` is `store/migrations.py`'s.
"""

from __future__ import annotations

from ..metric_table import stored_columns

_SCHEMA = """
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
{metric_columns}
    metrics TEXT,
    curves TEXT,
    loss_curve TEXT,
    environment TEXT,
    created_at TEXT NOT NULL,
    stop_step INTEGER,
    stop_reason TEXT,
    UNIQUE (run_id, seed)
);
CREATE INDEX IF NOT EXISTS runs_task_arch ON runs (task_label, arch, created_at);
CREATE TABLE IF NOT EXISTS learning_curves (
    run_id TEXT NOT NULL,
    seed INTEGER NOT NULL,
    eval TEXT NOT NULL,
    step INTEGER NOT NULL,
    metric TEXT NOT NULL,
    value REAL,
    sequences INTEGER,
    tokens INTEGER,
    wall_s REAL,
    PRIMARY KEY (run_id, seed, eval, step, metric)
);
"""


def schema() -> str:
    """The tables' SQL, with a column (and its interval's) for every final metric registered now:
    read when a store is opened, so a metric registered after this module's import is stored too."""
    return _SCHEMA.replace("{metric_columns}", "\n".join(f"    {c} REAL," for c in stored_columns()))

# PRAGMA user_version of the stores this version writes. A store of a lower version (0: one that
# never set it) is brought up to it when opened for writing (`store/migrations.py`: the columns it
# lacks added, every row's code and identity recorded, and (6) a task run with options labelled
# with what ran).
SCHEMA_VERSION = 6


def columns() -> tuple[str, ...]:
    """The `runs` columns in the order rows are written (the metrics' as registered now)."""
    return ("run_id", "seed", "member", "group_id", "preset", "task", "task_label", "task_config", "arch",
            "config", "params", "steps", "wall_s", "steps_per_s", "sequences_per_s", "status", "final_loss",
            *stored_columns(), "metrics", "curves", "loss_curve", "environment", "created_at", "stop_step",
            "stop_reason")


JSON_COLUMNS = ("task_config", "config", "metrics", "curves", "loss_curve", "environment")
CURVE_COLUMNS = ("run_id", "seed", "eval", "step", "metric", "value", "sequences", "tokens", "wall_s")

# `optional_columns`: the columns a store may lack and gains, NULL in its rows, before the schema check: every metric's
# columns but those of the two metrics every store has (entropy MAE and KL), so a metric added
# to the table (`bayesbench.metric_table`) reaches existing stores, and the stop of a run cut short.
def optional_columns() -> dict[str, str]:
    """Column -> SQL type of the columns above a store may lack (see the comment above)."""
    return {**{c: "REAL" for c in stored_columns()[6:]}, "stop_step": "INTEGER", "stop_reason": "TEXT"}
