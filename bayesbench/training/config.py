"""A run's optimisation settings: `TrainConfig`, its rules and its part of a run's identity.

No torch here: the command line imports the schedules, precisions and the rules of every field
without paying for the training code (`tests/training/test_config.py`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..checks import SettingError, boolean, int_at_least, number_in, one_of, positive_int, positive_number
from ..metric_table import curve_metrics
from .until import parse_until

#: The trainer's code version (its loop, losses, per-member AdamW and clipping, data streams),
#: raised whenever a change alters what a seed trains to: part of every run's identity
#: (`bayesbench.versions`, `bayesbench.identity`).
TRAINING_VERSION = 1
SCHEDULES = ("constant", "cosine", "step")
STEP_DECAY = ((0.5, 0.1), (0.75, 0.01))  # "step": the learning rate times 0.1 from half the steps, 0.01 from 3/4
# auto: TF32 matmuls on CUDA, exact float32 elsewhere; fp32: exact float32 everywhere; tf32: TF32
# matmuls (CUDA only); bf16: autocast of the forward pass to bfloat16 (weights and AdamW in float32)
PRECISIONS = ("auto", "fp32", "tf32", "bf16")
DEFAULT_CURVE_SEQUENCES = 256
#: Fields that change no number, so no identity names them: when checkpoints are written (a
#: resumed run is the uninterrupted one) and how often the losses are read back to the host.
NOT_IN_IDENTITY = ("checkpoint_every", "sync_every")
#: Switches and settings of optional features: an identity names them only where a run uses
#: them (set away from their defaults), so a run that does not use a feature has the identity
#: it has whether or not the package offers it. torch.compile may move the last digits.
#: Why `member_lrs` is refused as a setting: a stored row pools the seeds of one recipe, and
#: members at different rates are different recipes (their interval would span them).
MEMBER_LRS_RULE = ("is set by tuning alone (rule: a row pools seeds trained at one learning rate; --tune trains "
                   "its grid of rates as one ensemble, --tune-args lrs=[...], and stores one row per chosen rate; "
                   "give one rate, lr=...)")
OPTIONAL = ("compile", "curves", "curve_every", "curve_sequences", "until", "until_metric", "member_lrs", "curve_set")
#: The fixed sets a learning curve can be measured on: the curve set (reported on the
#: leaderboard) or the selection set (a tuning's candidates, `training/curves.py` `selection_batch`:
#: drawn apart from the evaluation and curve sets, never reported).
CURVE_SETS = ("curve", "selection")


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings (docs/science.md#architectures-and-training; Paper I, Sec. 3.3-3.4).
    `warmup_steps` applies to 'cosine' and 'step', `min_lr_ratio` to 'cosine'.

    precision: see PRECISIONS (evaluation always runs in exact float32). sync_every: how often
    the losses and the divergence guard are read back to the host (a step itself reads nothing).

    prefetch: batches drawn per task.sample call (sliced afterwards; every step still gets
    fresh sequences). It is part of the data stream's definition: runs that must match
    (ensemble vs solo, resume) use the same value.

    Learning curves (`curves.py`): with `curves` (default on) every member is scored on
    `curve_sequences` fixed sequences after the steps `curves.curve_steps(steps, curve_every)`
    gives (log-spaced when curve_every is 0, the default; else every curve_every steps; always
    the last step). `until` (`until.py`): None (train all `steps`), a threshold in bits on the
    curve metric `until_metric`, or "plateau"; a member that meets it stops there (frozen), the
    run ends when every member has stopped, `steps` stays the budget.

    member_lrs: one peak learning rate per ensemble member (a learning-rate grid trained as one
    ensemble, `bayesbench.sweep.tune`), None: every member at `lr`. curve_set: "curve" (the
    reported curve set) or "selection" (a tuning's held-out selection set).
    """

    steps: int
    batch_size: int = 64
    lr: float = 1e-3
    schedule: str = "constant"
    warmup_steps: int = 0
    min_lr_ratio: float = 0.0
    weight_decay: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.999
    grad_clip: float = 1.0
    prefetch: int = 16
    checkpoint_every: int = 0
    compile: bool = False
    precision: str = "auto"
    sync_every: int = 20
    curves: bool = True
    curve_every: int = 0
    curve_sequences: int = DEFAULT_CURVE_SEQUENCES
    until: float | str | None = None
    until_metric: str = "entropy_mae"
    member_lrs: tuple[float, ...] | None = None
    curve_set: str = "curve"

    def __post_init__(self) -> None:
        """Every field's rule, here and nowhere else: the command line, sweep files and the Python API
        get these errors (a `SettingError` naming its fields, which callers prefix with where the value
        came from: `--train-args beta1 must be ...`)."""
        for f in ("steps", "batch_size", "prefetch", "sync_every", "curve_sequences"):
            positive_int(f, getattr(self, f))
        for f in ("warmup_steps", "checkpoint_every"):
            int_at_least(f, getattr(self, f), 0)
        int_at_least("curve_every", self.curve_every, 0, "0: log-spaced")
        positive_number("lr", self.lr)
        one_of("schedule", self.schedule, SCHEDULES)
        number_in("min_lr_ratio", self.min_lr_ratio, 0, 1, what="the cosine schedule's last lr / lr")
        number_in("weight_decay", self.weight_decay, 0, what="AdamW's decoupled decay")
        for f in ("beta1", "beta2"):  # AdamW's moment decay rates: 1 would never forget, above 1 diverges
            number_in(f, getattr(self, f), 0, 1, high_open=True)
        positive_number("grad_clip", self.grad_clip, "the largest gradient norm per member")
        for f in ("compile", "curves"):
            boolean(f, getattr(self, f))
        one_of("precision", self.precision, PRECISIONS)
        one_of("until_metric", self.until_metric, curve_metrics())
        try:
            object.__setattr__(self, "until", parse_until(self.until))
        except ValueError as err:
            raise SettingError(str(err), ("until",)) from None
        one_of("curve_set", self.curve_set, CURVE_SETS)
        if self.member_lrs is not None:
            rates = self.member_lrs
            if isinstance(rates, (str, bytes)) or not hasattr(rates, "__iter__") or not list(rates) or any(
                    isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r) or r <= 0
                    for r in rates):
                raise SettingError(f"member_lrs must be a list of at least one learning rate (a positive finite "
                                   f"number per member), got {rates!r}", ("member_lrs",))
            object.__setattr__(self, "member_lrs", tuple(float(r) for r in rates))
        if self.until is not None and not self.curves:
            raise SettingError("until needs the learning curves (curves=true): a member stops on its curve",
                               ("until", "curves"))

    @classmethod
    def check_settings(cls, settings: dict) -> None:
        """Check some of the fields (e.g. a command line's, before a preset gives the rest) by the
        rules above, the others at their defaults and `steps` 1 unless given; raises SettingError.
        `member_lrs` is not a setting to give: tuning alone sets it (`MEMBER_LRS_RULE`)."""
        if settings.get("member_lrs") is not None:
            raise SettingError(f"member_lrs {MEMBER_LRS_RULE}", ("member_lrs",))
        cls(**{"steps": 1, **settings})

    def identity(self) -> dict:
        """The training part of a run's identity (`bayesbench.identity.RunSpec`): every field
        but those that change no number (`NOT_IN_IDENTITY`), the fields of optional features
        (`OPTIONAL`) only where they differ from their defaults."""
        out = dataclasses.asdict(self)
        for name in NOT_IN_IDENTITY:
            out.pop(name)
        for name in OPTIONAL:
            if out[name] == _DEFAULTS[name]:
                out.pop(name)
        if "member_lrs" in out:  # as JSON holds it (a stored row's, a checkpoint's)
            out["member_lrs"] = list(out["member_lrs"])
        return out

    def member_scales(self) -> tuple[float, ...] | None:
        """Each member's rate over `lr` (`member_lrs[e] / lr`), or None when every member trains at
        `lr`: member e's rate at a step is `lr_at(step) * member_scales()[e]`, the same schedule
        (warm-up, cosine) at its own peak rate."""
        if self.member_lrs is None:
            return None
        return tuple(rate / self.lr for rate in self.member_lrs)

    def lr_at(self, step: int) -> float:
        """Learning rate of step `step` (0-based): constant, or linear warm-up then cosine decay
        or step decay (`STEP_DECAY`)."""
        if self.schedule == "constant":
            return self.lr
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        if self.schedule == "step":
            return self.lr * min([factor for at, factor in STEP_DECAY if step >= at * self.steps], default=1.0)
        progress = (step - self.warmup_steps) / max(1, self.steps - self.warmup_steps)
        cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return self.lr * (self.min_lr_ratio + (1.0 - self.min_lr_ratio) * cosine)


_DEFAULTS = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
