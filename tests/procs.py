"""Processes as Linux's /proc shows them, for tests that check what a command leaves running
(import as `from procs import ...`; pytest puts tests/ on sys.path)."""

from __future__ import annotations

import os


def _stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, ...), or None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def live_processes(*, group: int | None = None, parent: int | None = None) -> list[int]:
    """Live (non-zombie) processes of a process group and/or with a given parent."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        fields = _stat(d)
        if fields is None or fields[0] == "Z":
            continue
        if (group is None or int(fields[2]) == group) and (parent is None or int(fields[1]) == parent):
            out.append(int(d))
    return out


def any_alive(pids: list[int]) -> bool:
    """Whether any of `pids` still runs (a zombie counts as ended)."""
    return any((fields := _stat(pid)) is not None and fields[0] != "Z" for pid in pids)
