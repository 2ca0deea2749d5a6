"""Checkpoints: a trainer's state written atomically, read back with any damage named, resumed
only by the same run and code, and a finished run rebuilt from its file alone.

Files: `save_atomic` writes to a temporary file beside the target, flushes it to disk and
renames it over the target, so the file at `path` is always a whole checkpoint: an interruption
(Ctrl-C, kill -9, a full disk) leaves the previous one. `load_checkpoint` turns every way a file
can be unreadable (empty, truncated, not a checkpoint, missing entries) into `DamagedFile`, a
ValueError naming the file and what is wrong, and never modifies the file.

A trainer's state (`trainer_state`, `restore_trainer`): model, optimiser, each member's data
stream, step, torch's RNG states, losses, divergence and stop records, the learning curve so
far, the run's identity (`bayesbench.identity`) and code. A checkpoint is resumed only by a
trainer of the same identity (`check_identity` names the field that differs) and code
(`check_code` names what changed), so a resumed run is exactly the uninterrupted one.
"""

from __future__ import annotations

import glob
import os
import pickle
import re
import zipfile
from collections.abc import Callable

import torch

from .. import trust, versions
from ..identity import difference
from ..models import get_model
from ..models.registry import model_code
from ..running.disk import discard_partial
from ..tasks import Task, task_from_config
from .config import TRAINING_VERSION
from .curves import EnsembleCurve
from .result import TrainResult, died_steps

TMP_INFIX = ".tmp"
CHECKPOINT_NAME = "checkpoint.pt"
# What `trainer_state` writes and `restore_trainer` / `load_result` need.
CHECKPOINT_KEYS = ("identity", "run_id", "step", "model", "optimizer", "streams", "rng", "cuda_rng", "losses",
                   "alive", "diverged", "died_at", "elapsed")


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
        raised = discard_partial(tmp, path, err)
        if raised is err:
            raise
        raise raised from err
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


def load_failure(path: str, err: BaseException, *, advice: bool = True) -> str:
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
    found = re.search(r"GLOBAL ([\w.]+) (?:was not an allowed global|whose module [\w.]+ is blocked)", text)
    if found:  # a weights-only load met a class: e.g. torch.save(model) instead of its state_dict()
        return (f"pickled Python objects, not only tensors: {found.group(1)}" +
                ("; save module.state_dict() rather than the module" if advice else ""))
    if "zip archive" in text or "central directory" in text:
        what = "an incomplete or damaged zip archive"
    elif isinstance(err, (pickle.UnpicklingError, EOFError)) or "Weights only load failed" in text or \
            (isinstance(err, KeyError) and not zipfile.is_zipfile(path)):  # the weights-only reader on other bytes
        what = "not a file torch.save wrote"
    else:
        what = f"{type(err).__name__}: {text.split('. ')[0].strip()}"
    return what if size is None else f"{size:,} bytes: {what}"


def _damage(path: str, err: BaseException) -> str:
    why = load_failure(path, err, advice=False)
    if why.startswith("pickled Python objects"):  # planted, or not bayesbench's: never unpickled, it could run code
        return f"it holds {why}, which are never loaded (unpickling could run code); a bayesbench checkpoint holds " \
               "tensors and plain values only"
    return why if why == "the file is empty" else f"it is truncated or not a PyTorch checkpoint ({why})"


def load_checkpoint(path: str, map_location=None, *, required: tuple[str, ...] = (), what: str = "checkpoint") -> dict:
    """torch.load a checkpoint, tensors and plain values only (`weights_only=True`: a pickled object
    in a planted file is refused, never run), naming `path` and the damage in a `DamagedFile` if it
    cannot be read or lacks a `required` entry. The file itself is never changed."""
    if os.path.isdir(path):
        raise DamagedFile(f"{what} {path} is a directory, not a file")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise DamagedFile(f"{what} {path} does not exist") from None
    except PermissionError as err:
        raise DamagedFile(f"{what} {path} cannot be read: {err.strerror}") from None
    except Exception as err:  # any failure to parse the file is damage
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


# ---------------------------------------------------------------- the code and identity of a run

def run_code(task: Task, arch: str) -> dict:
    """The code a training run of `arch` on `task` runs (`bayesbench.versions`): the tunnel's,
    the architecture's and the trainer's."""
    return {"task": task.code(), "model": model_code(arch), "training": versions.builtin(TRAINING_VERSION)}


class CodeChanged(ValueError):
    """A checkpoint (or stored run) was made by other code than the code here now."""


def check_code(path: str, identity: dict, saved: dict | None, current: dict) -> None:
    """Refuse a checkpoint written by other code than `current` (an edited model or tunnel file,
    a raised version), naming what changed; its file is left as it is. `saved`: the checkpoint's
    full code, when it records one; else what its identity keyed (`versions.keyed`) and, for a
    checkpoint without a code record, the contents of its outside files as unknown."""
    if saved is None:
        saved = identity.get("code") or versions.legacy(identity.get("task"), identity.get("arch"))
    changed = versions.changed(saved, current)
    if changed:
        raise CodeChanged(f"checkpoint {path}: {'; '.join(changed)} since it was written; it was left as it is "
                          "(restore that code to use it, or train again: other code gets its own key and run "
                          "directory)")


