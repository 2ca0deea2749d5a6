"""The default executor: local worker processes (no Ray needed), through `workers.run_parallel`.

As `bayesbench run`'s pool: spawned processes (no fork after torch has started its threads),
`threads` torch threads each, longest jobs first, and a stop request (Ctrl-C, SIGTERM) that
reaches every worker: each checkpoints the step it had reached and says where it stopped, and
`interrupt.Interrupted` lists them (see bayesbench/running/pool.py). Sweep-specific: workers return
rows instead of writing the store, send progress events while they train (`workers.report`),
die with the driver (Linux: a parent-death signal, so a driver killed with -9 leaves no orphan
training on), and a worker that dies mid-job (killed, out of memory) is replaced by a fresh
process and its job is run again, at most `max_retries` times; it resumes from its checkpoint.
A job that raises is not retried (the same config would raise again); the others go on.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

from ..running.pool import report, run_parallel
from .expand import SweepJob
from .one_job import train_and_score


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when the driver dies (no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return


def _init_worker(parent: int) -> None:
    _die_with_parent()
    if os.getppid() != parent:  # the driver died before the signal was armed
        os._exit(1)


def _run(item: tuple[SweepJob, str, int], slot: int) -> dict:
    sj, runs_dir, threads = item
    return train_and_score(sj, runs_dir, threads, report)


class LocalExecutor:
    """Run jobs on `workers` local processes with `threads` torch threads each."""

    name = "local pool"

    def __init__(self, workers: int, threads: int, max_retries: int = 2) -> None:
        if workers < 1 or threads < 1 or max_retries < 0:
            raise ValueError(f"workers and threads must be >= 1 and max_retries >= 0, got {workers}, {threads}, "
                             f"{max_retries}")
        self.workers, self.threads, self.max_retries = workers, threads, max_retries

    def describe(self) -> str:
        return f"{self.workers} local processes x {self.threads} torch threads"

    def run(self, jobs: list[SweepJob], runs_dir: str, on_event: Callable[[dict], None]) -> None:
        """Run every job; report "start"/"step" (from the workers), "done" (with the worker's
        result), "retry" and "failed" events to `on_event`, in this process. A stop request
        raises `interrupt.Interrupted` naming the stopped jobs by their labels."""
        attempts = {sj.key: 1 for sj in jobs}

        def died(i: int, why: str) -> bool:
            key = jobs[i].key
            if attempts[key] > self.max_retries:
                on_event({"kind": "failed", "key": key,
                          "error": f"a worker process died {attempts[key]} times running it (last: {why})"})
                return False
            attempts[key] += 1
            on_event({"kind": "retry", "key": key, "attempt": attempts[key],
                      "why": f"its worker process died ({why})"})
            return True

        run_parallel(_run, [(sj, runs_dir, self.threads) for sj in jobs], workers=self.workers,
                     order=sorted(range(len(jobs)), key=lambda i: -jobs[i].flops),
                     initializer=_init_worker, initargs=(os.getpid(),), describe=lambda item: item[0].label,
                     on_result=lambda i, out: on_event({"kind": "done", "key": jobs[i].key, **out}),
                     on_event=lambda i, event: on_event(event),
                     on_error=lambda i, err: on_event({"kind": "failed", "key": jobs[i].key,
                                                       "error": f"{type(err).__name__}: {err}"}),
                     on_died=died)
