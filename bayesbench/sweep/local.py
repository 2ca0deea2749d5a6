"""The local executors: worker processes (no Ray needed) and, for one worker, this process.

`LocalExecutor`: the process pool of `running.pool.run_parallel`: spawned processes (no fork
after torch has started its threads), `threads` torch threads each, longest jobs first, and a
stop request (Ctrl-C, SIGTERM) that reaches every worker: each checkpoints the step it had
reached and says where it stopped, and `interrupt.Interrupted` lists them. Workers return rows
instead of writing the store, send progress events while they train (`pool.report`), die with
the driver (Linux: a parent-death signal, so a driver killed with -9 leaves no orphan training
on), and a worker that dies mid-job (killed, out of memory) is replaced by a fresh process and
its job is run again, at most `max_retries` times; it resumes from its checkpoint.

`InProcessExecutor`: the same worker body (`one_job.train_and_score`) for one job after the
other in this process (`bayesbench run --jobs 1`, `train`): no process to start, nothing that
could outlive the command; a stop request checkpoints the running job as in a worker.

On both, a job that raises is reported "failed" with its exception and not retried (the same
config would raise again); the others go on.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

from ..running.pool import report, run_parallel
from .events import Failed, Finished, JobEvent, Retried
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


def _run(item: tuple[SweepJob, str, int, str | None], slot: int) -> Finished:
    sweep_job, runs_dir, threads, cache_dir = item
    return train_and_score(sweep_job, runs_dir, threads, report, cache_dir)


def _failed(sweep_job: SweepJob, err: BaseException) -> Failed:
    return Failed(sweep_job.key, f"{type(err).__name__}: {err}", err)


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

    def run(self, jobs: list[SweepJob], runs_dir: str, on_event: Callable[[JobEvent], None],
            cache_dir: str | None = None) -> None:
        """Run every job; report `Started`/`Stepped` (from the workers), `Finished` (the worker's
        result), `Retried` and `Failed` events (`sweep/events.py`) to `on_event`, in this process. A stop request
        raises `interrupt.Interrupted` naming the stopped jobs by their labels. `cache_dir`:
        where the workers cache evaluation sets (default: under `runs_dir`)."""
        attempts = {sweep_job.key: 1 for sweep_job in jobs}

        def died(i: int, why: str) -> bool:
            key = jobs[i].key
            if attempts[key] > self.max_retries:
                on_event(Failed(key, f"a worker process died {attempts[key]} times running it (last: {why})"))
                return False
            attempts[key] += 1
            on_event(Retried(key, attempts[key], f"its worker process died ({why})"))
            return True

        run_parallel(_run, [(sweep_job, runs_dir, self.threads, cache_dir) for sweep_job in jobs], workers=self.workers,
                     order=sorted(range(len(jobs)), key=lambda i: -jobs[i].flops),
                     initializer=_init_worker, initargs=(os.getpid(),), describe=lambda item: item[0].label,
                     on_result=lambda i, out: on_event(out),
                     on_event=lambda i, event: on_event(event),
                     on_error=lambda i, err: on_event(_failed(jobs[i], err)), on_died=died)


class InProcessExecutor:
    """Run jobs one after the other in this process, with `threads` torch threads (restored after)."""

    name = "this process"

    def __init__(self, threads: int) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.threads = threads

    def describe(self) -> str:
        return f"this process, {self.threads} torch thread{'s' if self.threads > 1 else ''}"

    def run(self, jobs: list[SweepJob], runs_dir: str, on_event: Callable[[JobEvent], None],
            cache_dir: str | None = None) -> None:
        """As `LocalExecutor.run`, in this process and in the given order; a stop request raises
        `interrupt.Interrupted` naming the job it stopped and counting those finished and not started."""
        import torch

        from ..running import interrupt

        before = torch.get_num_threads()
        finished = 0
        try:
            for i, sweep_job in enumerate(jobs):
                try:
                    out = train_and_score(sweep_job, runs_dir, self.threads, on_event, cache_dir)
                except interrupt.Interrupted as stop:
                    stop.finished, stop.not_started = finished, len(jobs) - i - 1
                    raise
                except Exception as err:  # any error: reported as the job's failure; the others go on
                    on_event(_failed(sweep_job, err))
                    continue
                finished += 1
                on_event(out)
        finally:
            torch.set_num_threads(before)


def local_executor(jobs: list[SweepJob], *, workers: int | None, threads: int, max_retries: int = 2,
                   in_process: bool = False) -> LocalExecutor | InProcessExecutor:
    """`workers` local processes (default: 1 on a GPU, else cores // threads, at most one per
    job) with `threads` torch threads each; one worker is this process when `in_process`."""
    on_gpu = any(sweep_job.job.device != "cpu" for sweep_job in jobs)
    n = workers or (1 if on_gpu else max(1, (os.cpu_count() or 1) // threads))
    n = max(1, min(n, len(jobs)))
    if n == 1 and in_process:
        return InProcessExecutor(threads)
    return LocalExecutor(n, threads, max_retries)
