"""One engine for `bayesbench run`, `train` and `sweep`: which executor runs the jobs, and the
driver under stop handling.

The three commands expand into the same sweep jobs (`sweep.expand.sweep_job`: a stable key and
a run directory per job) and hand them to the sweep driver (`sweep.driver.run_sweep`): a job
whose rows are stored under its key is skipped, the others train (continuing from their
checkpoints) and the driver alone stores each job's rows, once. Only the source of the jobs
(a preset and the command line, or a sweep file) and the executor differ:

- `--ray ADDRESS`: one Ray task per job (`sweep.ray_executor.on_ray`);
- several local workers: the local process pool (`sweep.local.local_executor`);
- one worker (`run --jobs 1`, `train`, a GPU): `run` and `train` train in their own process
  (`sweep.local.InProcessExecutor`); `sweep` keeps the pool (a worker that dies is retried).

Torch threads: numbers differ in their last digits between thread counts, so the default is a
fixed count, not the machine's: one thread per worker (`DEFAULT_THREADS`), with at most
cores / threads local workers; every stored row records the count (its environment's
"threads").
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from .args import count, positive

DEFAULT_THREADS = 1
RAY_HELP = ("run one Ray task per job: auto (the cluster this machine joined with `ray start`), local (start Ray on "
            "this machine only) or a cluster address (docs/sweeps.md)")


def add_executor_options(p: argparse.ArgumentParser, *, jobs_help: str) -> None:
    """--jobs, --ray and --max-retries (`run`, `sweep`)."""
    p.add_argument("--jobs", type=positive, help=jobs_help)
    p.add_argument("--ray", metavar="ADDRESS", help=RAY_HELP)
    p.add_argument("--max-retries", type=count, default=2, help="times a job whose worker process died is run again "
                   "(default 2)")


def drive(jobs: list, executor, *, db: str | None, runs_dir: str, progress: bool, say: Callable[[str], None],
          lines: bool = False):
    """`run_sweep` with SIGINT/SIGTERM as stop requests (each running job checkpoints, then
    `interrupt.Interrupted` says where; `cli/errors.py` prints it), the executor closed after."""
    from ..running import interrupt
    from ..sweep.driver import run_sweep

    try:
        with interrupt.handling():
            return run_sweep(jobs, executor, db=db, runs_dir=runs_dir, progress=progress, say=say, lines=lines)
    finally:
        if hasattr(executor, "close"):
            executor.close()
