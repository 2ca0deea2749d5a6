"""The profiler: a Trainer hook that records the routing quantities of every member while it learns.

Every `every`-th step (0, every, 2*every, ...) the attention layers switch to the probe backend
("eager" or "reference" on CPU, "triton" on a GPU) with a probe on each layer; the backward fills
them and `ProbeSet.summaries` reduces them to one number per (member, layer, head) on the
device. Every `law_every`-th profiled step the probe keeps the T x T advantage and, after the
optimiser step, the routing-law statistics are computed (routing.py) on the first
`law_sequences` sequences of that step's batch (law.py; relevance.py on the bijection with
repeated keys). At the checkpoint steps the attention maps of a fixed probe batch and the entropy
MAE / KL of a fixed evaluation set are taken (frames.py), and with `head_ablation` the entropy MAE
with each head zeroed. The probe, evaluation and held-out sets are given per member (each seed's
own, `dynamics.sets`: their sampling variance is then part of every interval over seeds) or as one
batch shared by every member (the behaviour before; it computes exactly as it did). Everything
stays on the device until a flush (every `flush_every` steps and at the end), which copies it to
the host once and writes one batch to the store.

The jitter floor: with `replicas` R > 0, at every `replica_every`-th checkpoint c the run's state
(parameters and optimiser moments) is continued R more times to the next checkpoint c' with
other data orders (fresh data streams; the same schedule), the maps and calibration measured at
c' and the state restored, so the run itself goes on exactly as without them (tested). The
R + 1 continuations from one state differ only by their data: their mean pairwise TV distance
(`map_jitter`) and calibration spread are how much a map or a score moves by chance over that
interval, the floor below which "still moving" cannot be told from jitter (frames.py). At the
law checks the value update is measured beside the routing law (law.value_statistics) and, on
the bijection with repeated keys, the label-route control of the relevant-key shares
(relevance.py).

Held-out law (issue 44): to first order a step aligns with its own batch's gradients (a positive
semidefinite self-term), so the law measured on the sequences that made the step holds partly
by construction. With `heldout_sequences` n > 0 every law check also takes, at the parameters
before the step, the advantage and upstream gradients of a fixed held-out batch (drawn from an
evaluation seed, a domain no training stream uses; its gradients are computed and discarded,
never accumulated), and after the step the change of its scores and values and the first-order
prediction: the same statistics with the prefix `heldout_` (law.HELDOUT_LAW and law.VALUE_NAMES). The in-batch
numbers stay beside them as the self-influence reference.

One scale for frame and precision (issue 44): at every checkpoint the model's predictive
distributions on the probe batch's scored positions are kept beside its maps, and measured with
the maps' machinery (`pred_drift_sq`, `pred_step_sq`, `pred_jitter_sq`). With `replica_to_end`
the replicas from a checkpoint s run through the late window (measured at the next checkpoint c
and at the late ones): the spread of the drift vectors X^r(c) - late^r of the R + 1
continuations is the chance part of the drift at c for any jitter process, independent or
autocorrelated (`map_floor_sq`, `pred_floor_sq`, `entropy_mae_floor_sq`, `kl_floor_sq`;
frames.drift_floor_sq).

Continuous tunnels (issue 41: linreg, mixreg, kalman; a Gaussian or mixture head): the routing
and value laws, the probes, the maps, their drift and jitter and the calibration (entropy MAE and
KL in bits against the exact predictive density, `scoring.continuous`) are measured as for a
categorical head. The predictive distributions' squared distances (PRED_NAMES) are not: they
need a distribution over classes, the maps' scale, and a continuous predictive is a density
(`CONTINUOUS_NOTE`, printed by the study); `head_ablation` (a categorical entropy MAE) is refused.

Record conventions (table `dynamics`): probe and law quantities carry the 0-based index of the
step whose gradient was probed; checkpoint quantities (entropy_mae, kl, map_drift) carry the
number of steps done (0 = initialisation); `map_velocity` at checkpoint c is the TV distance
from the previous checkpoint's maps per step between them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
from torch import Tensor

from ...models.heads import is_continuous
from ...scoring.evaluate import evaluate_members
from ...tasks import Batch
from ..sets import calibration, is_shared, scored_rows, stack_sets
from ..store import write_dynamics
from .frames import map_entropy, pairwise_sq, pairwise_tv
from .law import HELDOUT_LAW, LAW_NAMES, VALUE_NAMES, law_statistics, own_qk_tangent, value_statistics
from .probes import PROBE_NAMES, ProbeSet
from .relevance import (
    CONTROL_NAMES,
    RELEVANCE_NAMES,
    applies,
    label_targets,
    paired_statistics,
    relevance_statistics,
    relevant_keys,
)
from .routing import attention_maps, masked_softmax, predicted_change, transformer_scores, transformer_values, values_at

#: The records measured on the predictive distributions over classes (absent on a continuous head).
PRED_NAMES = ("pred_drift_sq", "pred_step_sq", "pred_jitter_sq", "pred_floor_sq")
#: What a profile of a continuous tunnel does not measure, and why (one line).
CONTINUOUS_NOTE = (f"not measured on a continuous head: {', '.join(PRED_NAMES)} (they need a predictive "
                   f"distribution over classes, on the maps' scale; a Gaussian or mixture predictive is a density)")


@dataclass(frozen=True)
class ProfileConfig:
    """What the profiler records and when (see the module docstring)."""

    every: int = 10
    law_every: int = 1  # every law_every-th profiled step checks the routing law; 0: never
    flush_every: int = 200
    backend: str = "eager"
    checkpoints: tuple[int, ...] = ()
    law_sequences: int = 8  # the law check uses the first n sequences of the step's batch per member
    head_ablation: bool = False  # at each checkpoint also the entropy MAE with each head zeroed
    replicas: int = 0  # continuations with other data orders from a checkpoint to the next (the jitter floor)
    replica_every: int = 1  # from every replica_every-th checkpoint (0, k, 2k, ...; never the last)
    late_maps: int = 3  # the drift's reference: the mean map of the last late_maps checkpoints
    heldout_sequences: int = 0  # the law check also on this many fixed held-out sequences; 0: not
    replica_to_end: bool = False  # replicas run through the late window (the floor of any jitter process)

    def __post_init__(self) -> None:
        if self.heldout_sequences == 1:
            raise ValueError("heldout_sequences must be 0 or >= 2 (the shuffle null pairs each sequence with another)")
        for name in ("every", "flush_every", "law_sequences", "replica_every", "late_maps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        for name in ("law_every", "replicas", "heldout_sequences"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {v!r}")

    def replica_from(self, step: int) -> int | None:
        """The checkpoint the replicas started at `step` run to, or None when none start there."""
        if not self.replicas or step not in self.checkpoints:
            return None
        k = self.checkpoints.index(step)
        if k % self.replica_every or k + 1 >= len(self.checkpoints):
            return None
        return self.checkpoints[k + 1]

    def replica_stops(self, step: int) -> list[int]:
        """The checkpoints the replicas from `step` are measured at: the next one and, with
        `replica_to_end`, the late ones (the last `late_maps`) too."""
        end = self.replica_from(step)
        if end is None:
            return []
        if not self.replica_to_end:
            return [end]
        late = [c for c in self.checkpoints[-self.late_maps:] if c > end]
        return [end, *late]


def _per_member(sets: Batch | list[Batch], ensemble: int, what: str) -> list[Batch]:
    """One batch per member: a list as given (checked to have one per member), or one batch shared
    by every member (the sets before issue 44's per-seed ones, `dynamics.sets`)."""
    if isinstance(sets, Batch):
        return [sets] * ensemble
    if len(sets) != ensemble:
        raise ValueError(f"{what} must be one batch or one per member ({ensemble}), got {len(sets)}")
    return list(sets)


def _inputs(batches: list[Batch], device) -> tuple[Tensor, Tensor | None]:
    """(tokens [E, B, L], header or None) of the members' own batches on `device`."""
    s = stack_sets(batches, device)
    return s.tokens, s.header


def replica_data_seed(seed: int, step: int, replica: int) -> int:
    """The data-stream seed of replica `replica` from checkpoint `step` of model seed `seed`: a
    training-data seed (`training.seeds`) other than the run's own stream."""
    import zlib

    from ...training.seeds import data_seed

    return data_seed(zlib.crc32(f"replica:{seed}:{step}:{replica}".encode()) + 2**32)


@dataclass(frozen=True)
class _PendingLaw:
    """What a law step records before its update (the probed advantage and upstream gradients, the
    parameters, the label control) for the check after it."""

    step: int
    advantage: Tensor
    upstream: Tensor
    params0: list[Tensor]
    control: Tensor | None  # only when the task has relevant keys (Profiler.relevance)
    heldout: tuple[Tensor, Tensor] | None = None  # the held-out batch's advantage and upstream at params0


class Profiler:
    """Attach to a Trainer (`trainer.hooks.append(profiler)`), call `start()` before `fit` and
    `finish()` after it."""

    def __init__(self, trainer, study_id: str, cfg: ProfileConfig, *, probe_batch: Batch | list[Batch],
                 eval_batch: Batch | list[Batch], db: str | None = None,
                 heldout_batch: Batch | list[Batch] | None = None) -> None:
        self.trainer, self.study_id, self.cfg, self.db = trainer, study_id, cfg, db
        self.continuous = is_continuous(trainer.task.head)
        if self.continuous and cfg.head_ablation:
            raise ValueError(f"head_ablation needs a categorical predictive (the entropy MAE over classes with a head "
                             f"zeroed); {trainer.task.name} has a continuous head ({trainer.task.head}): profile it "
                             f"without --head-ablation")
        self.probes = ProbeSet(trainer.model, cfg.backend)
        self.layers = self.probes.layers
        E = trainer.model.ensemble
        # one batch per member: each seed's own sets, or one shared by all (dynamics.sets)
        self.probe_sets = _per_member(probe_batch, E, "probe_batch")
        self.eval_sets = _per_member(eval_batch, E, "eval_batch")
        heldout = None if heldout_batch is None else _per_member(heldout_batch, E, "heldout_batch")
        if cfg.heldout_sequences and (heldout is None or
                                      min(b.batch_size for b in heldout) < cfg.heldout_sequences):
            raise ValueError(f"heldout_sequences={cfg.heldout_sequences} needs a held-out batch of at least that "
                             f"many sequences")
        self.heldout_sets = heldout if cfg.heldout_sequences else None
        self._rows: list[tuple[int, str, tuple[str, ...], Tensor]] = []  # (step, kind, names, [n, E, L, H])
        self._pending: _PendingLaw | None = None  # set before a law step's update, checked after it
        self.maps: dict[int, Tensor] = {}  # checkpoint step -> [L, E, B, H, T, T] (device)
        self.calibration: dict[int, Tensor] = {}  # checkpoint step -> [2, E] (entropy MAE, KL; host)
        self.preds: dict[int, Tensor] = {}  # checkpoint step -> [E, N, C] predictive distributions (probe batch)
        # replicas through the late window: (start, stop) -> maps [R, L, E, B, H, T, T] (float16),
        # predictive distributions [R, E, N, C] and calibration [R, 2, E]
        self.replica_path: dict[tuple[int, int], tuple[Tensor, Tensor, Tensor]] = {}
        self.replica_preds: dict[int, Tensor] = {}  # stop step -> [R, E, N, C] (the next checkpoint's)
        self.ablation: dict[int, Tensor] = {}  # checkpoint step -> [L, H, E] entropy MAE, head zeroed (host)
        # replicas: checkpoint step -> their maps [R, L, E, B, H, T, T] (float16, kept for the record)
        # and calibration [R, 2, E]; the jitter among them and the run's own map, [L, E, H] per step:
        # mean pairwise squared distance and TV
        self.replica_maps: dict[int, Tensor] = {}
        self.replica_calibration: dict[int, Tensor] = {}
        self.jitter: dict[int, tuple[Tensor, Tensor]] = {}
        self.pred_jitter: dict[int, Tensor] = {}  # step -> [E]: the same for the predictive distributions
        self.relevance = applies(trainer.task)  # the bijection with repeated keys: relevant-key ranks
        self.profiled_steps = 0
        self.law_steps = 0
        self.records_written = 0
        self.hook_s = 0.0  # wall time inside the hooks (probe reductions, law checks, checkpoints)
        self.replica_s = 0.0  # wall time of the jitter-floor replicas (inside hook_s)
        self.replica_cpu_s = 0.0  # their CPU time (process time)
        self.replica_steps = 0

    # -- the Trainer hooks
    def _profiled(self, step: int) -> bool:
        return step % self.cfg.every == 0

    def _law(self, step: int) -> bool:
        return self.cfg.law_every > 0 and (step // self.cfg.every) % self.cfg.law_every == 0

    def before_forward(self, trainer) -> None:
        self.probes.detach()  # a step that stopped before its backward leaves probes behind
        if self._profiled(trainer.step):
            self.probes.attach("full" if self._law(trainer.step) else "stats")

    def before_update(self, trainer, tokens: Tensor, header: Tensor | None) -> None:
        if not self.probes.attached:
            return
        t0 = time.perf_counter()
        step = trainer.step
        if self.probes.filled:
            self._rows.append((step, "probe", PROBE_NAMES, self.probes.summaries()))
            self.profiled_steps += 1
            if self._law(step):
                n = self.cfg.law_sequences
                advantage = self.probes.advantages()
                upstream = self.probes.upstream()[:, :, :n]
                params0 = [p.detach().clone() for p in trainer.params]
                control = (self._label_control(trainer, tokens[:, :n], None if header is None else header[:, :n])
                           if self.relevance else None)
                heldout = self._heldout_push(trainer) if self.heldout_sets is not None else None
                self._pending = _PendingLaw(step, advantage, upstream, params0, control, heldout)
        self.probes.detach()
        self.hook_s += time.perf_counter() - t0

    def after_update(self, trainer, tokens: Tensor, header: Tensor | None) -> None:
        t0 = time.perf_counter()
        step = trainer.step
        if self._pending is not None and self._pending.step == step:
            self._check_law(trainer, self._pending, tokens, header)
        done = step + 1
        if done in self.cfg.checkpoints:
            self.checkpoint(done)
            end = self.cfg.replica_from(done)
            if end is not None:
                self._replicate(done, end)
        if done % self.cfg.flush_every == 0:
            self.flush()
        self.hook_s += time.perf_counter() - t0

    # -- the pieces
    def _check_law(self, trainer, pending: _PendingLaw, tokens: Tensor, header: Tensor | None) -> None:
        model = trainer.model
        n = self.cfg.law_sequences
        tokens = tokens[:, :n]
        header = None if header is None else header[:, :n]
        advantage = pending.advantage[:, :, :n]
        delta = [p.detach() - p0 for p, p0 in zip(trainer.params, pending.params0)]
        s0, predicted = predicted_change(model, pending.params0, delta, tokens, header)
        own = torch.empty_like(predicted)
        for li, layer in enumerate(self.layers):  # the JVP along each layer's own W_Q / W_K rows
            own[li] = predicted_change(model, pending.params0, own_qk_tangent(model, delta, layer), tokens,
                                       header)[1][li]
        was_training = model.training
        model.eval()
        with torch.no_grad():
            s1 = transformer_scores(model, tokens, header)
        model.train(was_training)
        alpha = masked_softmax(s0)
        advantage = advantage.to(s0.dtype)
        step = pending.step
        lr = trainer.cfg.lr_at(step)
        stats = law_statistics(s1 - s0, predicted, own, advantage, alpha, lr)  # [names, L, E, H]
        self._rows.append((step, "law", LAW_NAMES, stats.transpose(1, 2)))
        with torch.no_grad():
            v1 = transformer_values(model, tokens, header)
        v0 = values_at(model, pending.params0, tokens, header)
        value = value_statistics(v1 - v0, alpha, pending.upstream, lr)
        self._rows.append((step, "value", VALUE_NAMES, value.transpose(1, 2)))
        if pending.heldout is not None:
            self._check_heldout(trainer, pending, lr)
        if pending.control is not None:  # self.relevance
            rel = relevance_statistics(advantage, alpha, relevant_keys(trainer.task, tokens))
            self._rows.append((step, "relevance", RELEVANCE_NAMES, rel.transpose(1, 2)))
            ctrl = paired_statistics(advantage, pending.control.to(alpha.dtype), alpha, trainer.task, tokens)
            self._rows.append((step, "control", CONTROL_NAMES, ctrl.transpose(1, 2)))
        self.law_steps += 1
        self._pending = None

    def _heldout_inputs(self, model) -> tuple[Tensor, Tensor | None, Tensor, Tensor]:
        """(tokens, header, targets, mask) of the held-out law batch, one per member."""
        assert self.heldout_sets is not None
        n = self.cfg.heldout_sequences
        s = stack_sets(self.heldout_sets, next(model.parameters()).device)
        return s.tokens[:, :n], None if s.header is None else s.header[:, :n], s.targets[:, :n], s.mask[:, :n]

    def _heldout_push(self, trainer) -> tuple[Tensor, Tensor]:
        """([L, E, n, H, T, T] advantage, [L, E, n, H, T, Dh] upstream u) of the held-out sequences at
        the step's parameters: a forward and backward of their loss whose gradients are returned,
        never accumulated (the optimiser's step reads .grad next)."""
        from ...training.numerics import member_losses

        tokens, header, targets, mask = self._heldout_inputs(trainer.model)
        self.probes.attach("full")
        try:
            loss = member_losses(trainer.model(tokens, header), targets, mask)
            torch.autograd.grad(loss.sum(), [p for p in trainer.params if p.requires_grad])
            return self.probes.advantages(), self.probes.upstream()
        finally:
            self.probes.detach()

    def _check_heldout(self, trainer, pending: _PendingLaw, lr: float) -> None:
        """The routing and value laws on the held-out sequences: their change over the step, the
        first-order prediction and the shuffle null (law.HELDOUT_LAW and law.VALUE_NAMES); no own-W_Q/W_K split."""
        assert pending.heldout is not None
        model = trainer.model
        tokens, header, _, _ = self._heldout_inputs(model)
        advantage, upstream = pending.heldout
        delta = [p.detach() - p0 for p, p0 in zip(trainer.params, pending.params0)]
        s0, predicted = predicted_change(model, pending.params0, delta, tokens, header)
        was_training = model.training
        model.eval()
        with torch.no_grad():
            s1 = transformer_scores(model, tokens, header)
            v1 = transformer_values(model, tokens, header)
        model.train(was_training)
        alpha = masked_softmax(s0)
        stats = law_statistics(s1 - s0, predicted, predicted, advantage.to(s0.dtype), alpha, lr)
        keep = [LAW_NAMES.index(n) for n in HELDOUT_LAW]
        self._rows.append((pending.step, "heldout", tuple(f"heldout_{n}" for n in HELDOUT_LAW),
                           stats[keep].transpose(1, 2)))
        v0 = values_at(model, pending.params0, tokens, header)
        value = value_statistics(v1 - v0, alpha, upstream, lr)
        self._rows.append((pending.step, "heldout", tuple(f"heldout_{n}" for n in VALUE_NAMES),
                           value.transpose(1, 2)))

    def _label_control(self, trainer, tokens: Tensor, header: Tensor | None) -> Tensor:
        """[L, E, B, H, T, T] the advantage of the law sequences against permuted targets
        (relevance.py): a second forward and backward at the step's parameters, its gradients
        returned, never accumulated (the optimiser's step reads .grad next)."""
        from ...training.numerics import member_losses

        targets = label_targets(trainer.task, tokens, permute=True)
        self.probes.attach("full")
        try:
            logits = trainer.model(tokens, header)
            loss = member_losses(logits, targets.clamp(min=0), targets >= 0)
            torch.autograd.grad(loss.sum(), [p for p in trainer.params if p.requires_grad])
            return self.probes.advantages()
        finally:
            self.probes.detach()

    def _measure(self) -> tuple[Tensor, Tensor, Tensor]:
        """(maps of the probe batch [L, E, B, H, T, T] in float16, calibration [2, E] on the host:
        entropy MAE and KL in bits on the evaluation set, predictive distributions [E, N, C] of
        the probe batch at its N scored positions) of the model as it stands."""
        model = self.trainer.model
        was_training = model.training
        model.eval()
        tokens, header = _inputs(self.probe_sets, next(model.parameters()).device)
        maps = attention_maps(model, tokens, header).half()
        if self.continuous:  # no distribution over classes (CONTINUOUS_NOTE): an empty stand-in, never recorded
            preds = torch.zeros((model.ensemble, 0), device=maps.device)
            task = self.trainer.task
            if is_shared(self.eval_sets):
                scores = evaluate_members(model, self.eval_sets[0], task)
                cal = torch.tensor([[s.entropy_mae.mean for s in scores], [s.kl.mean for s in scores]])
            else:  # each member on its own set
                cal = calibration(model, self.eval_sets, task=task)
        else:
            with torch.no_grad():
                probs = torch.softmax(model(tokens, header).float(), -1)  # [E, B, T, C]
            if is_shared(self.probe_sets):
                preds = probs[:, self.probe_sets[0].mask.to(probs.device)]
            else:  # each member's own scored positions
                preds = scored_rows(probs, torch.stack([b.mask for b in self.probe_sets]))
            if is_shared(self.eval_sets):  # as before per-seed sets, to the bit
                scores = evaluate_members(model, self.eval_sets[0])
                cal = torch.tensor([[s.entropy_mae.mean for s in scores], [s.kl.mean for s in scores]])
            else:
                cal = calibration(model, self.eval_sets)
        model.train(was_training)
        return maps, cal, preds

    def checkpoint(self, step: int) -> None:
        """Maps of the probe batch and calibration on the evaluation set at `step` steps done
        (and the entropy MAE with each head zeroed, with `head_ablation`); the jitter of the
        replicas that ran to this step."""
        self.maps[step], self.calibration[step], self.preds[step] = self._measure()
        if self.cfg.head_ablation:
            model = self.trainer.model
            was_training = model.training
            model.eval()
            self.ablation[step] = self._head_ablation(model)
            model.train(was_training)
        preds = self.replica_preds.get(step)
        if preds is not None and not self.continuous:
            self.pred_jitter[step] = pairwise_sq(torch.cat([self.preds[step].unsqueeze(0).cpu(), preds])).cpu()
        reps = self.replica_maps.get(step)
        if reps is not None:  # all continuations from one state: the run's own and the replicas
            both = torch.cat([self.maps[step].unsqueeze(0), reps.to(self.maps[step].device)]).float()
            # [L, E, B, H] -> [L, E, H]: the mean over the probe sequences (dim 2), per head
            self.jitter[step] = (pairwise_sq(both).mean(2).cpu(), pairwise_tv(both).mean(2).cpu())

    def _replicate(self, start: int, end: int) -> None:
        """R continuations of the state at checkpoint `start` to checkpoint `end` (with
        `replica_to_end`, on through the late window: `ProfileConfig.replica_stops`) with other
        data orders (module docstring); the state is restored afterwards, bit for bit."""
        from ...training.numerics import member_losses
        from ...training.stream import MemberStream, stack_members

        t0, c0 = time.perf_counter(), time.process_time()
        trainer, model = self.trainer, self.trainer.model
        opt = trainer.optimizer
        saved_param = opt.param.clone()
        saved_state = {k: v.clone() if isinstance(v, Tensor) else v for k, v in opt.state_dict().items()}
        was_training = model.training
        alive = torch.tensor(trainer.alive, device=saved_param.device)
        stops = self.cfg.replica_stops(start)
        measured: dict[int, list[tuple[Tensor, Tensor, Tensor]]] = {c: [] for c in stops}
        try:
            for r in range(self.cfg.replicas):
                streams = []
                for seed in trainer.seeds:
                    stream = MemberStream(trainer.task, seed, trainer.cfg.batch_size, trainer.cfg.prefetch,
                                          trainer.device)
                    stream.generator.manual_seed(replica_data_seed(seed, start, r))
                    streams.append(stream)
                model.train()
                for step in range(start, stops[-1]):
                    tokens, header, targets, mask = stack_members([s.next() for s in streams])
                    loss = member_losses(model(tokens, header), targets, mask)
                    opt.zero_grad()
                    loss.sum().backward()
                    opt.step(trainer.cfg.lr_at(step), alive, loss)
                    self.replica_steps += 1
                    if step + 1 in measured:
                        m, c, p = self._measure()
                        measured[step + 1].append((m.cpu(), c, p.cpu()))
                        model.train()
                opt.param.copy_(saved_param)
                opt.load_state_dict(saved_state)
        finally:
            opt.param.copy_(saved_param)
            opt.load_state_dict(saved_state)
            opt.zero_grad()
            model.train(was_training)
        for stop, got in measured.items():
            maps, cal, preds = (torch.stack([g[i] for g in got]) for i in range(3))
            if stop == end:  # the one-interval jitter at the next checkpoint, as without replica_to_end
                self.replica_maps[end], self.replica_calibration[end], self.replica_preds[end] = maps, cal, preds
            if self.cfg.replica_to_end:
                self.replica_path[(start, stop)] = (maps, cal, preds)
        self.replica_s += time.perf_counter() - t0
        self.replica_cpu_s += time.process_time() - c0

    def _head_ablation(self, model) -> Tensor:
        """[L, H, E] entropy MAE (bits) of each member with one head's output zeroed."""
        from ..geometry.measure import entropy_mae, instrumented_forward

        device = next(model.parameters()).device
        s = stack_sets(self.eval_sets, device)
        tokens, header = s.tokens, s.header
        post, mask = ((self.eval_sets[0].posterior.to(device), self.eval_sets[0].mask.to(device))
                      if is_shared(self.eval_sets) else (s.posterior, s.mask))
        H = model.blocks[self.layers[0]].attn.n_head
        return torch.stack([torch.stack([
            entropy_mae(instrumented_forward(model, tokens, header, zero_heads=((layer, h),), keep=False).logits,
                        post, mask) for h in range(H)]) for layer in self.layers])

    def start(self) -> None:
        """Take the checkpoint of the current step if it is one (0 for a fresh run)."""
        step = self.trainer.step
        if step in self.cfg.checkpoints and step not in self.maps:
            self.checkpoint(step)
            end = self.cfg.replica_from(step)
            if end is not None:
                self._replicate(step, end)

    def flush(self) -> int:
        """Copy the buffered device tensors to the host in one transfer and write them as one batch."""
        if not self._rows:
            return 0
        host = torch.cat([r[3].reshape(-1).float() for r in self._rows]).cpu().tolist()
        seeds = self.trainer.seeds
        records, i = [], 0
        for step, _kind, names, t in self._rows:
            n, E, L, H = t.shape
            for a in range(n):
                for e in range(E):
                    for li in range(L):
                        for h in range(H):
                            records.append((seeds[e], step, self.layers[li], h, names[a], host[i]))
                            i += 1
        self._rows = []
        written = write_dynamics(self.study_id, records, self.db)
        self.records_written += written
        return written

    def finish(self) -> None:
        """Flush, detach every probe, and write the checkpoint quantities."""
        self.probes.detach()
        self.flush()
        seeds, records = self.trainer.seeds, []
        for step, cal in sorted(self.calibration.items()):
            for e, seed in enumerate(seeds):
                records.append((seed, step, -1, -1, "entropy_mae", float(cal[0, e])))
                records.append((seed, step, -1, -1, "kl", float(cal[1, e])))
        for step, cal in sorted(self.replica_calibration.items()):
            for r in range(cal.shape[0]):
                for e, seed in enumerate(seeds):
                    records.append((seed, step, -1, r, "entropy_mae_replica", float(cal[r, 0, e])))
                    records.append((seed, step, -1, r, "kl_replica", float(cal[r, 1, e])))
        for step, (sq, tv) in sorted(self.jitter.items()):  # [L, E, H]
            for name, jit in (("map_jitter_sq", sq), ("map_jitter", tv)):
                for li, layer in enumerate(self.layers):
                    for e, seed in enumerate(seeds):
                        for h in range(jit.shape[2]):
                            records.append((seed, step, layer, h, name, float(jit[li, e, h])))
                        records.append((seed, step, layer, -1, name, float(jit[li, e].mean())))
        for step, maps in sorted(self.maps.items()):
            ent = map_entropy(maps.float()).cpu()  # [L, E, H]
            for li, layer in enumerate(self.layers):
                for e, seed in enumerate(seeds):
                    for h in range(ent.shape[2]):
                        records.append((seed, step, layer, h, "map_entropy", float(ent[li, e, h])))
        for step, abl in sorted(self.ablation.items()):
            for li, layer in enumerate(self.layers):
                for h in range(abl.shape[1]):
                    records += [(seed, step, layer, h, "entropy_mae_head_zeroed", float(abl[li, h, e]))
                                for e, seed in enumerate(seeds)]
        records += self._one_scale_records()
        drift = self.map_drift()
        if drift is not None:
            steps, d, late, v, late_sq, step_sq = drift  # [C, L, E, H] or [C - 1, L, E, H] on the host
            for name, values, at in (("map_drift", d, steps), ("map_drift_late", late, steps),
                                     ("map_velocity", v, steps[1:]), ("map_drift_sq", late_sq, steps),
                                     ("map_step_sq", step_sq, steps[1:])):
                for c, step in enumerate(at):
                    for li, layer in enumerate(self.layers):
                        for e, seed in enumerate(seeds):
                            for h in range(values.shape[3]):
                                records.append((seed, step, layer, h, name, float(values[c, li, e, h])))
                            records.append((seed, step, layer, -1, name, float(values[c, li, e].mean())))
        self.records_written += write_dynamics(self.study_id, records, self.db)

    def _late_steps(self) -> list[int]:
        k = min(self.cfg.late_maps, len(self.maps) - 1)
        return sorted(self.maps)[-k:] if k >= 1 else []

    def _path(self, start: int, stop: int, which: int) -> Tensor:
        """Continuation quantity `which` (0 maps, 1 calibration, 2 predictive distributions) of the
        replicas from `start` at checkpoint `stop`: the run's own where `stop` is not after `start`
        (the continuations share that past)."""
        if stop <= start:
            own = (self.maps, self.calibration, self.preds)[which][stop].cpu()
            return own.unsqueeze(0).expand(self.cfg.replicas, *own.shape)
        return self.replica_path[(start, stop)][which]

    def drift_floors(self) -> dict[int, tuple[Tensor, Tensor, Tensor]]:
        """checkpoint c -> (maps' floor [L, E, H], predictive distributions' floor [E], calibration's
        floor [2, E]): `frames.drift_floor_sq` from the replicas that ran from the checkpoint before
        c through the late window (`replica_to_end`)."""
        from .frames import drift_floor_sq

        late = self._late_steps()
        out: dict[int, tuple[Tensor, Tensor, Tensor]] = {}
        if not late:
            return out
        for (start, stop) in sorted(self.replica_path):
            if stop != self.cfg.replica_from(start) or any(
                    s > start and (start, s) not in self.replica_path for s in late):
                continue
            res = []
            for which, own_all in enumerate((self.maps, self.calibration, self.preds)):
                if which == 2 and self.continuous:  # CONTINUOUS_NOTE: no predictive floor
                    res.append(torch.full((len(self.trainer.seeds),), math.nan))
                    continue
                own = own_all[stop].cpu().float()
                own_late = torch.stack([own_all[s].cpu().float() for s in late]).mean(0)
                reps = self._path(start, stop, which).float()
                reps_late = torch.stack([self._path(start, s, which).float() for s in late]).mean(0)
                if which == 1:  # scalars per member: a trailing axis of one, one "row"
                    own, own_late, reps, reps_late = (x.unsqueeze(-1).unsqueeze(-1) for x in
                                                      (own, own_late, reps, reps_late))
                res.append(drift_floor_sq(own, own_late, reps, reps_late))
            out[stop] = (res[0].mean(2), res[2], res[1])  # maps: [L, E, B, H] -> [L, E, H]
        return out

    def _one_scale_records(self) -> list[tuple[int, int, int, int, str, float]]:
        """The predictive distributions' drift, step and jitter (as the maps') and the floors from
        the replicas through the late window (module docstring)."""
        from .frames import sq_consecutive, sq_to_late

        seeds, records = self.trainer.seeds, []
        late = self._late_steps()
        if late and not self.continuous:
            steps = sorted(self.preds)
            preds = torch.stack([self.preds[s].cpu() for s in steps])  # [C, E, N, C]
            drift, moved = sq_to_late(preds, len(late)), sq_consecutive(preds)
            for c, step in enumerate(steps):
                for e, seed in enumerate(seeds):
                    records.append((seed, step, -1, -1, "pred_drift_sq", float(drift[c, e])))
                    if c:
                        records.append((seed, step, -1, -1, "pred_step_sq", float(moved[c - 1, e])))
        for step, jit in sorted(self.pred_jitter.items()):
            records += [(seed, step, -1, -1, "pred_jitter_sq", float(jit[e])) for e, seed in enumerate(seeds)]
        for step, (maps, preds, cal) in sorted(self.drift_floors().items()):
            for e, seed in enumerate(seeds):
                if not self.continuous:
                    records.append((seed, step, -1, -1, "pred_floor_sq", float(preds[e])))
                records.append((seed, step, -1, -1, "entropy_mae_floor_sq", float(cal[0, e])))
                records.append((seed, step, -1, -1, "kl_floor_sq", float(cal[1, e])))
                for li, layer in enumerate(self.layers):
                    records += [(seed, step, layer, h, "map_floor_sq", float(maps[li, e, h]))
                                for h in range(maps.shape[2])]
                    records.append((seed, step, layer, -1, "map_floor_sq", float(maps[li, e].mean())))
        return records

    def map_drift(self) -> tuple[list[int], Tensor, Tensor, Tensor, Tensor, Tensor] | None:
        """(checkpoint steps, drift [C, L, E, H] to the final maps, drift [C, L, E, H] to the mean
        of the last `late_maps` checkpoints' maps, velocity [C - 1, L, E, H], and the squared
        distances to the late mean [C, L, E, H] and between consecutive checkpoints [C - 1, L, E, H]):
        mean TV distances of each head's rows over the probe batch's sequences and queries (the
        velocity: to the previous checkpoint's maps, per step between them)."""
        if len(self.maps) < 2:
            return None
        from .frames import sq_consecutive, sq_to_late, tv_consecutive, tv_to_final, tv_to_late

        steps = sorted(self.maps)
        maps = torch.stack([self.maps[s].float() for s in steps])  # [C, L, E, B, H, T, T]
        gaps = torch.tensor([b - a for a, b in zip(steps, steps[1:])], dtype=torch.float32, device=maps.device)
        velocity = tv_consecutive(maps).mean(3) / gaps.view(-1, 1, 1, 1)
        k = min(self.cfg.late_maps, len(steps) - 1)
        return (steps, tv_to_final(maps).mean(3).cpu(), tv_to_late(maps, k).mean(3).cpu(), velocity.cpu(),
                sq_to_late(maps, k).mean(3).cpu(), sq_consecutive(maps).mean(3).cpu())
