"""The store's rows as a table that travels: CSV, JSON or Parquet, with every interval.

One row per (run, seed, evaluation set): what was trained (task, architecture, preset, the
training and model configuration as JSON, parameters, steps, wall time), on which evaluation
set it was scored (its name, the scored positions, the number of sequences), and every metric
in bits with its 95% interval over sequences (`<metric>_bits`, `<metric>_ci_low`,
`<metric>_ci_high`) beside the uniform and context-ignoring floors on the same sequences.
Each row names its evaluation set (`set_id`: `scoring.evaluate.eval_set_id`; empty in rows stored
before it was kept) and the code that made it (`code`, JSON). A row whose learning rate a search
chose (`bayesbench run --tune`) says so: `tuned` true and `tuning` (JSON: the grid, the rule, each
candidate's selection scores, the choice and its flags), as its leaderboard row is apart
("<task> (tuned)"); `tuned` false and `tuning` empty otherwise. Times are rounded to 0.01 s; a
diverged member's scores are empty (CSV) or null (JSON).
`pooled=True` exports instead the leaderboard's rows: seeds pooled per (task, evaluation set,
architecture, configuration), each metric's mean over seeds with its t-interval over seeds
(clipped at 0), how many seeds and runs went in, which runs (`run_ids`) and the configuration
that makes the row (`train`, `model`, `task_config` as JSON: rows of one arch differ there; `tuned`,
`tuning`: a tuned row is never pooled with an untuned one).
"""

from __future__ import annotations

import csv
import io
import json
import math

from ..store.records import EvalResult, RunRecord

FORMATS = ("csv", "json", "parquet")


def _num(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _round(x: float | None, digits: int = 2) -> float | None:
    x = _num(x)
    return None if x is None else round(x, digits)


def seed_rows(records: list[RunRecord]) -> list[dict]:
    """One dict per (run, seed, evaluation set), columns as the module docstring says."""
    from .rows import measured_wall

    names = EvalResult.metric_names()
    out = []
    for r in records:
        for ev_name, ev in r.evals.items():
            row = {"task": r.task, "task_label": r.task_label, "eval": ev_name, "primary": ev_name == r.primary,
                   "positions": ev.positions, "eval_sequences": ev.entropy_mae.n_sequences, "set_id": ev.set_id,
                   "scored_positions": ev.entropy_mae.n_positions, "arch": r.arch, "run_id": r.run_id,
                   "seed": r.seed, "member": r.member, "preset": r.preset, "group_id": r.group_id,
                   "status": r.status, "params": r.params, "steps": r.steps, "wall_s": _round(measured_wall(r)),
                   "steps_per_s": _round(r.steps_per_s), "final_loss_nats": _num(r.final_loss)}
            for m in names:
                s = getattr(ev, m)
                row[f"{m}_bits"] = None if s is None else _num(s.mean)
                row[f"{m}_ci_low"] = None if s is None else _num(s.ci_low)
                row[f"{m}_ci_high"] = None if s is None else _num(s.ci_high)
            for floor, scores in (ev.floors or {}).items():
                for m, s in scores.items():
                    row[f"{floor}_floor_{m}_bits"] = _num(s.mean)
            row.update({**_configuration(r), "threads": (r.environment or {}).get("threads"),
                        "device": (r.environment or {}).get("device"), "created_at": r.created_at})
            out.append(row)
    return out


def _configuration(r: RunRecord) -> dict:
    """The training, model and task configuration of a record and the code that made it
    (docs/results.md, "What a key covers"), each as JSON; whether a search chose its
    hyperparameters (`tuned`) and that search with its outcome (`tuning`, JSON; empty untuned)."""
    from ..store.tuning import tuning_of

    cfg = r.config or {}
    tuning = tuning_of(r)
    return {"train": json.dumps(cfg.get("train"), sort_keys=True, default=str),
            "model": json.dumps(cfg.get("model_args"), sort_keys=True, default=str),
            "task_config": json.dumps(r.task_config, sort_keys=True, default=str),
            "code": json.dumps(r.code, sort_keys=True, default=str), "tuned": tuning is not None,
            "tuning": None if tuning is None else json.dumps(tuning, sort_keys=True, default=str)}


def pooled_rows(records: list[RunRecord]) -> list[dict]:
    """The leaderboard's rows (seeds pooled per task, evaluation set, arch and configuration) as
    columns: the one schema of the pooled leaderboard (`report.leaderboard.board_rows`, the rows of
    `bayesbench leaderboard --json` and `bayesbench.leaderboard`) flattened for CSV and Parquet."""
    from .leaderboard import board_rows
    from .rows import aggregate

    out = []
    for row, board in zip(aggregate(records), board_rows(records)):
        first, ev = row.records[0], row.records[0].evals[row.eval]
        flat = {"task": first.task, "task_label": board["task"], "eval": board["eval"],
                "eval_sequences": board["n_sequences"], "arch": board["arch"],
                "seeds": ",".join(map(str, board["seeds"])), "n_seeds": len(board["seeds"]),
                "n_runs": len({r.run_id for r in row.records}), "params": board["params"], "steps": board["steps"],
                "diverged": sum(status != "ok" for status in row.status)}
        for m in EvalResult.metric_names():
            low, high = board["intervals_bits"].get(m, [None, None])
            flat.update({f"{m}_bits": board.get(f"{m}_bits"), f"{m}_ci_low": low, f"{m}_ci_high": high})
        flat.update({"run_ids": ",".join(board["run_ids"]), **_configuration(first), "set_id": ev.set_id,
                     "threads": (first.environment or {}).get("threads")})
        out.append(flat)
    return out


def _columns(rows: list[dict]) -> list[str]:
    cols: list[str] = []
    for row in rows:
        cols += [c for c in row if c not in cols]
    return cols


def to_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    cols = _columns(rows)
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({c: "" if row.get(c) is None else row[c] for c in cols})
    return buf.getvalue()


def write_parquet(rows: list[dict], path: str) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ValueError("--format parquet needs pyarrow: pip install 'bayesbench[export]' (or pip install pyarrow)") \
            from None
    cols = _columns(rows)
    table = pa.Table.from_pylist([{c: row.get(c) for c in cols} for row in rows])
    pq.write_table(table, path)


def export(records: list[RunRecord], fmt: str, *, pooled: bool = False, path: str | None = None) -> str | None:
    """The rows in `fmt`; returned as text (csv, json) unless `path` is given (parquet needs one)."""
    from .leaderboard import SCHEMA_VERSION

    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    rows = pooled_rows(records) if pooled else seed_rows(records)
    if fmt == "parquet":
        if path is None:
            raise ValueError("--format parquet writes a file: give --out FILE.parquet")
        write_parquet(rows, path)
        return None
    doc = {"schema_version": SCHEMA_VERSION, "rows": rows}
    text = to_csv(rows) if fmt == "csv" else json.dumps(doc, indent=2) + "\n"
    if path is None:
        return text
    with open(path, "w") as f:
        f.write(text)
    return None
