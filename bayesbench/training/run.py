"""A training run in its run directory: `open_trainer`, the one way a run gets its Trainer (the
directory locked, leftovers of killed saves removed, the checkpoint resumed), and `train`, which
opens one and fits it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

import torch

from ..identity import RunSpec
from ..running.runlock import run_lock
from ..store.run_file import RUN_FILE
from ..tasks import Task
from .checkpoint import CHECKPOINT_NAME, remove_leftovers
from .config import TrainConfig
from .result import TrainResult
from .trainer import Trainer, note


@contextlib.contextmanager
def open_trainer(task: Task, arch: str, seeds: list[int], cfg: TrainConfig, *, model_cfg: dict | None = None,
                 max_len: int | None = None, device: torch.device | str = "cpu", run_dir: str | None = None,
                 run_id: str | None = None, meta: dict | None = None, resume: bool = False,
                 say: Callable[[str], None] | None = None, spec: RunSpec | None = None) -> Iterator[Trainer]:
    """The one way a run gets its Trainer: `with open_trainer(...) as trainer: trainer.fit()`.

    With `run_dir`, the run directory is locked for the block (`runlock.run_lock`: a second
    process on it gets a ValueError), temporary files of saves a killed process left there are
    removed, and `resume=True` continues from run_dir/checkpoint.pt when it exists (model,
    optimiser, data streams, step, RNG: the resumed run is exactly the uninterrupted one).
    `say`, if given, is told which step it resumed from, or that there was no checkpoint.
    `spec`: the run as it was resolved and keyed (a job's `Job.spec`; see `Trainer`).
    """
    if resume and run_dir is None:
        raise ValueError("resume=True needs run_dir (where the checkpoint is)")
    with run_lock(run_dir, say=note) if run_dir is not None else contextlib.nullcontext():
        if run_dir is not None:
            for name in (CHECKPOINT_NAME, RUN_FILE):  # temporary files of killed saves (checkpoints, run.json)
                remove_leftovers(os.path.join(run_dir, name))
        trainer = Trainer(task, arch, seeds, cfg, model_cfg=model_cfg, max_len=max_len, device=device,
                          run_dir=run_dir, run_id=run_id, meta=meta, spec=spec)
        path = trainer.checkpoint_path()
        if resume and path is not None and os.path.exists(path):  # (resume needs run_dir: a path)
            trainer.load(path)
            if say is not None:
                done = " (training had finished)" if trainer.step >= cfg.steps else ""
                say(f"bayesbench: resumed {task.name} / {arch} seeds {trainer.seeds} from step {trainer.step} of "
                    f"{cfg.steps}{done} ({path})")
        elif resume and say is not None:
            say(f"bayesbench: no checkpoint at {path} to resume: {task.name} / {arch} starts at step 0")
        yield trainer


def train(task: Task, arch: str, seeds: list[int], cfg: TrainConfig, *, model_cfg: dict | None = None,
          max_len: int | None = None, device: torch.device | str = "cpu", run_dir: str | None = None,
          resume: bool = False, progress: bool = True, stop_at: int | None = None,
          run_id: str | None = None, meta: dict | None = None, position: int = 0) -> TrainResult:
    """Train `arch` on `task` with one ensemble member per seed; see the module docstring.

    With `run_dir`, checkpoints go to run_dir/checkpoint.pt (every cfg.checkpoint_every steps,
    at the end, and at the step a stop request (SIGINT, SIGTERM) arrives); `resume=True`
    continues from it when it exists, and says from which step (`open_trainer`).
    """
    with open_trainer(task, arch, seeds, cfg, model_cfg=model_cfg, max_len=max_len, device=device, run_dir=run_dir,
                      run_id=run_id, meta=meta, resume=resume, say=note) as trainer:
        return trainer.fit(progress=progress, stop_at=stop_at, position=position)