def check_identity(path: str, saved: dict, current: dict) -> None:
    """Refuse to resume a checkpoint of another run, naming the first field that differs (the
    code is `check_code`'s)."""
    differs = difference(saved, current)
    if differs:
        raise ValueError(f"checkpoint {path} was written for another run: {differs}")


# ---------------------------------------------------------------- a trainer's state

def trainer_state(trainer) -> dict:
    """Everything `restore_trainer` needs to continue `trainer` exactly (read after a sync)."""
    return {
        "identity": trainer.identity(), "run_id": trainer.run_id, "step": trainer.step,
        "model": trainer.model.state_dict(), "optimizer": trainer.optimizer.state_dict(),
        "streams": [s.state_dict() for s in trainer.streams],
        "rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if trainer.device.type == "cuda" else None,
        "losses": torch.stack(trainer.losses) if trainer.losses else torch.zeros(0, trainer.ensemble),
        "alive": trainer.alive, "diverged": trainer.diverged, "died_at": trainer._died_at.cpu(),
        "elapsed": trainer.elapsed, "meta": trainer.meta,
        "curve": None if trainer.curve is None else trainer.curve.state_dict(), "stopped": trainer.stopped,
        "code": trainer.code,
    }


def restore_trainer(trainer, path: str, say: Callable[[str], None]) -> None:
    """Continue `trainer` from the checkpoint at `path`, written for the same identity and code."""
    state = load_checkpoint(path, trainer.device, required=CHECKPOINT_KEYS)
    check_code(path, state["identity"], state.get("code"), trainer.code)
    check_identity(path, state["identity"], trainer.identity())
    try:
        trainer.model.load_state_dict(state["model"])
        trainer.optimizer.load_state_dict(state["optimizer"])
    except (RuntimeError, ValueError, KeyError) as err:
        raise DamagedFile(f"checkpoint {path} is damaged: its weights or optimiser state do not fit the model "
                          f"it names ({' '.join(str(err).split())[:200]}); it was left as it is") from err
    for stream, s in zip(trainer.streams, state["streams"]):
        stream.load_state_dict(s)
    torch.set_rng_state(state["rng"].cpu())
    if state["cuda_rng"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda_rng"]])
    trainer.run_id, trainer.step, trainer.elapsed = state["run_id"], state["step"], state["elapsed"]
    trainer.saved_step = trainer.step
    trainer.losses = list(state["losses"].cpu().unbind(0))
    trainer.alive, trainer.diverged = list(state["alive"]), dict(state["diverged"])
    trainer._alive = torch.tensor(trainer.alive, dtype=torch.bool, device=trainer.device)
    trainer._died_at = state["died_at"].to(trainer.device)
    trainer._pending, trainer._curve_pending = [], []
    trainer.stopped = {int(e): tuple(v) for e, v in (state.get("stopped") or {}).items()}
    trainer._go = trainer._go_mask()
    if trainer.curve is not None:
        saved = state.get("curve")
        if saved is None and trainer.step > 0:
            say(f"bayesbench: checkpoint {path} holds no learning curve: the curve of this run starts at step "
                f"{trainer.step}")
        trainer.curve = trainer._new_curve() if saved is None else EnsembleCurve.from_state(saved)


def load_result(path: str, device: torch.device | str = "cpu") -> TrainResult:
    """Rebuild a run's model and record from its checkpoint alone (for `bayesbench eval`)."""
    state = load_checkpoint(path, device, required=CHECKPOINT_KEYS)
    ident = state["identity"]
    with trust.source(path):  # outside code the checkpoint names: imported only when trusted
        task = task_from_config(ident["task"])
        code = run_code(task, ident["arch"])
        check_code(path, ident, state.get("code"), code)
        model = get_model(ident["arch"], task, seeds=ident["seeds"], max_len=ident["max_len"], device=device,
                          **ident["model"])
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as err:
        raise DamagedFile(f"checkpoint {path} is damaged: its weights do not fit the model it names "
                          f"({' '.join(str(err).split())[:200]}); it was left as it is") from err
    curve = state.get("curve")
    stopped = {int(e): tuple(v) for e, v in (state.get("stopped") or {}).items()}
    return TrainResult(state["run_id"], model, list(ident["seeds"]), state["step"], state["losses"].cpu(),
                       state["elapsed"], dict(state["diverged"]), path, ident, dict(state.get("meta", {})),
                       None if curve is None else EnsembleCurve.from_state(curve), stopped,
                       died_steps(state["died_at"].cpu(), state["diverged"]), code)
