"""Stopping cleanly on SIGINT (Ctrl-C) and SIGTERM.

A signal records a stop request. Work that must not be cut in the middle runs inside
`deferred()`: one training step moves the model, the optimiser and the data streams together,
so the training loop defers the request, finishes its step, writes a checkpoint at that step and
then raises `Interrupted` itself (`bayesbench.training.trainer.Trainer.fit`). Anywhere else the handler
raises `Interrupted` at once: an evaluation is simply redone on resume, and every store write is
one transaction that rolls back.

Three kinds of process:
- the command's process: while the program starts (`guard_startup()`, before its heavy imports,
  until `startup_done()` when the command runs) a signal ends it at once with one line; then
  (`handling()`) both signals are requests; a second request while a step is deferred raises at
  once (checkpoints are written atomically, so that is safe too);
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

        # what multiprocessing's atexit hook runs for these (private: typeshed leaves it out)
        util._run_finalizers(0)  # type: ignore[attr-defined]
    os._exit(code)


_startup_previous: dict | None = None  # the handlers `guard_startup` replaced, while it is in force


def is_program() -> bool:
    """Whether this process is the `bayesbench` program starting: its console script (the script
    being __main__), or `python -m bayesbench.cli` (sys.argv[0] is '-m' while Python imports the
    package); not a Python program or test that imports the CLI, nor a spawned worker re-running
    the script (its sys.argv is the program's, its __main__ is not the script)."""
    argv0 = sys.argv[0] if sys.argv else ""
    if argv0 == "-m":
        return True
    name = os.path.basename(argv0)
    for suffix in (".exe", "-script.py", "-script.pyw"):
        name = name.removesuffix(suffix)
    return name == "bayesbench" and getattr(sys.modules.get("__main__"), "__file__", None) == argv0


def guard_startup() -> None:
    """In the program, before its heavy imports: SIGINT or SIGTERM while it starts (importing the
    commands, building the parser) ends it at once with one line and 128 + the signal's number;
    nothing has been done yet, so nothing needs saving. `startup_done()` (where a command starts
    to run, `cli.errors.run_command`) hands the signals back. Does nothing elsewhere."""
    global _startup_previous
    if _startup_previous is not None or not is_program() or threading.current_thread() is not threading.main_thread():
        return
    # a signal the process was started with ignored (a worker's SIGINT) stays ignored
    _startup_previous = {s: h for s in SIGNALS if (h := signal.getsignal(s)) in (signal.default_int_handler,
                                                                                 signal.SIG_DFL)}
    for s in _startup_previous:
        signal.signal(s, _startup_handler)


def startup_done() -> None:
    """The command is about to run: the signals go back to what they were (Python's
    KeyboardInterrupt for SIGINT, which the command's error handling turns into its line)."""
    global _startup_previous
    if _startup_previous is None:
        return
    for s, h in _startup_previous.items():
        if signal.getsignal(s) is _startup_handler:
            signal.signal(s, h)
    _startup_previous = None


def _startup_handler(signum: int, frame) -> None:
    name = signal.Signals(signum).name
    words = [a for a in sys.argv[1:] if not a.startswith("-")]
    command = f"bayesbench {words[0]}" if words else "bayesbench"
    sys.stderr.write(f"{command}: interrupted by {name} while starting; nothing was done; rerun the command to do "
                     "it again\n")
    exit_now(128 + signum)


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
