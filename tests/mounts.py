"""A small tmpfs for tests of full disks and read-only file systems (import as `from mounts import ...`;
pytest puts tests/ on sys.path). Mounting needs root (or CAP_SYS_ADMIN): without it the test is
skipped, saying why."""

from __future__ import annotations

import contextlib
import os
import subprocess

import pytest


@contextlib.contextmanager
def tmpfs(path, size: str = "1m"):
    """Mount a tmpfs of `size` at `path` (created) for the block; unmounted afterwards."""
    os.makedirs(path, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip() or done.returncode}")
    try:
        yield str(path)
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def remount_read_only(path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True, capture_output=True)
