"""The executor options of `bayesbench run` and `sweep` (`--jobs`, `--ray`, `--max-retries`).

The engine itself is `sweep/engine.py`: `run` and `train` build a `RunRequest` and call
`engine.run`; `sweep` expands its file into sweep jobs (`sweep.expand.expand`: a stable key and
a run directory per job) and drives them (`engine.drive`, `engine.tune_phases`). Which executor
runs the jobs:

- `--ray ADDRESS`: one Ray task per job (`sweep.ray_executor.connect`);
- several local workers: the local process pool (`sweep.local.local_executor`);
- one worker (`run --jobs 1`, `train`, a GPU): `run` and `train` train in their own process
  (`sweep.local.InProcessExecutor`); `sweep` keeps the pool (a worker that dies is retried).
"""

from __future__ import annotations

import argparse

from .args import count, positive

RAY_HELP = ("run one Ray task per job: auto (the cluster this machine joined with `ray start`), local (start Ray on "
            "this machine only) or a cluster address (docs/sweeps.md)")


def add_executor_options(p: argparse.ArgumentParser, *, jobs_help: str) -> None:
    """--jobs, --ray and --max-retries (`run`, `sweep`)."""
    p.add_argument("--jobs", type=positive, help=jobs_help)
    p.add_argument("--ray", metavar="ADDRESS", help=RAY_HELP)
    p.add_argument("--max-retries", type=count, default=2, help="times a job whose worker process died is run again "
                   "(default 2)")
