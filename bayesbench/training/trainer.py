"""Train an ensemble: E seeds in one model, each exactly the model a solo run would train.

What makes member e of an ensemble with seeds [s_0..s_{E-1}] equal a solo run with seed s_e:
- initialisation from its own seed (`EnsembleModel.init_members`);
- its own data stream, seeded from s_e only (`MemberStream`);
- its loss is the mean over its own supervised positions, and the total loss is the SUM over
  members, so d(total)/d(member e's parameters) = d(loss_e)/d(member e's parameters);
- gradient clipping per member: the global norm over member e's slice of every parameter;
- AdamW is element-wise, so its state and update are per member already.

Also here: learning-rate schedules, a NaN/inf guard that freezes a diverged member (the others
continue; all diverged stops the run), learning curves (every member scored against the exact
posterior on a fixed set at log-spaced steps, `curves.py`) and training to a criterion on them
(`until.py`: a member that reaches it is frozen as a diverged one is), checkpoints that make
`resume=True` reproduce an uninterrupted run exactly (its curve included), optional
torch.compile and a tqdm progress bar.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import versions
from ..checks import SettingError, boolean, int_at_least, number_in, one_of, positive_int, positive_number
from ..models import EnsembleModel, get_model
from ..models.registry import model_code
from ..running import interrupt
from ..running.runlock import run_lock
from ..tasks import Batch, Task, task_from_config
from ..tasks.bijection import SCORED_SETS
from .checkpoint import DamagedFile, load_checkpoint, remove_leftovers, save_atomic
from .curves import CURVE_METRICS, DEFAULT_CURVE_SEQUENCES, CurveSet, EnsembleCurve, curve_steps
from .optim import FlatMemberAdamW
from .seeds import MAX_SEED, data_seed, dropout_seed
from .until import parse_until, stop_reason

#: The trainer's code version (its loop, losses, per-member AdamW and clipping, data streams),
#: raised whenever a change alters what a seed trains to: part of every job key and checkpoint
#: identity (`bayesbench.versions`).
TRAINING_VERSION = 1
SCHEDULES = ("constant", "cosine", "step")
STEP_DECAY = ((0.5, 0.1), (0.75, 0.01))  # "step": the learning rate times 0.1 from half the steps, 0.01 from 3/4
# auto: TF32 matmuls on CUDA, exact float32 elsewhere; fp32: exact float32 everywhere; tf32: TF32
# matmuls (CUDA only); bf16: autocast of the forward pass to bfloat16 (weights and AdamW in float32)
PRECISIONS = ("auto", "fp32", "tf32", "bf16")
CHECKPOINT_NAME = "checkpoint.pt"
# What `Trainer.save` writes and `Trainer.load` / `load_result` need.
CHECKPOINT_KEYS = ("identity", "run_id", "step", "model", "optimizer", "streams", "rng", "cuda_rng", "losses",
                   "alive", "diverged", "died_at", "elapsed")


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
        one_of("until_metric", self.until_metric, tuple(CURVE_METRICS))
        try:
            object.__setattr__(self, "until", parse_until(self.until))
        except ValueError as err:
            raise SettingError(str(err), ("until",)) from None
        if self.until is not None and not self.curves:
            raise SettingError("until needs the learning curves (curves=true): a member stops on its curve",
                               ("until", "curves"))

    @classmethod
    def check_settings(cls, settings: dict) -> None:
        """Check some of the fields (e.g. a command line's, before a preset gives the rest) by the
        rules above, the others at their defaults and `steps` 1 unless given; raises SettingError."""
        cls(**{"steps": 1, **settings})

    def as_dict(self) -> dict:
        """The fields as a dict, without those added with the learning curves (`ADDED_FIELDS`)
        where they keep their defaults: what identities and sweep keys hash, so that runs which do
        not use them keep the checkpoints, sweep keys and leaderboard groups they had before."""
        out = dataclasses.asdict(self)
        for name in ADDED_FIELDS:
            if out[name] == _DEFAULTS[name]:
                out.pop(name)
        return out

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


# TrainConfig fields added after its first stored runs: named in identities only when not at their default.
ADDED_FIELDS = ("curves", "curve_every", "curve_sequences", "until", "until_metric")
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(TrainConfig)}


# ---------------------------------------------------------------- data: one stream per member

class MemberStream:
    """Fresh training batches for one member: `next()` -> Batch of `batch_size` sequences.

    Samples `prefetch` batches per task.sample call and hands them out in order: fewer calls
    into the samplers' per-time-step Python loops, still never a repeated sequence. Nothing is
    checked here: the task's own sampler makes the data (tokens in range, posteriors from the
    oracle without its input checks), so a chunk costs no read back to the host.
    """

    def __init__(self, task: Task, seed: int, batch_size: int, prefetch: int = 16,
                 device: torch.device | str = "cpu") -> None:
        self.task, self.batch_size, self.prefetch = task, batch_size, prefetch
        self.generator = torch.Generator(device=device).manual_seed(data_seed(seed))
        self._chunk_state = self.generator.get_state()  # generator state before the current chunk
        self._chunk: Batch | None = None
        self._offset = 0

    def _refill(self) -> None:
        self._chunk_state = self.generator.get_state()
        self._chunk = self.task.sample(self.batch_size * self.prefetch, self.generator)
        self._offset = 0

    def next(self) -> Batch:
        if self._chunk is None or self._offset == self.prefetch:
            self._refill()
        b, i = self.batch_size, self._offset
        self._offset += 1
        return self._chunk.slice(i * b, (i + 1) * b)

    def state_dict(self) -> dict:
        """Enough to replay exactly: the generator state before the current chunk, the offset."""
        return {"chunk_state": self._chunk_state.clone(), "offset": self._offset,
                "has_chunk": self._chunk is not None}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["chunk_state"].cpu())  # RNG states are CPU byte tensors
        self._chunk, self._offset = None, 0
        if state["has_chunk"]:
            self._refill()
            self._offset = state["offset"]


def stack_members(batches: list[Batch]) -> tuple[Tensor, Tensor | None, Tensor, Tensor]:
    """Per-member batches -> (tokens [E,B,L], header [E,B,H,D] or None, targets, mask [E,B,L])."""
    if len(batches) == 1:  # one member: views, no copies
        b = batches[0]
        header = None if b.header is None else b.header.unsqueeze(0)
        return b.tokens.unsqueeze(0), header, b.targets.unsqueeze(0), b.mask.unsqueeze(0)
    header = None if batches[0].header is None else torch.stack([b.header for b in batches])
    return (torch.stack([b.tokens for b in batches]), header,
            torch.stack([b.targets for b in batches]), torch.stack([b.mask for b in batches]))


# ---------------------------------------------------------------- loss and per-member clipping

def member_losses(logits: Tensor, targets: Tensor, mask: Tensor) -> Tensor:
    """Cross-entropy per member, averaged over that member's supervised positions: [E].

    Hard targets [E,B,L] (IGNORE_INDEX off the mask) or soft targets [E,B,L,C].
    """
    if targets.dim() == 3:
        ce = F.cross_entropy(logits.flatten(0, 2).float(), targets.flatten(), reduction="none")
        ce = ce.view(mask.shape)
    else:
        ce = -(targets * torch.log_softmax(logits.float(), -1)).sum(-1)
    ce = torch.where(mask, ce, torch.zeros((), device=ce.device, dtype=ce.dtype))
    return ce.sum((1, 2)) / mask.sum((1, 2)).clamp(min=1)


def uses_dropout(model: nn.Module) -> bool:
    """Whether a forward of `model` in training mode may draw dropout masks: an nn.Dropout with
    p > 0, or a module whose `dropout` / `embed_dropout` rate (the functional F.dropout callers
    here) is above 0."""
    for m in model.modules():
        if isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0:
            return True
        if any(isinstance(getattr(m, a, None), float) and getattr(m, a) > 0 for a in ("dropout", "embed_dropout")):
            return True
    return False


def decays(p: Tensor) -> bool:
    """Weight decay on matrices and embeddings (>= 2 dims per member), not on biases, norms or
    parameters flagged `_no_weight_decay` (e.g. Mamba's A_log, which decay would pull to A = -1)."""
    return p.dim() >= 3 and not getattr(p, "_no_weight_decay", False)


def set_matmul_precision(precision: str, device: torch.device) -> None:
    """TF32 matmuls on CUDA for 'auto'/'tf32'/'bf16', exact float32 for 'fp32' (process-wide)."""
    if device.type == "cuda":
        tf32 = precision != "fp32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32


def autocast(precision: str, device: torch.device):
    """bfloat16 autocast of the forward pass for precision='bf16'; a no-op context otherwise."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


# ---------------------------------------------------------------- the loop

@dataclass
class TrainResult:
    """What a training run produced. losses: [steps_done, E] training CE per member (nats).
    curve: the learning curves (None when off); stopped: member -> (step, kind, sentence) for the
    members an `until` criterion stopped."""

    run_id: str
    model: EnsembleModel
    seeds: list[int]
    steps: int
    losses: Tensor
    wall_s: float
    diverged: dict[int, str] = field(default_factory=dict)
    checkpoint: str | None = None
    identity: dict = field(default_factory=dict)  # task config, arch, model config, seeds, training
    meta: dict = field(default_factory=dict)  # caller's notes kept in the checkpoint (preset, label, ...)
    curve: EnsembleCurve | None = None
    stopped: dict[int, tuple[int, str, str]] = field(default_factory=dict)
    died_at: dict[int, int] = field(default_factory=dict)  # member -> the step it diverged on
    code: dict = field(default_factory=dict)  # the code that trained it (`run_code`; bayesbench.versions)

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.wall_s if self.wall_s > 0 else float("nan")

    def final_loss(self, window: int = 100) -> list[float]:
        """Per member: mean training cross-entropy (nats) over the last `window` steps it trained
        (up to its stop step for a member an `until` criterion stopped)."""
        out = []
        for e in range(self.losses.shape[1]):
            end = self.stopped[e][0] if e in self.stopped else self.losses.shape[0]
            out.append(float(self.losses[max(0, end - window):end, e].mean()))
        return out

    def stop(self, e: int) -> tuple[int, str]:
        """(step, kind) where member e stopped training: "threshold" or "plateau" (its `until`
        criterion), "diverged" (the guard froze it; the step it diverged on), or "budget" (it
        trained every step it was given, or the run was cut short before)."""
        if e in self.stopped:
            return self.stopped[e][0], self.stopped[e][1]
        if e in self.diverged:
            return self.died_at.get(e, self.steps), "diverged"
        return self.steps, "budget"


class Trainer:
    """Holds the model, optimiser and data streams of one ensemble run; `fit()` runs it.

    A step reads nothing back to the host: the per-member losses go into a device buffer and the
    divergence guard's `alive` mask stays on the device; both are read every `cfg.sync_every`
    steps (and before a checkpoint), which is when a diverged member is reported.
    """

    def __init__(self, task: Task, arch: str, seeds: list[int], cfg: TrainConfig, *,
                 model_cfg: dict | None = None, max_len: int | None = None,
                 device: torch.device | str = "cpu", run_dir: str | None = None,
                 run_id: str | None = None, meta: dict | None = None) -> None:
        if not seeds:
            raise ValueError("seeds must name at least one seed")
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"seeds must be distinct, got {seeds}")
        if any(isinstance(s, bool) or int(s) != s or s < 0 or s > MAX_SEED for s in seeds):
            raise ValueError(f"seeds must be integers in [0, 2^63 - 1], got {seeds}")
        self.task, self.arch, self.seeds, self.cfg = task, arch, [int(s) for s in seeds], cfg
        self.code = run_code(task, arch)
        self.model_cfg, self.max_len = dict(model_cfg or {}), max_len
        self.device = torch.device(device)
        self.run_dir, self.run_id = run_dir, run_id or uuid.uuid4().hex[:12]
        self.meta = dict(meta or {})
        set_matmul_precision(cfg.precision, self.device)
        self.model = get_model(arch, task, seeds=self.seeds, max_len=max_len, device=self.device, **self.model_cfg)
        self.model.validate_token_values = False  # the task's sampler makes the tokens: in range by construction
        self.forward = torch.compile(self.model) if cfg.compile else self.model
        self._dropout = uses_dropout(self.model)
        self.optimizer = FlatMemberAdamW(self.model, self.ensemble, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2),
                                         weight_decay=cfg.weight_decay, decays=decays, max_norm=cfg.grad_clip)
        self.params = list(self.model.parameters())  # model order (the optimiser's buffer puts decayed ones first)
        self.streams = [MemberStream(task, s, cfg.batch_size, cfg.prefetch, self.device) for s in self.seeds]
        self.step = 0
        self.saved_step: int | None = None  # the step of the last checkpoint this trainer wrote or loaded
        self.losses: list[Tensor] = []  # host copies, one [E] row per step, filled at each sync
        self.alive = [True] * len(self.seeds)  # host view of the guard, as of the last sync
        self.diverged: dict[int, str] = {}
        self._alive = torch.ones(self.ensemble, dtype=torch.bool, device=self.device)
        self._died_at = torch.full((self.ensemble,), -1, dtype=torch.long, device=self.device)
        self._step_on_device = torch.zeros((), dtype=torch.long, device=self.device)
        self._pending: list[Tensor] = []  # device loss rows not yet read
        self.elapsed = 0.0
        self._start = time.perf_counter()  # fit's clock origin (wall time of the curve points)
        # learning curves: the fixed set on the device, the steps to measure, the host log and the
        # device values not yet read; members stopped by cfg.until and the device mask of the others
        self.curve_set = CurveSet(self.curve_task(), cfg.curve_sequences, self.device) if cfg.curves else None
        self._curve_at = set(curve_steps(cfg.steps, cfg.curve_every)) if cfg.curves else set()
        self.curve = self._new_curve() if cfg.curves else None
        if cfg.until is not None and cfg.until_metric not in self.curve.values_kept():
            raise ValueError(f"until_metric {cfg.until_metric!r} has no positions in {self.curve.task} (kl:repeated "
                             "and kl:new are the bijection's cases); use entropy_mae, entropy_mae_positional or kl")
        self._curve_pending: list[tuple[int, float, Tensor]] = []
        self.stopped: dict[int, tuple[int, str, str]] = {}
        self._go = self._go_mask()
        # Observers of each step (e.g. bayesbench.dynamics' profiler): objects with optional
        # before_forward(trainer), before_update(trainer, tokens, header) (gradients computed; the
        # optimiser step, which clips them per member, comes next)
        # and after_update(trainer, tokens, header); trainer.step is the 0-based step being taken;
        # after_sync(trainer) once the losses and curve points are read back (training/loggers.py).
        self.hooks: list = []

    def _call_hooks(self, name: str, *args) -> None:
        for hook in self.hooks:
            fn = getattr(hook, name, None)
            if fn is not None:
                fn(self, *args)

    @property
    def ensemble(self) -> int:
        return len(self.seeds)

    def curve_task(self) -> Task:
        """The task the learning curve scores: the run's primary evaluation. For the bijection
        that is the first of its scored position sets (meta["eval_scored"], named as in
        `scoring.evaluate.evaluation_tasks`); otherwise the training task itself."""
        scored = self.meta.get("eval_scored") or ()
        if scored and self.task.name == "bijection":
            if scored[0] not in SCORED_SETS:
                raise ValueError(f"eval_scored must name sets among {tuple(SCORED_SETS)}, got {list(scored)}")
            return dataclasses.replace(self.task, supervise=SCORED_SETS[scored[0]])
        return self.task

    def _new_curve(self) -> EnsembleCurve:
        cadence = f"every {self.cfg.curve_every} steps" if self.cfg.curve_every else "log-spaced, 8 per decade"
        return EnsembleCurve(task=self.curve_set.task.describe(), n_sequences=self.cfg.curve_sequences,
                             cadence=cadence, batch_size=self.cfg.batch_size,
                             seq_len=self.task.seq_len, uniform=self.curve_set.uniform())

    def _go_mask(self) -> Tensor:
        """[E] bool on the device: the members no `until` criterion has stopped (diverged ones included)."""
        return torch.tensor([e not in self.stopped for e in range(self.ensemble)], device=self.device)

    def running(self) -> bool:
        """Whether any member still trains (as of the last sync): neither diverged nor stopped."""
        return any(a and e not in self.stopped for e, a in enumerate(self.alive))

    def identity(self) -> dict:
        """What must match for a checkpoint to be resumed by this trainer."""
        train = self.cfg.as_dict()
        for k in ("checkpoint_every", "compile", "sync_every"):
            train.pop(k)
        code = versions.keyed(self.code)  # what keys hash of the code: outside contents, raised versions
        return {"task": self.task.config(), "arch": self.arch, "model": self.model_cfg,
                "max_len": self.max_len, "seeds": self.seeds, "train": train,
                "device_type": self.device.type,  # data generators are per device type
                **({"code": code} if code else {})}

    # -- one step
    def train_step(self) -> Tensor:
        """One AdamW step of every live member, with no host read; returns the per-member
        losses [E] on the device (nan for a member that has diverged)."""
        tokens, header, targets, mask = stack_members([s.next() for s in self.streams])
        self.model.train()
        self._call_hooks("before_forward")
        with self._step_rng(), autocast(self.cfg.precision, self.device):
            logits = self.forward(tokens, header)
        loss = member_losses(logits, targets, mask)
        self.optimizer.zero_grad()
        loss.sum().backward()  # members are independent: a diverged member's nan stays in its own gradients
        self._call_hooks("before_update", tokens, header)
        if not self.stopped:
            _, ok = self.optimizer.step(self.cfg.lr_at(self.step), self._alive, loss)
            self._died_at = torch.where(self._alive & ~ok, self._step_tensor(), self._died_at)
            self._alive = ok
        else:  # members an `until` criterion stopped are frozen as a diverged one is, optimiser state too
            running = self._alive & self._go
            _, ok = self.optimizer.step(self.cfg.lr_at(self.step), running, loss, keep_state=True)
            diverged = running & ~ok
            self._died_at = torch.where(diverged, self._step_tensor(), self._died_at)
            self._alive = self._alive & ~diverged
        self._call_hooks("after_update", tokens, header)
        values = loss.detach()
        self._pending.append(values)
        return values

    @contextlib.contextmanager
    def _step_rng(self):
        """torch's global RNG (dropout's) seeded for this step only (`seeds.dropout_seed`), the
        caller's RNG state restored afterwards: reproducible whatever ran before in the process."""
        if not self._dropout:  # nothing in the step draws from the global RNG (saves ~0.1 ms a step)
            yield
            return
        cuda = self.device.type == "cuda"
        with torch.random.fork_rng(devices=[self.device.index or 0] if cuda else []):
            torch.manual_seed(dropout_seed(self.seeds, self.step))
            yield

    def _step_tensor(self) -> Tensor:
        self._step_on_device.fill_(self.step)
        return self._step_on_device

    def curve_point(self) -> None:
        """Score every member on the curve set after step `self.step`; the values stay on the
        device until the next sync (no host read)."""
        values = self.curve_set.score(self.model)
        self._curve_pending.append((self.step, time.perf_counter() - self._start, values))

    def sync(self) -> None:
        """Read the pending loss rows, curve points and the guard's state (one device-to-host
        transfer), then apply the `until` criterion to the new curve points.

        A member's losses from the step it diverged on are reported as nan; the reason is read
        from its loss at that step (not finite: the loss; finite: its gradient norm was not)."""
        if not self._pending and not self._curve_pending:
            return
        first = self.step - len(self._pending)
        E = self.ensemble
        rows = torch.stack(self._pending).double() if self._pending else self._died_at.new_zeros((0, E)).double()
        points = [v for _, _, v in self._curve_pending]
        curve = torch.stack(points) if points else rows.new_zeros((0, len(CURVE_METRICS), E))
        packed = torch.cat([rows.flatten(), self._died_at.double(), curve.flatten()]).cpu()
        n = rows.shape[0]
        rows, died = packed[: n * E].view(n, E).float(), packed[n * E:n * E + E].tolist()
        curve = packed[n * E + E:].view(-1, len(CURVE_METRICS), E)
        self._pending = []
        for e in range(E):
            d = int(died[e])
            if d >= 0:
                rows[max(0, d - first):, e] = float("nan")
            if self.alive[e] and d >= 0:
                self.alive[e] = False
                k = d - first  # the row of step d in this window
                loss_at = float(packed[k * E + e]) if 0 <= k < n else float("nan")
                reason = "gradient norm is not finite" if math.isfinite(loss_at) else "loss is not finite"
                self.diverged[e] = (f"member {e} (seed {self.seeds[e]}) diverged at step {d}: {reason}; "
                                    "frozen at its last parameters, the other members continue")
                _say(f"bayesbench: {self.diverged[e]}")
        self.losses.extend(rows.unbind(0))
        for (step, wall, _), values in zip(self._curve_pending, curve):
            self.curve.append(step, wall, values.tolist())
        self._curve_pending = []
        if not any(self.alive):  # the run ended when the last member diverged
            last = max(int(d) for d in died) + 1
            self.losses = self.losses[:last]
            self.step = min(self.step, last)
            if self.curve is not None:
                self.curve.truncate(last)
        elif self.cfg.until is not None and self.curve is not None:
            self._apply_until()
        self._call_hooks("after_sync")  # what was read is on the host now (e.g. training/loggers.py)

    def _apply_until(self) -> None:
        """Stop each training member whose curve meets cfg.until at its newest point: from the
        next step on the optimiser leaves it (parameters and moments) exactly as it is."""
        metric = self.cfg.until_metric
        changed = False
        for e in range(self.ensemble):
            if not self.alive[e] or e in self.stopped:
                continue
            why = stop_reason(self.cfg.until, metric, self.curve.steps, self.curve.member(e, metric), self.cfg.steps)
            if why is not None:
                self.stopped[e] = (self.curve.steps[-1], *why)
                changed = True
        if changed:
            self._go = self._go_mask()

    def _stop(self, signame: str) -> None:
        """A stop request between two steps: checkpoint this step, then raise `Interrupted`."""
        path = self.save() if self.run_dir else None
        stop = interrupt.Interrupted(signame)
        stop.stopped.append({"run": f"{self.task.name} / {self.arch}", "phase": "training", "step": self.step,
                             "steps": self.cfg.steps, "checkpoint": path})
        raise stop

    # -- checkpoints
    def checkpoint_path(self) -> str | None:
        return None if self.run_dir is None else os.path.join(self.run_dir, CHECKPOINT_NAME)

    def save(self, path: str | None = None) -> str:
        """Write model, optimiser, data streams, step, RNG and history (atomically: the file at
        `path` is always a whole checkpoint, see `checkpoint.save_atomic`)."""
        path = path or self.checkpoint_path()
        if path is None:
            raise ValueError("save needs a path (or a run_dir given to the Trainer)")
        self.sync()
        state = {
            "identity": self.identity(), "run_id": self.run_id, "step": self.step,
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "streams": [s.state_dict() for s in self.streams],
            "rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if self.device.type == "cuda" else None,
            "losses": torch.stack(self.losses) if self.losses else torch.zeros(0, self.ensemble),
            "alive": self.alive, "diverged": self.diverged, "died_at": self._died_at.cpu(),
            "elapsed": self.elapsed, "meta": self.meta,
            "curve": None if self.curve is None else self.curve.state_dict(), "stopped": self.stopped,
            "code": self.code,
        }
        path = save_atomic(state, path)
        self.saved_step = self.step
        return path

    def load(self, path: str) -> None:
        """Continue from a checkpoint written by `save` for the same configuration."""
        state = load_checkpoint(path, self.device, required=CHECKPOINT_KEYS)
        mine, theirs = self.identity(), state["identity"]
        check_code(path, theirs, state.get("code"), self.code)
        for key in mine:
            if key != "code" and mine[key] != theirs.get(key):
                raise ValueError(f"checkpoint {path} was written for another run: {key} differs "
                                 f"({theirs.get(key)!r} there, {mine[key]!r} here)")
        try:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError) as err:
            raise DamagedFile(f"checkpoint {path} is damaged: its weights or optimiser state do not fit the model "
                              f"it names ({' '.join(str(err).split())[:200]}); it was left as it is") from err
        for stream, s in zip(self.streams, state["streams"]):
            stream.load_state_dict(s)
        torch.set_rng_state(state["rng"].cpu())
        if state["cuda_rng"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda_rng"]])
        self.run_id, self.step, self.elapsed = state["run_id"], state["step"], state["elapsed"]
        self.saved_step = self.step
        self.losses = list(state["losses"].cpu().unbind(0))
        self.alive, self.diverged = list(state["alive"]), dict(state["diverged"])
        self._alive = torch.tensor(self.alive, dtype=torch.bool, device=self.device)
        self._died_at = state["died_at"].to(self.device)
        self._pending, self._curve_pending = [], []
        self.stopped = {int(e): tuple(v) for e, v in (state.get("stopped") or {}).items()}
        self._go = self._go_mask()
        if self.curve is not None:
            saved = state.get("curve")
            if saved is None and self.step > 0:
                _say(f"bayesbench: checkpoint {path} holds no learning curve (written before curves existed): the "
                     f"curve of this run starts at step {self.step}")
            self.curve = self._new_curve() if saved is None else EnsembleCurve.from_state(saved)

    # -- the loop
    def fit(self, *, progress: bool = True, stop_at: int | None = None, position: int = 0) -> TrainResult:
        """Train to cfg.steps (or stop after step `stop_at`, as an interruption would).

        `position` is the progress bar's line (several runs in parallel processes)."""
        from tqdm.auto import tqdm

        end = self.cfg.steps if stop_at is None else min(stop_at, self.cfg.steps)
        bar = tqdm(total=self.cfg.steps, initial=self.step, disable=not progress, unit="step",
                   desc=f"{self.task.name} {self.arch} E={self.ensemble}", dynamic_ncols=True, leave=False,
                   position=position)
        every, sync_every = self.cfg.checkpoint_every, self.cfg.sync_every
        start = self._start = time.perf_counter() - self.elapsed
        try:
            with interrupt.deferred():  # a step is never cut in half: a stop request waits for its end
                while self.step < end and self.running():
                    self.train_step()
                    self.step += 1
                    measured = self.step in self._curve_at
                    if measured:
                        self.curve_point()
                    if self.step % sync_every == 0 or self.step == end or (measured and self.cfg.until is not None):
                        self.sync()
                        if progress and self.losses:
                            recent = torch.stack(self.losses[-sync_every:]).nanmean().item()
                            bar.set_postfix(loss=f"{recent:.4f}", refresh=False)
                            bar.update(self.step - bar.n)
                    self.elapsed = time.perf_counter() - start
                    if every and self.step % every == 0 and self.step < self.cfg.steps and self.run_dir \
                            and self.running():
                        self.save()
                    if interrupt.requested():
                        self._stop(interrupt.requested())
            self.sync()
            self.elapsed = time.perf_counter() - start
        finally:
            bar.close()
        if not any(self.alive):
            _say(f"bayesbench: every member of {self.task.name}/{self.arch} diverged; run stopped at step {self.step}")
        elif self.stopped and not self.running() and self.step < self.cfg.steps:
            _say(f"bayesbench: every member of {self.task.name}/{self.arch} met its criterion (until "
                 f"{self.cfg.until}); run stopped at step {self.step} of {self.cfg.steps}")
        path = self.save() if self.run_dir else None
        return self.result(path)

    @property
    def finished(self) -> bool:
        """Whether training is over: every step done, or no member left training."""
        return self.step >= self.cfg.steps or not self.running()

    def result(self, checkpoint: str | None = None) -> TrainResult:
        """The run as it stands (after a sync) as a TrainResult."""
        losses = torch.stack(self.losses) if self.losses else torch.zeros(0, self.ensemble)
        return TrainResult(self.run_id, self.model, self.seeds, self.step, losses, self.elapsed,
                           dict(self.diverged), checkpoint, self.identity(), dict(self.meta),
                           None if self.curve is None else self.curve.copy(), dict(self.stopped),
                           _died(self._died_at.cpu(), self.diverged), dict(self.code))


def _say(message: str) -> None:
    """A note to stderr (stdout may carry --json), around any progress bar."""
    import sys

    from tqdm.auto import tqdm

    tqdm.write(message, file=sys.stderr)


@contextlib.contextmanager
def open_trainer(task: Task, arch: str, seeds: list[int], cfg: TrainConfig, *, model_cfg: dict | None = None,
                 max_len: int | None = None, device: torch.device | str = "cpu", run_dir: str | None = None,
                 run_id: str | None = None, meta: dict | None = None, resume: bool = False,
                 say: Callable[[str], None] | None = None) -> Iterator[Trainer]:
    """The one way a run gets its Trainer: `with open_trainer(...) as trainer: trainer.fit()`.

    With `run_dir`, the run directory is locked for the block (`runlock.run_lock`: a second
    process on it gets a ValueError), temporary files of saves a killed process left there are
    removed, and `resume=True` continues from run_dir/checkpoint.pt when it exists (model,
    optimiser, data streams, step, RNG: the resumed run is exactly the uninterrupted one).
    `say`, if given, is told which step it resumed from, or that there was no checkpoint.
    """
    if resume and run_dir is None:
        raise ValueError("resume=True needs run_dir (where the checkpoint is)")
    with run_lock(run_dir, say=_say) if run_dir is not None else contextlib.nullcontext():
        if run_dir is not None:
            remove_leftovers(os.path.join(run_dir, CHECKPOINT_NAME))  # temporary files of killed saves
        trainer = Trainer(task, arch, seeds, cfg, model_cfg=model_cfg, max_len=max_len, device=device,
                          run_dir=run_dir, run_id=run_id, meta=meta)
        path = trainer.checkpoint_path()
        if resume and os.path.exists(path):
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
                      run_id=run_id, meta=meta, resume=resume, say=_say) as trainer:
        return trainer.fit(progress=progress, stop_at=stop_at, position=position)


def load_result(path: str, device: torch.device | str = "cpu") -> TrainResult:
    """Rebuild a run's model and record from its checkpoint alone (for `bayesbench eval`)."""
    state = load_checkpoint(path, device, required=CHECKPOINT_KEYS)
    ident = state["identity"]
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
                       _died(state["died_at"].cpu(), state["diverged"]), code)


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
    checkpoint older than code records, the contents of its outside files as unknown."""
    if saved is None:
        saved = identity.get("code") or versions.legacy(identity.get("task"), identity.get("arch"))
    changed = versions.changed(saved, current)
    if changed:
        raise CodeChanged(f"checkpoint {path}: {'; '.join(changed)} since it was written; it was left as it is "
                          "(restore that code to use it, or train again: other code gets its own key and run "
                          "directory)")


def _died(died_at: Tensor, diverged: dict) -> dict[int, int]:
    """member -> the step it diverged on, for the members the host knows diverged."""
    return {e: int(died_at[e]) for e in diverged}


def task_of(result: TrainResult) -> Task:
    """The training task a result was trained on (from its identity)."""
    return task_from_config(result.identity["task"])
