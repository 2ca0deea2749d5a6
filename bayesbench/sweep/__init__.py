"""Sweeps: a grid of training jobs as data (TOML or Python), run on the local process pool or on
a Ray cluster, resumable and stored exactly once. See docs/sweeps.md."""

from .driver import SweepOutcome, run_sweep, stored_keys
from .expand import SweepJob, expand, job_key
from .local import LocalExecutor
from .spec import Resources, SweepSpec, load_sweep

__all__ = ["LocalExecutor", "Resources", "SweepJob", "SweepOutcome", "SweepSpec", "expand", "job_key", "load_sweep",
           "run_sweep", "stored_keys"]
