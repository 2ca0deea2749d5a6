"""The default executor: a pool of local processes (no Ray needed).

As `bayesbench run`'s pool: spawned processes (no fork after torch has started its threads),
`threads` torch threads each, longest jobs first. Sweep-specific: workers return rows instead
of writing the store, send progress events through a queue, die with the driver (Linux: a
parent-death signal, so a driver killed with -9 leaves no orphan training on), and a worker that
dies mid-job (killed, out of memory) breaks the pool: the pool is rebuilt and every job it had
not finished is submitted again, at most `max_retries` times each; they resume from their
checkpoints. A job that raises is not retried (the same config would raise again).
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queue_mod
import signal
import sys
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from .expand import SweepJob
from .worker import train_and_score

_events = None  # the worker's end of the event queue (set by _init_worker)


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


def _init_worker(events, parent: int) -> None:
    global _events
    _events = events
    _die_with_parent()
    if os.getppid() != parent:  # the driver died before the signal was armed
        os._exit(1)


def _send(event: dict) -> None:
    if _events is not None:
        _events.put(event)


def _run(sj: SweepJob, runs_dir: str, threads: int) -> dict:
    return train_and_score(sj, runs_dir, threads, _send)


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
        result), "retry" and "failed" events to `on_event`, in this process."""
        ctx = multiprocessing.get_context("spawn")
        attempts = {sj.key: 0 for sj in jobs}
        todo = sorted(jobs, key=lambda sj: -sj.flops)

        def drain(events) -> None:
            while True:
                try:
                    event = events.get_nowait()
                except queue_mod.Empty:
                    return
                except Exception:  # a worker killed while writing an event: drop what it left
                    return
                on_event(event)

        while todo:
            broken: list[SweepJob] = []
            workers = min(self.workers, len(todo))
            # A fresh queue per pool: a worker killed while writing may leave the old one's lock held.
            events = ctx.Queue()
            pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker,
                                       initargs=(events, os.getpid()))
            try:
                futures = {}
                for sj in todo:
                    attempts[sj.key] += 1
                    futures[pool.submit(_run, sj, runs_dir, self.threads)] = sj
                while futures:
                    done, _ = wait(futures, timeout=0.2, return_when=FIRST_COMPLETED)
                    drain(events)
                    for fut in done:
                        sj = futures.pop(fut)
                        try:
                            out = fut.result()
                        except BrokenProcessPool:
                            broken.append(sj)
                        except Exception as err:  # the job itself raised: report, do not retry
                            on_event({"kind": "failed", "key": sj.key, "error": f"{type(err).__name__}: {err}"})
                        else:
                            on_event({"kind": "done", "key": sj.key, **out})
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
            drain(events)
            todo = []
            for sj in broken:
                if attempts[sj.key] > self.max_retries:
                    on_event({"kind": "failed", "key": sj.key,
                              "error": f"a worker process died {attempts[sj.key]} times running it"})
                else:
                    on_event({"kind": "retry", "key": sj.key, "attempt": attempts[sj.key] + 1,
                              "why": "a worker process of the pool died"})
                    todo.append(sj)
