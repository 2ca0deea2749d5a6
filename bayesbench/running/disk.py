"""A full disk, as every writer reports it: checkpoints, cached evaluation sets, the results store,
run files, exports and the site (running/outfolder.py).

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
    """Whether a failed write means a full disk: ENOSPC, SQLite's "disk is full", or, with the disk
    nearly full, torch.save's short write (reported as an internal assertion of its zip writer) or
    SQLite's "disk I/O error" (what it says when its journal or shared-memory file cannot grow)."""
    if getattr(err, "errno", None) in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(err)
    if "No space left" in text or "disk is full" in text:
        return True
    if "disk I/O error" in text or (isinstance(err, RuntimeError) and ("inline_container" in text
                                                                       or "file write failed" in text)):
        try:
            return shutil.disk_usage(folder).free < _NEARLY_FULL
        except OSError:
            return False
    return False


def discard_partial(tmp: str, path: str, err: BaseException) -> BaseException:
    """Remove the partial file `tmp` of a failed write meant for `path` (then renamed to it); returns
    the error to raise: `DiskFull(path)` when the disk is full, else `err` itself."""
    full = is_disk_full(err, os.path.dirname(os.path.abspath(path)))  # before the partial file is removed
    try:
        os.unlink(tmp)
    except OSError:
        pass
    return DiskFull(path) if full else err
