"""Train an ensemble: E seeds in one model, each exactly the model a solo run would train.

What makes member e of an ensemble with seeds [s_0..s_{E-1}] equal a solo run with seed s_e:
- initialisation from its own seed (`EnsembleModel.init_members`);
- its own data stream, seeded from s_e only (`MemberStream`);
- its loss is the mean over its own supervised positions, and the total loss is the SUM over
  members, so d(total)/d(member e's parameters) = d(loss_e)/d(member e's parameters);
- gradient clipping per member: the global norm over member e's slice of every parameter;
- AdamW is element-wise, so its state and update are per member already.

The loop also holds the NaN/inf guard that freezes a diverged member (the others continue; all
diverged stops the run), the learning curves measured between steps (`curves.py`) and training
to a criterion on them (`until.py`: a member that meets it is frozen as a diverged one is), a
checkpoint every `checkpoint_every` steps and at a stop request (`checkpoint.py`: a resumed run
is exactly the uninterrupted one, its curve included), optional torch.compile and a tqdm bar.
Its settings are `config.py`'s, its data `stream.py`'s, its loss and precision `numerics.py`'s;
`run.py` opens a Trainer in its run directory (`open_trainer`) and trains it (`train`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
import uuid
from typing import Any

import torch
from torch import Tensor

from ..identity import RunSpec, difference
from ..metric_table import curve_metrics
from ..models import get_model
from ..running import interrupt
from ..tasks import Task
from .checkpoint import (
    CHECKPOINT_NAME,
    restore_trainer,
    run_code,
    save_atomic,
    trainer_state,
)
from .config import TrainConfig
from .curves import CurveSet, EnsembleCurve, curve_steps, curve_task
from .numerics import autocast, decays, member_losses, set_matmul_precision, uses_dropout
from .optim import FlatMemberAdamW
from .result import TrainResult, died_steps
from .seeds import check_seeds, dropout_rng
from .stream import MemberStream, stack_members
from .until import stop_reason


class Trainer:
    """Holds the model, optimiser and data streams of one ensemble run; `fit()` runs it.

    A step reads nothing back to the host: the per-member losses go into a device buffer and the
    divergence guard's `alive` mask stays on the device; both are read every `cfg.sync_every`
    steps (and before a checkpoint), which is when a diverged member is reported.
    """

    def __init__(self, task: Task, arch: str, seeds: list[int], cfg: TrainConfig, *,
                 model_cfg: dict | None = None, max_len: int | None = None,
                 device: torch.device | str = "cpu", run_dir: str | None = None,
                 run_id: str | None = None, meta: dict | None = None, spec: RunSpec | None = None) -> None:
        """`spec`: the run as its caller resolved and keyed it (a sweep job's `Job.spec`): the
        trainer's identity is read from it (its label and evaluation too), after checking that the
        trainer's own settings are the ones it names, so that a key always describes its
        checkpoint. Without one (a trainer built directly), the trainer's settings make its spec,
        with the label and evaluation settings `meta` gives (`label`, `eval_lengths`,
        `eval_scored`, `eval_sequences`; by default the task's description and none).
        `meta`: the caller's notes, kept in the checkpoint and read by the scorer."""
        self.task, self.arch, self.seeds, self.cfg = task, arch, check_seeds(seeds), cfg
        self.code = run_code(task, arch)
        self.model_cfg, self.max_len = dict(model_cfg or {}), max_len
        self.device = torch.device(device)
        self.run_dir, self.run_id = run_dir, run_id or uuid.uuid4().hex[:12]
        self.meta = dict(meta or {})
        self.threads = torch.get_num_threads()  # part of the identity: the last digits depend on it
        self.spec = self._spec(spec)
        set_matmul_precision(cfg.precision, self.device)
        self.model = get_model(arch, task, seeds=self.seeds, max_len=max_len, device=self.device, **self.model_cfg)
        self.model.validate_token_values = False  # the task's sampler makes the tokens: in range by construction
        self.forward = torch.compile(self.model) if cfg.compile else self.model
        self._dropout = uses_dropout(self.model)
        if cfg.member_lrs is not None and len(cfg.member_lrs) != self.ensemble:
            raise ValueError(f"member_lrs names {len(cfg.member_lrs)} learning rates for {self.ensemble} seeds "
                             f"{self.seeds}: one rate per member")
        self.optimizer = FlatMemberAdamW(self.model, self.ensemble, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2),
                                         weight_decay=cfg.weight_decay, decays=decays, max_norm=cfg.grad_clip,
                                         member_scales=cfg.member_scales())
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
        self.curve_set = CurveSet(self.curve_task(), cfg.curve_sequences, self.device, split=cfg.curve_set,
                                  eval_sequences=self.spec.eval_sequences) if cfg.curves else None
        self._curve_at = set(curve_steps(cfg.steps, cfg.curve_every)) if cfg.curves else set()
        self.curve = self._new_curve() if cfg.curves else None
        if cfg.until is not None and self.curve is not None and cfg.until_metric not in self.curve.values_kept():
            raise ValueError(f"until_metric {cfg.until_metric!r} has no positions in {self.curve.task}; use one of "
                             f"{', '.join(self.curve.values_kept())}")
        self._curve_pending: list[tuple[int, float, Tensor]] = []
        self.stopped: dict[int, tuple[int, str, str]] = {}
        self._go = self._go_mask()
        # Observers of each step (e.g. bayesbench.dynamics' profiler): objects with optional
        # before_forward(trainer), before_update(trainer, tokens, header) (gradients computed; the
        # optimiser step, which clips them per member, comes next) and after_update(trainer, tokens,
        # header), trainer.step the 0-based step being taken; after_sync(trainer) once the losses and
        # curve points are read back (training/loggers.py).
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
        """The task the learning curve scores (`curves.curve_task`: the primary evaluation's)."""
        return curve_task(self.task, self.spec.eval_scored)

    def _new_curve(self) -> EnsembleCurve:
        assert self.curve_set is not None, "a curve is made only when cfg.curves (the set exists)"
        return EnsembleCurve.empty(self.curve_set, self.cfg.curve_every, self.cfg.batch_size, self.task.seq_len)

    def _go_mask(self) -> Tensor:
        """[E] bool on the device: the members no `until` criterion has stopped (diverged ones included)."""
        return torch.tensor([e not in self.stopped for e in range(self.ensemble)], device=self.device)

    def running(self) -> bool:
        """Whether any member still trains (as of the last sync): neither diverged nor stopped."""
        return any(a and e not in self.stopped for e, a in enumerate(self.alive))

    def _spec(self, keyed: RunSpec | None) -> RunSpec:
        """The run's spec: `keyed` (the caller's), checked against the trainer's settings, else one
        made of them (see `__init__`)."""
        own: dict[str, Any] = {"task": self.task.config(), "arch": self.arch, "model": self.model_cfg,
                               "max_len": self.max_len, "train": self.cfg.identity(),
                               "device_type": self.device.type, "threads": self.threads}
        if keyed is None:
            meta = self.meta
            return RunSpec(label=meta.get("label", self.task.describe()),
                           eval_lengths=tuple(meta.get("eval_lengths", ())),
                           eval_scored=tuple(meta.get("eval_scored", ())), eval_sequences=meta.get("eval_sequences"),
                           code=self.code, **own)
        # the code is the worker's to check (`sweep.one_job.check_still_keyed`): a key also holds the metrics'
        differs = difference(keyed.identity, dataclasses.replace(keyed, **own).identity, skip=("code",))
        if differs:
            raise ValueError(f"the trainer is not the run it was keyed by: {differs} (the key there, the trainer here)")
        return keyed

    def identity(self) -> dict:
        """The run's identity (`spec.identity`) and its seeds: what a checkpoint records and what
        must match to resume it."""
        return {**self.spec.identity, "seeds": list(self.seeds)}

    # -- one step
    def train_step(self) -> Tensor:
        """One AdamW step of every live member, with no host read; returns the per-member
        losses [E] on the device (nan for a member that has diverged)."""
        tokens, header, targets, mask = stack_members([s.next() for s in self.streams])
        self.model.train()
        self._call_hooks("before_forward")
        with dropout_rng(self.seeds, self.step, self.device, self._dropout), autocast(self.cfg.precision, self.device):
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

    def _step_tensor(self) -> Tensor:
        self._step_on_device.fill_(self.step)
        return self._step_on_device

    def curve_point(self) -> None:
        """Score every member on the curve set after step `self.step`; the values stay on the
        device until the next sync (no host read)."""
        assert self.curve_set is not None, "curve points are taken only when cfg.curves"
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
        curve = torch.stack(points) if points else rows.new_zeros((0, len(curve_metrics()), E))
        packed = torch.cat([rows.flatten(), self._died_at.double(), curve.flatten()]).cpu()
        n = rows.shape[0]
        rows, died = packed[: n * E].view(n, E).float(), packed[n * E:n * E + E].tolist()
        curve = packed[n * E + E:].view(-1, len(curve_metrics()), E)
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
                note(f"bayesbench: {self.diverged[e]}")
        self.losses.extend(rows.unbind(0))
        for (step, wall, _), values in zip(self._curve_pending, curve):
            assert self.curve is not None, "curve points are pending only when cfg.curves"
            self.curve.append(step, wall, values.tolist())
        self._curve_pending = []
        if not any(self.alive):  # the run ended when the last member diverged
            last = max(int(d) for d in died) + 1
            self.losses = self.losses[:last]
            self.step = min(self.step, last)
            if self.curve is not None:
                self.curve.truncate(last)
        elif self.cfg.until is not None and self.curve is not None:
            self._apply_until(self.curve)
        self._call_hooks("after_sync")  # what was read is on the host now (e.g. training/loggers.py)

    def _apply_until(self, curve: EnsembleCurve) -> None:
        """Stop each training member whose curve meets cfg.until at its newest point: from the
        next step on the optimiser leaves it (parameters and moments) exactly as it is."""
        metric = self.cfg.until_metric
        changed = False
        for e in range(self.ensemble):
            if not self.alive[e] or e in self.stopped:
                continue
            why = stop_reason(self.cfg.until, metric, curve.steps, curve.member(e, metric), self.cfg.steps)
            if why is not None:
                self.stopped[e] = (curve.steps[-1], *why)
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
        path = save_atomic(trainer_state(self), path)
        self.saved_step = self.step
        return path

    def load(self, path: str) -> None:
        """Continue from a checkpoint written by `save` for the same identity and code."""
        restore_trainer(self, path, note)

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
                    signame = interrupt.requested()
                    if signame:
                        self._stop(signame)
            self.sync()
            self.elapsed = time.perf_counter() - start
        finally:
            bar.close()
        if not any(self.alive):
            note(f"bayesbench: every member of {self.task.name}/{self.arch} diverged; run stopped at step {self.step}")
        elif self.stopped and not self.running() and self.step < self.cfg.steps:
            note(f"bayesbench: every member of {self.task.name}/{self.arch} met its criterion (until "
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
                           died_steps(self._died_at.cpu(), self.diverged), dict(self.code))


def note(message: str) -> None:
    """A note to stderr (stdout may carry --json), around any progress bar."""
    import sys

    from tqdm.auto import tqdm

    tqdm.write(message, file=sys.stderr)
