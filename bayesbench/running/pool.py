"""Jobs in worker processes that stop cleanly: `run_parallel`.

Each worker is a spawned process with a pipe to this one; jobs go out one at a time, longest
first, results come back as they finish. What this adds over a stock process pool:

- a stop request (SIGINT, SIGTERM: `bayesbench.running.interrupt`) reaches every worker as SIGTERM; a
  training worker finishes its step, writes a checkpoint and reports where it stopped; an idle
  one exits; whatever is still alive after `grace_s` seconds is killed (its last periodic
  checkpoint stays, since checkpoints are replaced atomically). Nothing waits for running jobs
  to end, so a Ctrl-C never hangs;
- a job that fails stops the others the same way and its error is raised here (or, with
  `on_error`, is reported and the others go on);
- a worker that dies (killed, out of memory) is named with the job it was running (or, with
  `on_died`, a fresh process takes its place and the job may be handed out again);
- a job can send progress to this process while it runs (`report`, received by `on_event`).

Workers start with SIGINT ignored: a terminal's Ctrl-C goes to the whole process group, and
this process decides what every worker does.
"""

from __future__ import annotations

import multiprocessing
import pickle
import signal
import time
import traceback
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import wait
from typing import Any

from . import interrupt

GRACE_S = 5.0  # after a stop request: how long workers get to checkpoint before they are killed


class WorkerDied(RuntimeError):
    """A worker process ended without answering (killed, out of memory, crashed)."""


class _Event:
    """A message a job sends while it runs (`report`); replies to the parent are tuples."""

    def __init__(self, payload: Any) -> None:
        self.payload = payload


_conn = None  # in a worker process: its pipe to the parent


def report(payload: Any) -> None:
    """From a job running in a worker of `run_parallel`: hand `payload` (picklable) to the
    parent's `on_event` now. Does nothing outside a worker, or once the parent has gone
    (progress is best effort). A stop request waits until the message is whole in the pipe
    (a message cut in half would garble the job's answer), then stops the job."""
    if _conn is None:
        return
    try:
        with interrupt.deferred():
            _conn.send(_Event(payload))
    except (BrokenPipeError, OSError):
        pass
    interrupt.check()


def _portable(err: BaseException) -> BaseException:
    """`err` with its traceback as a note (shown by --debug), or a stand-in if it cannot be pickled."""
    note = "in a worker process:\n" + "".join(traceback.format_exception(err)).rstrip()
    try:
        err.add_note(note)
        pickle.dumps(err)
        return err
    except Exception:
        stand_in = RuntimeError(f"{type(err).__name__}: {err}")
        stand_in.add_note(note)
        return stand_in


def _worker_main(conn, fn: Callable, initializer: Callable | None, initargs: tuple) -> None:
    global _conn
    _conn = conn
    interrupt.install_worker()
    if initializer is not None:
        initializer(*initargs)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:  # no more work: leave without the interpreter's slow teardown
            interrupt.exit_now(0)
        index, item, slot = message
        try:
            with interrupt.job():
                reply = (index, True, fn(item, slot))
        except BaseException as err:  # every outcome goes back to the parent
            reply = (index, False, _portable(err))
        try:
            conn.send(reply)
        except (BrokenPipeError, OSError):
            return
        if interrupt.requested():  # told to stop and answered: leave now, skipping a slow teardown
            interrupt.exit_now(0)


def _exit_words(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}" + (" (out of memory?)" if -code == signal.SIGKILL else "")
    return f"exit code {code}"


class _Slot:
    def __init__(self, number: int, process, conn) -> None:
        self.number, self.process, self.conn = number, process, conn
        self.index: int | None = None  # the job it runs

    def send(self, message) -> bool:
        try:
            self.conn.send(message)
            return True
        except (BrokenPipeError, OSError):
            return False


def _collect(slot: _Slot, on_event: Callable[[int, Any], None] | None = None) -> tuple[bool, Any] | None:
    """The slot's answer if it has one (None: not yet, or its process ended without answering).
    Events its job sent before go to `on_event(index, payload)` (dropped without one). A stop
    request waits while a message is read (one cut in half would garble the pipe); the caller
    honours it (`interrupt.check`)."""
    try:
        while True:
            with interrupt.deferred():
                if not slot.conn.poll():
                    return None
                message = slot.conn.recv()
            if isinstance(message, _Event):
                if on_event is not None and slot.index is not None:
                    on_event(slot.index, message.payload)
                continue
            index, ok, value = message
            return ok, value
    except (EOFError, OSError):
        pass
    return None


