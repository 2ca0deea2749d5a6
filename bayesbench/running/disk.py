"""A full disk, as every writer reports it: checkpoints, cached evaluation sets, the results store.

Each writer undoes its partial write and raises `DiskFull` (an OSError: the command line says
"no space left on device: PATH" and exits 1), so what was there before is kept and the same
command continues once space is freed. Kept free of torch so the store can use it cheaply.
"""

from __future__ import annotations

import errno
import os
import shutil

_NEARLY_FULL = 1 << 20  # free bytes under which a failed write is taken for a full disk


class DiskFull(OSError):
    """No space left on the device that `path` is on. Raised by the writers (checkpoints, cached
    evaluation sets, the results store) after undoing the partial write, so what was there
    before is kept and the same command continues once space is freed."""

    def __init__(self, path: str) -> None:
        super().__init__(errno.ENOSPC, os.strerror(errno.ENOSPC), path)

    def __str__(self) -> str:
        return (f"no space left on device: {self.filename} (nothing already written was lost; free some space "
                "and run the same command again)")


def is_disk_full(err: BaseException, folder: str) -> bool:
    """Whether a failed write means a full disk: ENOSPC, SQLite's "disk is full", or torch.save's
    short write (reported as an internal assertion of its zip writer) with the disk nearly full."""
    if getattr(err, "errno", None) in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(err)
    if "No space left" in text or "disk is full" in text:
        return True
    if isinstance(err, RuntimeError) and ("inline_container" in text or "file write failed" in text):
        try:
            return shutil.disk_usage(folder).free < _NEARLY_FULL
        except OSError:
            return False
    return False
