"""One process per run directory: `run_lock(run_dir)`, a lock file holding the owner's pid.

Two identical `train` commands would otherwise share one checkpoint.pt, each overwriting the
other's, and a stored row would point at the other run's checkpoint. The lock is an advisory
`flock` on `<run_dir>/run.lock`, which the kernel releases when its process dies, so a lock left
by a killed process is recognised as stale for certain and taken over (with a note); the file
names the holder (pid, host, command, start time) for the error a second process gets.
Re-entrant within one process (a caller may hold a run directory that `open_trainer` locks again).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator

LOCK_NAME = "run.lock"
_held: dict[str, list] = {}  # real path of the run directory -> [fd, depth]


class RunDirLocked(ValueError):
    """The run directory is in use by another live process."""


def _owner() -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(sys.argv),
            "since": time.strftime("%Y-%m-%d %H:%M:%S %Z")}


def _read(fd: int) -> dict:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return json.loads(os.read(fd, 1 << 16).decode() or "{}")
    except (OSError, ValueError):
        return {}


def _lock(fd: int) -> bool:
    """Take the lock without waiting; False if another process holds it."""
    try:
        import fcntl
    except ImportError:  # no flock on this platform (Windows): no locking
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _acquire(run_dir: str, say: Callable[[str], None]) -> int:
    path = os.path.join(run_dir, LOCK_NAME)
    os.makedirs(run_dir, exist_ok=True)
    for _ in range(20):  # retried only when the file was replaced between open and lock
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if not _lock(fd):
            owner = _read(fd)
            os.close(fd)
            who = (f"process {owner.get('pid')} on {owner.get('host')} since {owner.get('since')} "
                   f"({owner.get('command')})") if owner else "another process"
            raise RunDirLocked(f"run directory {run_dir} is in use by {who}; wait for it to finish or stop it "
                               f"(lock file {path}), or choose another --runs-dir")
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if not same:  # the holder released (and removed) it while we opened it: start over
            os.close(fd)
            continue
        old = _read(fd)
        if old.get("pid") not in (None, os.getpid()):
            say(f"bayesbench: taking over the stale lock of run directory {run_dir}: its owner, process "
                f"{old.get('pid')} on {old.get('host')} ({old.get('command')}), is gone")
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, json.dumps(_owner()).encode())
        os.fsync(fd)
        return fd
    raise RunDirLocked(f"run directory {run_dir}: could not take its lock file {path} (it keeps being replaced)")


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def run_lock(run_dir: str, say: Callable[[str], None] = _say) -> Iterator[None]:
    """Hold `run_dir`'s lock for the block (creating the directory); `RunDirLocked` (a
    ValueError) if another live process holds it; a stale lock is taken over with a note."""
    key = os.path.realpath(run_dir)
    if key in _held:
        _held[key][1] += 1
        try:
            yield
        finally:
            _held[key][1] -= 1
        return
    fd = _acquire(run_dir, say)
    _held[key] = [fd, 1]
    try:
        yield
    finally:
        del _held[key]
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(run_dir, LOCK_NAME))  # before unlocking: see _acquire's samestat
        os.close(fd)