def run_parallel(fn: Callable[[Any, int], Any], items: list, *, workers: int, order: list[int] | None = None,
                 initializer: Callable | None = None, initargs: tuple = (),
                 on_result: Callable[[int, Any], None] | None = None, describe: Callable[[Any], str] = str,
                 grace_s: float = GRACE_S, on_event: Callable[[int, Any], None] | None = None,
                 on_error: Callable[[int, BaseException], None] | None = None,
                 on_died: Callable[[int, str], bool] | None = None) -> list:
    """[fn(item, slot) for item in items], computed in `workers` spawned processes.

    `fn`, `initializer` and the items must be picklable (module-level functions); `slot` is the
    worker's number (0..workers-1, e.g. a progress bar's line). `order`: the order jobs are
    handed out (default: as given). `on_result(index, value)` runs here as each job finishes,
    `on_event(index, payload)` as a running job calls `report(payload)`.
    A failed job stops the others and its exception is raised; with `on_error(index, error)`
    it is reported there instead and the others go on (its result is None). A worker process
    that dies raises `WorkerDied`; with `on_died(index, why)` a fresh process takes its place
    and the job is handed out again if on_died returns True (else its result is None).
    A stop request raises `interrupt.Interrupted` listing the stopped jobs (see the module
    docstring).
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    order = list(range(len(items))) if order is None else list(order)
    if sorted(order) != list(range(len(items))):
        raise ValueError("order must be a permutation of the item indices")
    if not items:
        return []
    ctx = multiprocessing.get_context("spawn")  # no fork after torch has started its thread pools
    pending = deque(order)
    results: dict[int, Any] = {}
    slots: list[_Slot] = []

    def hand_out(slot: _Slot) -> None:
        slot.index = None
        if pending:
            slot.index = pending.popleft()
            if slot.send((slot.index, items[slot.index], slot.number)):
                return
        slot.send(None)  # nothing left (or the pipe is gone): let it exit

    def start(n: int) -> _Slot:
        with interrupt.ignoring_sigint():  # children inherit SIGINT ignored
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_worker_main, args=(child, fn, initializer, initargs), daemon=True,
                            name=f"bayesbench-worker-{n}")
            p.start()
            child.close()
        return _Slot(n, p, parent)

    try:
        for n in range(min(workers, len(items))):
            slots.append(start(n))
        for slot in slots:
            hand_out(slot)
        while any(s.index is not None for s in slots):
            busy = [s for s in slots if s.index is not None]
            wait([s.conn for s in busy] + [s.process.sentinel for s in busy])
            for slot in busy:
                answer = _collect(slot, on_event)
                index = slot.index
                assert index is not None  # a busy slot holds its job until it is handed out again below
                if answer is None:
                    if slot.process.is_alive():
                        continue
                    slot.process.join()
                    why = _exit_words(slot.process.exitcode)
                    if on_died is None:
                        raise WorkerDied(f"the worker process running {describe(items[index])} ended without "
                                         f"a result ({why})")
                    slot.index = None
                    slot.conn.close()
                    slots[slot.number] = fresh = start(slot.number)
                    if on_died(index, why):
                        pending.appendleft(index)
                    hand_out(fresh)
                    continue
                ok, value = answer
                if not ok and (on_error is None or isinstance(value, KeyboardInterrupt)):
                    raise value
                if ok:
                    results[index] = value
                hand_out(slot)
                if not ok and on_error is not None:  # (without on_error the error was raised above)
                    on_error(index, value)
                elif ok and on_result is not None:
                    on_result(index, value)
            interrupt.check()  # a stop request that arrived while a message was read
    except KeyboardInterrupt as err:
        stop = err if isinstance(err, interrupt.Interrupted) else interrupt.Interrupted("SIGINT")
        raise _stop(slots, items, describe, results, pending, stop, grace_s, on_result) from None
    except BaseException:
        _stop(slots, items, describe, results, pending, interrupt.Interrupted("SIGTERM"), grace_s)
        raise
    finally:
        for slot in slots:  # every worker has been told to exit (or was killed): reap them
            slot.process.join(timeout=grace_s)
            if slot.process.is_alive():
                slot.process.kill()
                slot.process.join(timeout=1.0)
            slot.conn.close()
    return [results.get(i) for i in range(len(items))]


def _stop(slots: list[_Slot], items: list, describe, results: dict, pending: deque,
          stop: interrupt.Interrupted, grace_s: float,
          on_result: Callable[[int, Any], None] | None = None) -> interrupt.Interrupted:
    """Ask every worker to stop (SIGTERM), collect what they say for `grace_s` seconds, kill the
    rest. A job that finishes in that time is a result like any other (`on_result` gets it, so
    a caller that stores results stores it). Returns `stop` filled with what was stopped,
    finished and never started."""
    running = {s.number: s for s in slots if s.process.is_alive()}
    for slot in running.values():
        slot.process.terminate()
        slot.send(None)
    deadline = time.monotonic() + grace_s
    answered: set[int] = set()
    try:
        while running and time.monotonic() < deadline:
            wait([s.conn for s in running.values() if s.index is not None]
                 + [s.process.sentinel for s in running.values()], timeout=max(0.0, deadline - time.monotonic()))
            for number, slot in list(running.items()):
                index = slot.index
                answer = _collect(slot) if index is not None else None
                if index is not None and answer is not None:
                    ok, value = answer
                    answered.add(index)
                    if ok:
                        results[index] = value
                        if on_result is not None:
                            on_result(index, value)
                    elif isinstance(value, interrupt.Interrupted):
                        stop.stopped.extend(value.stopped or [{"run": describe(items[index]), "phase": "setup"}])
                    slot.index = None
                elif not slot.process.is_alive():
                    del running[number]
    except KeyboardInterrupt:
        pass  # asked again: stop waiting
    for slot in slots:
        if slot.index is not None and slot.index not in answered:
            stop.stopped.append({"run": describe(items[slot.index]), "phase": "killed",
                                 "why": _exit_words(slot.process.exitcode) if not slot.process.is_alive()
                                 else f"no answer within {grace_s:g} s, killed"})
        if slot.process.is_alive():
            slot.process.kill()
    stop.finished = len(results)
    stop.not_started = len(pending)
    return stop

