"""The engine of `bayesbench sweep`, `run` and `train`: jobs from a sweep file (a grid as data,
TOML or Python) or a preset, run on the local process pool, in this process or on a Ray
cluster, resumable and stored exactly once. See docs/sweeps.md."""

from .driver import SweepOutcome, run_sweep, stored_keys
from .expand import SweepJob, expand, job_key
from .jobs import Job, make_jobs, point, resolve
from .local import InProcessExecutor, LocalExecutor
from .sweep_file import Resources, SweepSpec, load_sweep

__all__ = ["InProcessExecutor", "Job", "LocalExecutor", "Resources", "SweepJob", "SweepOutcome", "SweepSpec", "expand",
           "job_key", "load_sweep", "make_jobs", "point", "resolve", "run_sweep", "stored_keys"]
