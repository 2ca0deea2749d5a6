"""Stopping cleanly on SIGINT (Ctrl-C) and SIGTERM.

A signal records a stop request. Work that must not be cut in the middle runs inside
`deferred()`: one training step moves the model, the optimiser and the data streams together,
so the training loop defers the request, finishes its step, writes a checkpoint at that step and
then raises `Interrupted` itself (`bayesbench.training.trainer.Trainer.fit`). Anywhere else the handler
raises `Interrupted` at once: an evaluation is simply redone on resume, and every store write is
one transaction that rolls back.

Three kinds of process:
- the command's process (`handling()`): both signals are requests; a second request while a
  step is deferred raises at once (checkpoints are written atomically, so that is safe too);
- a worker process of `bayesbench.running.pool` (`install_worker()`): SIGINT is ignored (a terminal's
  Ctrl-C reaches the whole process group; the parent decides and forwards SIGTERM), SIGTERM is
  a request while a job runs (`job()`), and ends an idle worker at once;
- anything else (library use): Python's own KeyboardInterrupt, untouched.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A stop request honoured. `signame` names the signal ('SIGINT' or 'SIGTERM').

    `stopped` lists the work cut short, one dict per run: "run" (what), "step" and "steps"
    (where training stopped, None when it had not started or had finished), "checkpoint" (the
    checkpoint kept, or None) and "phase" ("training" or "evaluation"); `finished` and
    `not_started` count a batch of jobs.
    """

    def __init__(self, signame: str = "SIGINT") -> None:
        super().__init__(signame)
        self.signame = signame
        self.stopped: list[dict] = []
        self.finished = 0
        self.not_started = 0
        self.notes: list[str] = []  # what was done about the cut-short work (e.g. a partial study removed)

    @property
    def exit_code(self) -> int:
        """The shell's convention: 128 + the signal number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + int(getattr(signal, self.signame, signal.SIGINT))


def claim(stop: Interrupted, run: str, where: dict | None = None) -> Interrupted:
    """Name the work `stop` cut short: its entries (a Trainer's, saying where training stopped)
    take the name `run`; without any, one entry `{"run": run, **where}` is added (`where`, e.g.
    {"phase": "evaluation", "checkpoint": path}; default {"phase": "setup"}). Returns `stop`."""
    if stop.stopped:
        for s in stop.stopped:
            s["run"] = run
    else:
        stop.stopped.append({"run": run, **(where or {"phase": "setup"})})
    return stop


_requested: str | None = None  # the first signal received, by name
_mode: str | None = None  # None (not installed), "main" or "worker"
_deferring = 0  # depth of deferred() regions
_in_job = 0  # depth of job() regions (workers)


def requested() -> str | None:
    """The name of the signal that asked this process to stop, or None."""
    return _requested


def check() -> None:
    """Raise `Interrupted` if a stop was requested (a safe point in deferred work)."""
    if _requested is not None:
        raise Interrupted(_requested)


def reset() -> None:
    """Forget a handled request (the next batch of work starts clean)."""
    global _requested
    _requested = None


def exit_now(code: int) -> None:
    """Leave the process at once (os._exit) after flushing stdout/stderr and releasing what
    multiprocessing registered (semaphores, e.g. tqdm's lock, which the resource tracker would
    otherwise report as leaked). For a process that has saved everything it must: the
    interpreter's own teardown of torch can take seconds on a loaded machine."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(Exception):
        from multiprocessing import util

        util._run_finalizers(0)  # what multiprocessing's atexit hook runs for these
    os._exit(code)


def _handler(signum: int, frame) -> None:
    global _requested
    name = signal.Signals(signum).name
    repeat = _requested is not None
    _requested = _requested or name
    if _mode == "worker" and not _in_job:
        exit_now(128 + signum)  # idle: nothing to keep
    if _deferring and not (repeat and _mode == "main"):
        return  # honoured at the next safe point
    raise Interrupted(_requested)


@contextlib.contextmanager
def handling() -> Iterator[None]:
    """In the command's process: SIGINT and SIGTERM become stop requests for the duration.

    Outside the main thread (where Python cannot install handlers) this does nothing."""
    global _mode
    if threading.current_thread() is not threading.main_thread() or _mode is not None:
        yield
        return
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    reset()
    _mode = "main"
    try:
        for s in SIGNALS:
            signal.signal(s, _handler)
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        _mode = None


def install_worker() -> None:
    """In a worker process: ignore SIGINT, and SIGTERM stops the job (or the idle worker)."""
    global _mode
    _mode = "worker"
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _handler)


@contextlib.contextmanager
def job() -> Iterator[None]:
    """A worker's job: a SIGTERM now stops the job (`Interrupted`) instead of the process.
    A job that starts after a stop request is refused at once."""
    global _in_job
    _in_job += 1
    try:
        check()
        yield
    finally:
        _in_job -= 1


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold stop requests inside the block; the block polls `requested()` at its safe points."""
    global _deferring
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1


@contextlib.contextmanager
def ignoring_sigint() -> Iterator[None]:
    """SIGINT ignored in this process while the block runs (child processes started inside
    inherit the ignored disposition through exec, so they start without a KeyboardInterrupt
    handler of their own). Main thread only; elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
