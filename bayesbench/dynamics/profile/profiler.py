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
from .law import LAW_NAMES, law_statistics, own_qk_tangent
from .probes import PROBE_NAMES, ProbeSet
from .relevance import RELEVANCE_NAMES, applies, relevance_statistics, relevant_keys
from .routing import attention_maps, masked_softmax, predicted_change, transformer_scores


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

    def __post_init__(self) -> None:
        for name in ("every", "flush_every", "law_sequences"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if isinstance(self.law_every, bool) or not isinstance(self.law_every, int) or self.law_every < 0:
            raise ValueError(f"law_every must be an integer >= 0, got {self.law_every!r}")


def _expand(batch: Batch, ensemble: int, device) -> tuple[Tensor, Tensor | None]:
    tokens = batch.tokens.to(device)
    tokens = tokens.unsqueeze(0).expand(ensemble, *tokens.shape)
    header = None
    if batch.header is not None:
        header = batch.header.to(device)
        header = header.unsqueeze(0).expand(ensemble, *header.shape)
    return tokens, header


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
        self._law_step: int | None = None
        self._advantage: Tensor | None = None
        self._params0: list[Tensor] | None = None
        self.maps: dict[int, Tensor] = {}  # checkpoint step -> [L, E, B, H, T, T] (device)
        self.calibration: dict[int, Tensor] = {}  # checkpoint step -> [2, E] (entropy MAE, KL; host)
        self.ablation: dict[int, Tensor] = {}  # checkpoint step -> [L, H, E] entropy MAE, head zeroed (host)
        self.relevance = applies(trainer.task)  # the bijection with repeated keys: relevant-key ranks
        self.profiled_steps = 0
        self.law_steps = 0
        self.records_written = 0
        self.hook_s = 0.0  # wall time inside the hooks (probe reductions, law checks, checkpoints)

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
                self._advantage = self.probes.advantages()
                self._params0 = [p.detach().clone() for p in trainer.params]
                self._law_step = step
        self.probes.detach()
        self.hook_s += time.perf_counter() - t0

    def after_update(self, trainer, tokens: Tensor, header: Tensor | None) -> None:
        t0 = time.perf_counter()
        step = trainer.step
        if self._law_step == step:
            self._check_law(trainer, tokens, header)
        done = step + 1
        if done in self.cfg.checkpoints:
            self.checkpoint(done)
        if done % self.cfg.flush_every == 0:
            self.flush()
        self.hook_s += time.perf_counter() - t0

    # -- the pieces
    def _check_law(self, trainer, tokens: Tensor, header: Tensor | None) -> None:
        model = trainer.model
        n = self.cfg.law_sequences
        tokens = tokens[:, :n]
        header = None if header is None else header[:, :n]
        advantage = self._advantage[:, :, :n]
        delta = [p.detach() - p0 for p, p0 in zip(trainer.params, self._params0)]
        s0, predicted = predicted_change(model, self._params0, delta, tokens, header)
        own = torch.empty_like(predicted)
        for li, layer in enumerate(self.layers):  # the JVP along each layer's own W_Q / W_K rows
            own[li] = predicted_change(model, self._params0, own_qk_tangent(model, delta, layer), tokens, header)[1][li]
        was_training = model.training
        model.eval()
        with torch.no_grad():
            s1 = transformer_scores(model, tokens, header)
        model.train(was_training)
        alpha = masked_softmax(s0)
        advantage = advantage.to(s0.dtype)
        lr = trainer.cfg.lr_at(self._law_step)
        stats = law_statistics(s1 - s0, predicted, own, advantage, alpha, lr)  # [names, L, E, H]
        self._rows.append((self._law_step, "law", LAW_NAMES, stats.transpose(1, 2)))
        if self.relevance:
            rel = relevance_statistics(advantage, alpha, relevant_keys(trainer.task, tokens))
            self._rows.append((self._law_step, "relevance", RELEVANCE_NAMES, rel.transpose(1, 2)))
        self.law_steps += 1
        self._law_step, self._advantage, self._params0 = None, None, None

    def checkpoint(self, step: int) -> None:
        """Maps of the probe batch and calibration on the evaluation set at `step` steps done
        (and the entropy MAE with each head zeroed, with `head_ablation`)."""
        model = self.trainer.model
        was_training = model.training
        model.eval()
        tokens, header = _expand(self.probe_batch, model.ensemble, next(model.parameters()).device)
        self.maps[step] = attention_maps(model, tokens, header).half()
        scores = evaluate_members(model, self.eval_batch)
        if self.cfg.head_ablation:
            self.ablation[step] = self._head_ablation(model)
        model.train(was_training)
        self.calibration[step] = torch.tensor([[s.entropy_mae.mean for s in scores], [s.kl.mean for s in scores]])

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
        if self.trainer.step in self.cfg.checkpoints and self.trainer.step not in self.maps:
            self.checkpoint(self.trainer.step)

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
        for step, abl in sorted(self.ablation.items()):
            for li, layer in enumerate(self.layers):
                for h in range(abl.shape[1]):
                    records += [(seed, step, layer, h, "entropy_mae_head_zeroed", float(abl[li, h, e]))
                                for e, seed in enumerate(seeds)]
        drift = self.map_drift()
        if drift is not None:
            steps, d, v = drift  # d: [C, L, E, H], v: [C - 1, L, E, H] on the host
            for name, values, at in (("map_drift", d, steps), ("map_velocity", v, steps[1:])):
                for c, step in enumerate(at):
                    for li, layer in enumerate(self.layers):
                        for e, seed in enumerate(seeds):
                            for h in range(values.shape[3]):
                                records.append((seed, step, layer, h, name, float(values[c, li, e, h])))
                            records.append((seed, step, layer, -1, name, float(values[c, li, e].mean())))
        self.records_written += write_dynamics(self.study_id, records, self.db)

    def map_drift(self) -> tuple[list[int], Tensor, Tensor] | None:
        """(checkpoint steps, drift [C, L, E, H], velocity [C - 1, L, E, H]): mean TV distance of
        each head's rows to the final checkpoint's, and to the previous checkpoint's per step
        between them, over the probe batch's sequences and queries."""
        if len(self.maps) < 2:
            return None
        from .frames import tv_consecutive, tv_to_final

        steps = sorted(self.maps)
        maps = torch.stack([self.maps[s].float() for s in steps])  # [C, L, E, B, H, T, T]
        gaps = torch.tensor([b - a for a, b in zip(steps, steps[1:])], dtype=torch.float32, device=maps.device)
        velocity = tv_consecutive(maps).mean(3) / gaps.view(-1, 1, 1, 1)
        return steps, tv_to_final(maps).mean(3).cpu(), velocity.cpu()
