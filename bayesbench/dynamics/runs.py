"""A trained run, named the ways the studies accept it: its run directory, its checkpoint file,
or its run_id in the results store (the profile's and the geometry's `run`)."""

from __future__ import annotations

import os

from ..store.database import db_path, read_rows
from ..training.checkpoint import CHECKPOINT_NAME
from .config import FieldError


def find_checkpoint(run: str, db: str | None = None, field: str = "run") -> str:
    """The checkpoint of `run` (a run directory, a checkpoint file, or a run_id of the store
    `db`, whose rows record their checkpoint); a FieldError naming the config's `field` if
    there is none."""
    if os.path.isdir(run):
        path = os.path.join(run, CHECKPOINT_NAME)
        if not os.path.exists(path):
            raise FieldError(field, f"{run}: the directory holds no {CHECKPOINT_NAME}")
        return path
    if os.path.isfile(run):
        return run
    rows = read_rows(db, where="run_id = ?", params=(run,)) if os.path.exists(db_path(db)) else []
    if not rows:
        raise FieldError(field, f"{run!r}: unknown run (neither a run directory, a checkpoint file, nor a run_id "
                                f"in the results store {db_path(db)})")
    recorded = (rows[0]["config"] or {}).get("checkpoint")
    if not recorded or not os.path.exists(recorded):
        raise FieldError(field, f"{run}: the stored run has no checkpoint on this machine (recorded: {recorded!r})")
    return recorded
