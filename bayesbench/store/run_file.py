"""`run.json`: one run's result as a file that travels, written beside its checkpoint.

Everything a reader needs without the store: what was trained (task and its configuration,
architecture and model configuration, training configuration, the command line's overrides,
seeds, evaluation sets, and the code that made it: `code`, the versions of the built-in
tunnel, architecture, trainer and metrics, or an outside file's contents), where (versions of
bayesbench, torch and Python, the project's git commit and whether the tree had changes,
device, threads), and what came out per seed (status, why and when it stopped, the final
training loss, every evaluation's metrics in bits with their 95% intervals over sequences and
floors, and the learning curve). Non-finite numbers are null.
"""

from __future__ import annotations

import dataclasses
import json
import os
from datetime import datetime, timezone

from ..running.disk import discard_partial
from .records import RunRecord, json_safe

RUN_FILE = "run.json"
FORMAT = 1


def run_document(records: list[RunRecord]) -> dict:
    """The run file's content for the records of one run (one per seed)."""
    if not records:
        raise ValueError("a run file needs the run's records (one per seed)")
    first = records[0]
    cfg = dict(first.config or {})
    seeds = []
    for r in records:
        seeds.append({
            "seed": r.seed, "member": r.member, "status": r.status, "stop_step": r.stop_step,
            "stop_reason": r.stop_reason, "final_loss_nats": r.final_loss, "primary": r.primary,
            "evals": {name: ev.to_json() for name, ev in r.evals.items()},
            "learning_curve": None if r.learning_curve is None else dataclasses.asdict(r.learning_curve),
        })
    return json_safe({
        "format": FORMAT, "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "run_id": first.run_id, "preset": first.preset, "group_id": first.group_id, "task": first.task,
        "task_label": first.task_label, "task_config": first.task_config, "arch": first.arch, "params": first.params,
        "steps": first.steps, "wall_s": first.wall_s, "config": cfg, "overrides": cfg.get("overrides") or {},
        "code": first.code,
        "environment": first.environment, "seeds": seeds,
    })


def write_run_file(path: str, records: list[RunRecord]) -> str:
    """Write `run_document(records)` to `path` atomically (a temporary file renamed); returns it."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(run_document(records), f, indent=1, default=str)
        os.replace(tmp, path)
    except BaseException as err:
        raised = discard_partial(tmp, path, err)  # a full disk: DiskFull naming the file
        if raised is err:
            raise
        raise raised from err
    return path
