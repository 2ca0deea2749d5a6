"""Training curves to TensorBoard or Weights & Biases (`--log tensorboard|wandb`; off by default).

A Trainer hook (`after_sync`, called when the trainer reads its losses and curve points back):
each member's mean training loss (nats) over the window since the last sync, and every new
learning-curve point (the three metrics in bits against the exact posterior), one series per
seed: `loss/seed0`, `curve/kl/seed0`, ... The x axis is the training step. Reading nothing the
trainer has not already read, it costs no host read of its own.

TensorBoard writes event files to `<run dir>/tensorboard/` (`tensorboard --logdir runs`); W&B
runs in offline mode unless WANDB_MODE says otherwise (`wandb sync <run dir>/wandb/offline-run-*`
uploads it), one W&B run per bayesbench run, named by the run's label and key. Both are extras
(`pip install 'bayesbench[log]'`): asking for one that is not installed is a clear error.
"""

from __future__ import annotations

import math
import os

LOGGERS = ("tensorboard", "wandb")


def check_logger(kind: str) -> str:
    """`kind` if it is known and its package installed, else a ValueError saying how to install it."""
    import importlib.util

    if kind not in LOGGERS:
        raise ValueError(f"--log must be one of {LOGGERS}, got {kind!r}")
    package = "tensorboard" if kind == "tensorboard" else "wandb"
    if importlib.util.find_spec(package) is None:
        raise ValueError(f"--log {kind} needs the {package} package: pip install 'bayesbench[log]' (or pip install "
                         f"{package})")
    return kind


class CurveLogger:
    """The hook: sends what each sync read to a `writer(tag, value, step)`."""

    def __init__(self, seeds: list[int], writer, close) -> None:
        self.seeds, self.write, self._close = list(seeds), writer, close
        self.losses_logged = 0  # rows of trainer.losses already sent
        self.points_logged = 0  # curve points already sent

    def after_sync(self, trainer) -> None:
        rows = trainer.losses[self.losses_logged:]
        if rows:
            step = self.losses_logged + len(rows)
            for e, seed in enumerate(self.seeds):
                vals = [float(r[e]) for r in rows if math.isfinite(float(r[e]))]
                if vals:
                    self.write(f"loss/seed{seed}", sum(vals) / len(vals), step)
            self.losses_logged += len(rows)
        curve = trainer.curve
        if curve is not None:
            for i in range(self.points_logged, len(curve.steps)):
                for metric, per_point in curve.values.items():
                    for e, seed in enumerate(self.seeds):
                        v = per_point[i][e]
                        if math.isfinite(v):
                            self.write(f"curve/{metric}/seed{seed}", v, curve.steps[i])
            self.points_logged = len(curve.steps)

    def close(self) -> None:
        self._close()


def attach_logger(kind: str, trainer, run_dir: str, *, name: str, config: dict) -> CurveLogger:
    """Add the hook for `kind` to `trainer`, writing under `run_dir`; a resumed trainer's series
    continue where they stopped (what its checkpoint already holds is not sent again)."""
    check_logger(kind)
    if kind == "tensorboard":
        from torch.utils.tensorboard import SummaryWriter

        tb = SummaryWriter(log_dir=os.path.join(run_dir, "tensorboard"), purge_step=trainer.step or None)
        logger = CurveLogger(trainer.seeds, lambda tag, v, step: tb.add_scalar(tag, v, step), tb.close)
    else:
        import wandb

        os.environ.setdefault("WANDB_MODE", "offline")
        os.environ.setdefault("WANDB_SILENT", "true")
        run = wandb.init(dir=run_dir, name=name, id="".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:120],
                         config=config, resume="allow", reinit="create_new")
        logger = CurveLogger(trainer.seeds, lambda tag, v, step: run.log({tag: v}, step=step), run.finish)
    logger.losses_logged = len(trainer.losses)
    logger.points_logged = 0 if trainer.curve is None else len(trainer.curve.steps)
    trainer.hooks.append(logger)
    return logger
