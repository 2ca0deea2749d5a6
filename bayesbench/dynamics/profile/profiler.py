"""The profiler: a Trainer hook that records the routing quantities of every member while it learns.

Every `every`-th step (0, every, 2*every, ...) the attention layers switch to the probe backend
("eager" or "reference" on CPU, "triton" on a GPU) with a probe on each layer; the backward fills
them and `ProbeSet.summaries` reduces them to one number per (member, layer, head) on the
device. Every `law_every`-th profiled step the probe keeps the T x T advantage and, after the
optimiser step, the routing-law statistics are computed (routing.py) on the first
`law_sequences` sequences of that step's batch (law.py; relevance.py on the bijection with
repeated keys). At the checkpoint steps the attention maps of a fixed probe batch and the entropy
MAE / KL of a fixed evaluation set are taken (frames.py), and with `head_ablation` the entropy MAE
with each head zeroed. Everything stays on the device until a flush (every `flush_every` steps
and at the end), which copies it to the host once and writes one batch to the store.

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

Record conventions (table `dynamics`): probe and law quantities carry the 0-based index of the
step whose gradient was probed; checkpoint quantities (entropy_mae, kl, map_drift) carry the
number of steps done (0 = initialisation); `map_velocity` at checkpoint c is the TV distance
from the previous checkpoint's maps per step between them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import Tensor

from ...scoring.evaluate import evaluate_members
from ...tasks import Batch
from ..store import write_dynamics
from .frames import map_entropy, pairwise_sq, pairwise_tv
from .law import LAW_NAMES, VALUE_NAMES, law_statistics, own_qk_tangent, value_statistics
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

    def __post_init__(self) -> None:
        for name in ("every", "flush_every", "law_sequences", "replica_every", "late_maps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        for name in ("law_every", "replicas"):
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


def _expand(batch: Batch, ensemble: int, device) -> tuple[Tensor, Tensor | None]:
    tokens = batch.tokens.to(device)
    tokens = tokens.unsqueeze(0).expand(ensemble, *tokens.shape)
    header = None
    if batch.header is not None:
        header = batch.header.to(device)
        header = header.unsqueeze(0).expand(ensemble, *header.shape)
    return tokens, header


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


class Profiler:
    """Attach to a Trainer (`trainer.hooks.append(profiler)`), call `start()` before `fit` and
    `finish()` after it."""

    def __init__(self, trainer, study_id: str, cfg: ProfileConfig, *, probe_batch: Batch, eval_batch: Batch,
                 db: str | None = None) -> None:
        self.trainer, self.study_id, self.cfg, self.db = trainer, study_id, cfg, db
        self.probes = ProbeSet(trainer.model, cfg.backend)
        self.layers = self.probes.layers
        self.probe_batch, self.eval_batch = probe_batch, eval_batch
        self._rows: list[tuple[int, str, tuple[str, ...], Tensor]] = []  # (step, kind, names, [n, E, L, H])
        self._pending: _PendingLaw | None = None  # set before a law step's update, checked after it
        self.maps: dict[int, Tensor] = {}  # checkpoint step -> [L, E, B, H, T, T] (device)
        self.calibration: dict[int, Tensor] = {}  # checkpoint step -> [2, E] (entropy MAE, KL; host)
        self.ablation: dict[int, Tensor] = {}  # checkpoint step -> [L, H, E] entropy MAE, head zeroed (host)
        # replicas: checkpoint step -> their maps [R, L, E, B, H, T, T] (float16, kept for the record)
        # and calibration [R, 2, E]; the jitter among them and the run's own map, [L, E, H] per step:
        # mean pairwise squared distance and TV
        self.replica_maps: dict[int, Tensor] = {}
        self.replica_calibration: dict[int, Tensor] = {}
        self.jitter: dict[int, tuple[Tensor, Tensor]] = {}
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
                self._pending = _PendingLaw(step, advantage, upstream, params0, control)
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
        if pending.control is not None:  # self.relevance
            rel = relevance_statistics(advantage, alpha, relevant_keys(trainer.task, tokens))
            self._rows.append((step, "relevance", RELEVANCE_NAMES, rel.transpose(1, 2)))
            ctrl = paired_statistics(advantage, pending.control.to(alpha.dtype), alpha, trainer.task, tokens)
            self._rows.append((step, "control", CONTROL_NAMES, ctrl.transpose(1, 2)))
        self.law_steps += 1
        self._pending = None

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

    def _measure(self) -> tuple[Tensor, Tensor]:
        """(maps of the probe batch [L, E, B, H, T, T] in float16, calibration [2, E] on the host:
        entropy MAE and KL in bits on the evaluation set) of the model as it stands."""
        model = self.trainer.model
        was_training = model.training
        model.eval()
        tokens, header = _expand(self.probe_batch, model.ensemble, next(model.parameters()).device)
        maps = attention_maps(model, tokens, header).half()
        scores = evaluate_members(model, self.eval_batch)
        model.train(was_training)
        return maps, torch.tensor([[s.entropy_mae.mean for s in scores], [s.kl.mean for s in scores]])

    def checkpoint(self, step: int) -> None:
        """Maps of the probe batch and calibration on the evaluation set at `step` steps done
        (and the entropy MAE with each head zeroed, with `head_ablation`); the jitter of the
        replicas that ran to this step."""
        self.maps[step], self.calibration[step] = self._measure()
        if self.cfg.head_ablation:
            model = self.trainer.model
            was_training = model.training
            model.eval()
            self.ablation[step] = self._head_ablation(model)
            model.train(was_training)
        reps = self.replica_maps.get(step)
        if reps is not None:  # all continuations from one state: the run's own and the replicas
            both = torch.cat([self.maps[step].unsqueeze(0), reps.to(self.maps[step].device)]).float()
            self.jitter[step] = (pairwise_sq(both).mean(3).cpu(), pairwise_tv(both).mean(3).cpu())

    def _replicate(self, start: int, end: int) -> None:
        """R continuations of the state at checkpoint `start` to checkpoint `end` with other data
        orders (module docstring); the state is restored afterwards, bit for bit."""
        from ...training.numerics import member_losses
        from ...training.stream import MemberStream, stack_members

        t0, c0 = time.perf_counter(), time.process_time()
        trainer, model = self.trainer, self.trainer.model
        opt = trainer.optimizer
        saved_param = opt.param.clone()
        saved_state = {k: v.clone() if isinstance(v, Tensor) else v for k, v in opt.state_dict().items()}
        was_training = model.training
        alive = torch.tensor(trainer.alive, device=saved_param.device)
        maps, cal = [], []
        try:
            for r in range(self.cfg.replicas):
                streams = []
                for seed in trainer.seeds:
                    stream = MemberStream(trainer.task, seed, trainer.cfg.batch_size, trainer.cfg.prefetch,
                                          trainer.device)
                    stream.generator.manual_seed(replica_data_seed(seed, start, r))
                    streams.append(stream)
                model.train()
                for step in range(start, end):
                    tokens, header, targets, mask = stack_members([s.next() for s in streams])
                    loss = member_losses(model(tokens, header), targets, mask)
                    opt.zero_grad()
                    loss.sum().backward()
                    opt.step(trainer.cfg.lr_at(step), alive, loss)
                    self.replica_steps += 1
                m, c = self._measure()
                maps.append(m)
                cal.append(c)
                opt.param.copy_(saved_param)
                opt.load_state_dict(saved_state)
        finally:
            opt.param.copy_(saved_param)
            opt.load_state_dict(saved_state)
            opt.zero_grad()
            model.train(was_training)
        self.replica_maps[end] = torch.stack(maps).cpu()
        self.replica_calibration[end] = torch.stack(cal)
        self.replica_s += time.perf_counter() - t0
        self.replica_cpu_s += time.process_time() - c0

    def _head_ablation(self, model) -> Tensor:
        """[L, H, E] entropy MAE (bits) of each member with one head's output zeroed."""
        from ..geometry.measure import entropy_mae, instrumented_forward

        device = next(model.parameters()).device
        tokens, header = _expand(self.eval_batch, model.ensemble, device)
        post, mask = self.eval_batch.posterior.to(device), self.eval_batch.mask.to(device)
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
