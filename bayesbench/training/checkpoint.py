"""Checkpoint files: written atomically, read back with any damage named.

`save_atomic` writes to a temporary file beside the target, flushes it to disk and renames it
over the target, so the file at `path` is always a whole checkpoint: an interruption (Ctrl-C,
kill -9, a full disk) leaves the previous one. `load_checkpoint` turns every way a file can be
unreadable (empty, truncated, not a checkpoint, missing entries) into `DamagedFile`, a
ValueError naming the file and what is wrong, and never modifies the file.
"""

from __future__ import annotations

import glob
import os
import pickle
import re

import torch

from ..running.disk import DiskFull, is_disk_full

TMP_INFIX = ".tmp"


class DamagedFile(ValueError):
    """An input file that cannot be used as it is (named in the message, left untouched)."""


def save_atomic(obj, path: str) -> str:
    """torch.save `obj` to `path` atomically (temporary file, fsync, rename); returns `path`."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = f"{path}{TMP_INFIX}{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        full = is_disk_full(err, folder)  # before the partial file is removed
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if full:
            raise DiskFull(path) from err
        raise
    return path


def remove_leftovers(path: str) -> list[str]:
    """Delete temporary files of `save_atomic(..., path)` left by killed processes (call only
    while holding the run directory's lock, so no live writer owns them); returns them."""
    gone = []
    for tmp in glob.glob(glob.escape(path) + TMP_INFIX + "*"):
        try:
            os.unlink(tmp)
            gone.append(tmp)
        except OSError:
            pass
    return gone


def load_failure(path: str, err: BaseException) -> str:
    """Why torch.load could not read `path`, in a few words and without torch's advice (to load with
    weights_only=False, or to allow a class): "the file is empty", "16 bytes: not a file torch.save
    wrote", "an incomplete or damaged zip archive", "pickled Python objects, not only tensors: X"."""
    try:
        size = os.path.getsize(path)
    except OSError:
        size = None
    if size == 0:
        return "the file is empty"
    text = str(err)
    found = re.search(r"GLOBAL ([\w.]+) was not an allowed global", text)
    if found:  # a weights-only load met a class: e.g. torch.save(model) instead of its state_dict()
        return (f"pickled Python objects, not only tensors: {found.group(1)}; save module.state_dict() rather than "
                "the module")
    if "zip archive" in text or "central directory" in text:
        what = "an incomplete or damaged zip archive"
    elif isinstance(err, (pickle.UnpicklingError, EOFError)) or "Weights only load failed" in text:
        what = "not a file torch.save wrote"
    else:
        what = f"{type(err).__name__}: {text.split('. ')[0].strip()}"
    return what if size is None else f"{size:,} bytes: {what}"


def _damage(path: str, err: BaseException) -> str:
    why = load_failure(path, err)
    return why if why == "the file is empty" else f"it is truncated or not a PyTorch checkpoint ({why})"


def load_checkpoint(path: str, map_location=None, *, required: tuple[str, ...] = (), what: str = "checkpoint",
                    weights_only: bool = False) -> dict:
    """torch.load a checkpoint, naming `path` and the damage in a `DamagedFile` if it cannot be
    read or lacks a `required` entry. The file itself is never changed."""
    if os.path.isdir(path):
        raise DamagedFile(f"{what} {path} is a directory, not a file")
    try:
        state = torch.load(path, map_location=map_location, weights_only=weights_only)
    except FileNotFoundError:
        raise DamagedFile(f"{what} {path} does not exist") from None
    except PermissionError as err:
        raise DamagedFile(f"{what} {path} cannot be read: {err.strerror}") from None
    except Exception as err:  # noqa: BLE001 - any failure to parse the file is damage
        raise DamagedFile(f"{what} {path} is damaged: {_damage(path, err)}; it was left as it is "
                          "(move it away to start over, or restore a copy)") from err
    if not isinstance(state, dict):
        raise DamagedFile(f"{what} {path} is not a bayesbench {what} (it holds a {type(state).__name__}, "
                          "not a dict); it was left as it is")
    missing = [k for k in required if k not in state]
    if missing:
        raise DamagedFile(f"{what} {path} is not a bayesbench {what} or is from an incompatible version: "
                          f"it lacks {', '.join(missing)}; it was left as it is")
    return state
