"""Training curves and the final result to TensorBoard or Weights & Biases (`--log
tensorboard|wandb`; off by default).

A Trainer hook (`after_sync`, called when the trainer reads its losses and curve points back):
each member's mean training loss (nats) over the window since the last sync, and every new
learning-curve point (the three metrics in bits against the exact posterior), one series per
seed: `loss/seed0`, `curve/kl/seed0`, ... The x axis is the training step. Reading nothing the
trainer has not already read, it costs no host read of its own. Once the run is scored,
`log_result(records)` sends what the leaderboard shows: every evaluation's metrics with their
95% intervals over sequences per seed, their mean over seeds with its t-interval over seeds,
and the floors (`result_metrics`).

TensorBoard writes event files to `<run dir>/tensorboard/` (`tensorboard --logdir runs`), and
the run's settings (task, model and training options, seeds, preset: `flat_settings`) as
hparams with each seed's final metrics (`<run dir>/tensorboard/seed<S>/`, one hparams session
per seed, in TensorBoard's HParams tab), and the mean over seeds with its interval as scalars
(`final/mean/...`) at the run's last step. W&B runs in offline mode unless WANDB_MODE says
otherwise (`wandb sync <run dir>/wandb/offline-run-*` uploads it), one W&B run per bayesbench
run, named by the run's label and key, grouped by the run's group id (`run-quick`,
`sweep-<name>`: the command that stored it), in the project named by the WANDB_PROJECT
environment variable (W&B's own; default "bayesbench"), with the settings as its config and
the final metrics as its summary. Both are extras (`pip install 'bayesbench[log]'`): asking for
one that is not installed is a clear error.
"""

from __future__ import annotations

import json
import math
import os

LOGGERS = ("tensorboard", "wandb")
DEFAULT_PROJECT = "bayesbench"  # the W&B project when WANDB_PROJECT is not set


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


def result_metrics(records) -> dict:
    """The final numbers of a run's records (one per seed) as flat {tag: value}: per seed and
    evaluation every metric's mean and 95% interval over sequences
    (`final/seed0/values/kl`, `.../kl_ci_low`, `.../kl_ci_high`), the evaluation set's size, the
    mean over seeds with its t-interval over seeds (`final/mean/values/kl`, `..._ci_low`,
    `..._ci_high`, of the seeds that did not diverge), and the floors (`floor/values/uniform/kl`).
    Non-finite numbers (a diverged member) are left out."""
    from ..stats import t_interval
    out: dict[str, float] = {}

    def put(tag, value):
        if value is not None and math.isfinite(value):
            out[tag] = float(value)

    by_eval: dict[tuple[str, str], list[float]] = {}
    for r in records:
        for name, ev in r.evals.items():
            for metric, s in ev.metrics().items():
                base = f"final/seed{r.seed}/{name}/{metric}"
                put(base, s.mean)
                put(f"{base}_ci_low", s.ci_low)
                put(f"{base}_ci_high", s.ci_high)
                if r.status == "ok":
                    by_eval.setdefault((name, metric), []).append(s.mean)
            put(f"final/seed{r.seed}/{name}/n_sequences", ev.entropy_mae.n_sequences)
            for floor, scores in (ev.floors or {}).items():
                for metric, s in scores.items():
                    put(f"floor/{name}/{floor}/{metric}", s.mean)
    for (name, metric), values in by_eval.items():
        finite = [v for v in values if math.isfinite(v)]
        if finite:
            put(f"final/mean/{name}/{metric}", sum(finite) / len(finite))
            ci = t_interval(finite)
            low, high = ci["ci_low"], ci["ci_high"]
            put(f"final/mean/{name}/{metric}_ci_low", max(0.0, low) if math.isfinite(low) else low)
            put(f"final/mean/{name}/{metric}_ci_high", high)
    return out


