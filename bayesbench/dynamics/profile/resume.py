"""Continue a stored training run for profiling: a Trainer for some of its seeds, exactly where
the run's checkpoint left them (parameters, AdamW state, data streams, step)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from ...tasks import task_from_config
from ...training.checkpoint import DamagedFile, load_checkpoint
from ...training.config import TrainConfig
from ...training.optim import select_members
from ...training.run import open_trainer
from ...training.trainer import Trainer
from ..config import FieldError


def load_run_state(path: str, device: str) -> dict:
    """The checkpoint at `path`, tensors and plain values only (`load_checkpoint`: a pickled object
    in it is refused, never run)."""
    try:
        return load_checkpoint(path, device, required=("identity",), what="training checkpoint")
    except DamagedFile as err:
        raise FieldError("run", str(err)) from None


def select_seeds(state: dict, seeds: list[int] | None) -> list[int]:
    """The run's seeds to continue (all by default); every one must be a seed of the run and alive."""
    run_seeds = list(state["identity"]["seeds"])
    if seeds is None:
        seeds = run_seeds
    if len(seeds) > len(run_seeds):
        raise FieldError("seeds", f"names {len(seeds)} seeds but the run has only {len(run_seeds)}: {run_seeds}")
    missing = [s for s in seeds if s not in run_seeds]
    if missing:
        raise FieldError("seeds", f"{missing} are not seeds of the run (it has {run_seeds})")
    dead = [s for s in seeds if not state["alive"][run_seeds.index(s)]]
    if dead:
        raise FieldError("seeds", f"{dead} diverged in that run; leave them out")
    return list(seeds)


@contextlib.contextmanager
def open_from_state(state: dict, seeds: list[int], extra_steps: int, *, device: str, run_dir: str | None = None,
                    meta: dict | None = None) -> Iterator[Trainer]:
    """A Trainer for `seeds` of a checkpointed run, set to continue for `extra_steps` steps
    (built by `open_trainer`, so `run_dir` is locked for the block)."""
    ident = state["identity"]
    if ident.get("device_type") != torch.device(device).type:
        raise FieldError("device", f"must be {ident.get('device_type')} for this run: it trained there (its data "
                                   f"streams belong to that device type)")
    run_seeds = list(ident["seeds"])
    idx = [run_seeds.index(s) for s in seeds]
    sel = torch.tensor(idx, device=device)
    E = len(run_seeds)
    train = TrainConfig(**{**ident["train"], "steps": int(state["step"]) + extra_steps})
    with open_trainer(task_from_config(ident["task"]), ident["arch"], seeds, train, model_cfg=ident["model"],
                      max_len=ident["max_len"], device=device, run_dir=run_dir, meta=meta) as trainer:
        trainer.model.load_state_dict({k: v.index_select(0, sel) if v.dim() and v.shape[0] == E else v
                                       for k, v in state["model"].items()})
        trainer.optimizer.load_state_dict(select_members(state["optimizer"], idx, E))
        for stream, i in zip(trainer.streams, idx):
            stream.load_state_dict(state["streams"][i])
        trainer.step = int(state["step"])
        trainer.run_id = state["run_id"]
        yield trainer