def record_settings(record) -> dict:
    """What a stored row says of its setting beyond the run's configuration: the task's options,
    the torch thread count and the device (`report.leaderboard.row_settings` keys rows by them)."""
    env = record.environment or {}
    return {"task": {k: v for k, v in (record.task_config or {}).items()}, "threads": env.get("threads"),
            "device": env.get("device"), "task_label": record.task_label, "arch": record.arch}


def flat_settings(config: dict, prefix: str = "") -> dict:
    """A nested settings dict as flat {"train/lr": 0.0005, ...}: numbers, strings and booleans as
    they are, anything else (None, lists) as JSON text: what TensorBoard's hparams accept."""
    out = {}
    for key, value in (config or {}).items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flat_settings(value, f"{name}/"))
        elif isinstance(value, (bool, int, float, str)):
            out[name] = value
        else:
            out[name] = json.dumps(value, sort_keys=True, default=str)
    return out


class CurveLogger:
    """The hook: sends what each sync read to a `writer(tag, value, step)`, and the scored run's
    final numbers to `result(records)` (`log_result`)."""

    def __init__(self, seeds: list[int], writer, close, result=None) -> None:
        self.seeds, self.write, self._close, self._result = list(seeds), writer, close, result
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

    def log_result(self, records) -> None:
        """The scored run's final metrics with their intervals (`result_metrics`), as the
        tracker's summary (W&B) or its hparams session's metrics (TensorBoard)."""
        if self._result is not None:
            self._result(records)

    def close(self) -> None:
        self._close()


def attach_logger(kind: str, trainer, run_dir: str, *, name: str, config: dict) -> CurveLogger:
    """Add the hook for `kind` to `trainer`, writing under `run_dir`; a resumed trainer's series
    continue where they stopped (what its checkpoint already holds is not sent again).
    `config`: the run's settings (its "group_id" groups W&B runs)."""
    check_logger(kind)
    if kind == "tensorboard":
        from torch.utils.tensorboard import SummaryWriter

        folder = os.path.join(run_dir, "tensorboard")
        tb = SummaryWriter(log_dir=folder, purge_step=trainer.step or None)
        hparams = flat_settings(config)

        def result(records) -> None:
            for r in records:  # one hparams session per seed: the settings with that seed's final numbers
                metrics = {tag: v for tag, v in result_metrics([r]).items() if not tag.startswith("final/mean/")}
                settings = {**hparams, **flat_settings(record_settings(r)), "seed": r.seed}
                tb.add_hparams(settings, metrics, run_name=f"seed{r.seed}")
            for tag, value in result_metrics(records).items():  # the mean over seeds, as scalars at the last step
                if tag.startswith("final/mean/"):
                    tb.add_scalar(tag, value, trainer.step)
            tb.flush()

        logger = CurveLogger(trainer.seeds, lambda tag, v, step: tb.add_scalar(tag, v, step), tb.close, result)
    else:
        import wandb

        os.environ.setdefault("WANDB_MODE", "offline")
        os.environ.setdefault("WANDB_SILENT", "true")
        try:
            run = wandb.init(dir=run_dir, name=name,
                             id="".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:120],
                             config=config, resume="allow", reinit="create_new", group=config.get("group_id"),
                             project=os.environ.get("WANDB_PROJECT") or DEFAULT_PROJECT)
        except Exception as err:  # W&B's own errors: no API key online, a bad project name, ...
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            raise ValueError(f"--log wandb: W&B could not start a run ({type(err).__name__}: {first}); log in "
                             "(`wandb login` or WANDB_API_KEY) or log offline (WANDB_MODE=offline, the "
                             "default)") from None

        def result(records) -> None:
            run.config.update(record_settings(records[0]), allow_val_change=True)
            run.summary.update(result_metrics(records))

        logger = CurveLogger(trainer.seeds, lambda tag, v, step: run.log({tag: v}, step=step), run.finish, result)
    logger.losses_logged = len(trainer.losses)
    logger.points_logged = 0 if trainer.curve is None else len(trainer.curve.steps)
    trainer.hooks.append(logger)
    return logger
