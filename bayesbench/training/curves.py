"""Learning curves: every member scored against the exact posterior while it trains.

The trainer evaluates the whole ensemble on one fixed *curve set* at a schedule of steps
(`curve_steps`) and keeps, per point, every metric of the metric table (`bayesbench.metric_table`;
docs/science.md#metrics) in bits, for every member. A metric the curve set has no positions for
(a task it does not apply to; a case of `Task.case_masks` the task does not have, such as the
bijection's repeated keys) scores NaN, its uniform value too, and the curve does not keep it.
On a continuous tunnel (issue 41) each metric's `continuous` function scores the model's
predictive density, and the curve's "uniform" floor is the tunnel's prior predictive.

These are the same numbers `scoring.metrics.score` gives (its means; no intervals), computed
here on the training device for all members at once and without any read back to the host:
the values stay on the device until the trainer's next sync, with the losses.

The curve set: `DEFAULT_CURVE_SEQUENCES` sequences of the evaluated task, drawn like the
evaluation sets of `scoring.evaluate` (a seed fixed by the task's configuration, above every
training-data seed: `seeds.eval_seed(task, "curve")`), so every architecture and seed sees the
same sequences. The curve is a read-only observation: the model is evaluated in eval mode under
no_grad, in exact float32 (no TF32, no autocast), and nothing here draws from a random stream
that training uses (the set has its own generator; eval mode draws no dropout).

Adding a metric is one entry of the metric table (`bayesbench.metric_table`): the curve set computes it
from the entry's function (`curve_value`), the trainer records it, the checkpoint and the store
keep it (another `metric` value of the `learning_curves` table; a checkpoint without it reads it
as NaN), the statistics of `report.curve_stats` take any metric name, and the command line's
`--until-metric`, `--curve-metric` and `--metric` offer it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch
from torch import Tensor

from ..metric_table import METRICS, Metric, curve_cases, curve_metrics
from ..models.heads import CATEGORICAL, is_continuous, read_outputs
from ..oracle.gaussian_bits import ContinuousValues
from ..tasks import Batch, Task
from ..tasks.bijection import SCORED_SETS
from .config import DEFAULT_CURVE_SEQUENCES
from .seeds import eval_seed

CURVE_PER_DECADE = 8  # log-spaced default cadence: 8 points per factor of 10 in steps
LOG2 = math.log(2.0)
# (task, n, seed) for curve sets, (task, n, seed, "selection", eval_n) for selection sets
_sets: dict[tuple[str, int, int] | tuple[str, int, int, str, int], Batch] = {}


def curve_steps(steps: int, every: int = 0) -> list[int]:
    """The steps after which the curve is measured, ascending, always ending with `steps`.

    every = 0 (default): log-spaced, the distinct values of round(10^(k/8)) up to `steps` (8 per
    decade: 24 points over 1000 steps, 28 over 2000, 41 over 100,000); every = k: k, 2k, ..."""
    if every:
        points = set(range(every, steps + 1, every))
    else:
        top = int(math.ceil(math.log10(max(steps, 1)) * CURVE_PER_DECADE))
        points = {int(round(10 ** (k / CURVE_PER_DECADE))) for k in range(top + 1)}
    return sorted({p for p in points if 1 <= p <= steps} | {steps})


def curve_batch(task: Task, n: int = DEFAULT_CURVE_SEQUENCES) -> Batch:
    """The task's curve set: n sequences (CPU) from the seed `eval_seed(task, "curve")`, cached."""
    seed = eval_seed(task, "curve")
    key = (task.describe(), n, seed)
    if key not in _sets:
        _sets[key] = task.sample(n, torch.Generator().manual_seed(seed))
    return _sets[key]


#: How many sequences of the evaluation set a selection set is drawn apart from, when the run
#: does not say (scoring.evaluate.DEFAULT_SEQUENCES, the presets' evaluation size).
DEFAULT_EVAL_SEQUENCES = 4096


def selection_batch(task: Task, n: int, eval_sequences: int | None = None) -> Batch:
    """The task's selection set: n sequences (CPU) for choosing among a tuning's candidates, drawn
    from the seed `eval_seed(task, "selection")` and apart from the sequences that are reported:
    every sequence also in the evaluation set (its `eval_sequences` sequences, from `eval_seed(task)`,
    as `scoring.evaluate.eval_set` draws them) or in the curve set (`curve_batch`, its default
    size), and every repeat, is left out and another drawn in its place. Cached."""
    eval_n = DEFAULT_EVAL_SEQUENCES if eval_sequences is None else int(eval_sequences)
    seed = eval_seed(task, "selection")
    key = (task.describe(), n, seed, "selection", eval_n)
    if key not in _sets:
        taken = _sequence_keys(task.sample(eval_n, torch.Generator().manual_seed(eval_seed(task))))
        taken |= _sequence_keys(curve_batch(task, DEFAULT_CURVE_SEQUENCES))
        generator = torch.Generator().manual_seed(seed)
        kept: list[Batch] = []
        have = 0
        for _ in range(100):
            draw = task.sample(max(n - have, 16) * 2, generator)
            keep: list[int] = []
            for i, k in enumerate(_sequence_keys(draw, as_list=True)):
                if k not in taken and have + len(keep) < n:
                    taken.add(k)
                    keep.append(i)
            if keep:
                index = torch.tensor(keep, dtype=torch.long)
                kept.append(draw.map(lambda x: x.index_select(0, index) if torch.is_tensor(x)  # (called at once)
                                     and x.dim() > 0 and x.shape[0] == draw.batch_size else x))
                have += len(keep)
            if have >= n:
                break
        else:
            raise ValueError(f"{task.describe()}: cannot draw {n} selection sequences apart from the evaluation and "
                             f"curve sets (the task has too few distinct sequences); use fewer")
        _sets[key] = _concat(kept)
    return _sets[key]


def _sequence_keys(batch: Batch, as_list: bool = False):
    """Each sequence of `batch` as bytes (its tokens and, where there is one, its header): what
    makes two sequences the same input."""
    tokens = batch.tokens.cpu().contiguous()
    header = None if batch.header is None else batch.header.cpu().contiguous()
    keys = [tokens[i].numpy().tobytes() + (b"" if header is None else header[i].numpy().tobytes())
            for i in range(tokens.shape[0])]
    return keys if as_list else set(keys)


def _concat(batches: list[Batch]) -> Batch:
    if len(batches) == 1:
        return batches[0]
    first = batches[0]
    out: dict[str, Any] = {}
    for f in dataclasses.fields(first):
        values = [getattr(b, f.name) for b in batches]
        if f.name == "latents":
            out[f.name] = {k: torch.cat([v[k] for v in values]) if torch.is_tensor(values[0][k]) and values[0][k].dim()
                           > 0 and values[0][k].shape[0] == first.batch_size else values[0][k] for k in values[0]}
        elif values[0] is None:
            out[f.name] = None
        else:
            out[f.name] = torch.cat(values)
    return type(first)(**out)


@contextlib.contextmanager
def exact_float32() -> Iterator[None]:
    """Full float32 matmuls (no TF32) inside the block, whatever the training precision set."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def curve_task(task: Task, eval_scored) -> Task:
    """The task a run's learning curve scores: its primary evaluation. For the bijection that is
    the first of its scored position sets (`eval_scored`, named as in
    `scoring.evaluate.evaluation_tasks`); otherwise the training task itself."""
    scored = eval_scored or ()
    if scored and task.name == "bijection":
        if scored[0] not in SCORED_SETS:
            raise ValueError(f"eval_scored must name sets among {tuple(SCORED_SETS)}, got {list(scored)}")
        return dataclasses.replace(task, supervise=SCORED_SETS[scored[0]])
    return task


#: Sequences per forward pass of a curve point, by device type. Every sequence's predictive is the
#: same bit for bit whatever the chunk (the models compute each sequence on its own;
#: tests/training/test_curves.py); on a CPU a chunk near a training batch keeps the activations in
#: cache, where the whole 256-sequence set in one pass made a point cost about 4 training steps of
#: the quick sticky chain instead of about 2.7 (BENCHMARKS.md, "Learning curves"); on a GPU one
#: large pass is fastest.
CURVE_CHUNK = {"cpu": 64, "cuda": 512}


class CurveSet:
    """The curve set on the training device, with what every metric needs of the exact posterior
    computed once (its entropies, sum p log p, the scored positions and their counts)."""

    def __init__(self, task: Task, n: int = DEFAULT_CURVE_SEQUENCES, device: torch.device | str = "cpu",
                 chunk: int | None = None, split: str = "curve", eval_sequences: int | None = None) -> None:
        """split: "curve" (the curve set, `curve_batch`) or "selection" (`selection_batch`, drawn
        apart from the first `eval_sequences` evaluation sequences and the curve set). chunk: the
        sequences of one forward pass (None: `CURVE_CHUNK` for the device's type)."""
        batch = curve_batch(task, n) if split == "curve" else selection_batch(task, n, eval_sequences)
        dev = torch.device(device)
        self.task, self.n = task, n
        self.chunk = CURVE_CHUNK.get(dev.type, CURVE_CHUNK["cuda"]) if chunk is None else int(chunk)
        self.tokens = batch.tokens.to(dev)
        self.header = None if batch.header is None else batch.header.to(dev)
        self.p = batch.posterior.double().to(dev)  # [N, L, C]
        self.mask = batch.mask.to(dev)
        self.plogp = torch.special.xlogy(self.p, self.p).sum(-1)  # [N, L]
        self.h_p = -self.plogp / LOG2  # exact posterior entropy (bits)
        self.n_scored = float(batch.mask.sum())  # host numbers, fixed at construction
        positions = batch.mask.any(0).nonzero().flatten()
        self.positions = positions.to(dev)
        self.position_counts = batch.mask.sum(0)[positions].double().to(dev)
        masks = task.case_masks(batch)  # host reads here, at construction, never at a curve point
        self.cases = {c: (masks[c].to(dev), float(masks[c].sum())) for c in curve_cases() if c in masks}
        # a continuous tunnel (issue 41): p is the exact predictive density, the curve reads the
        # model's predictive from its head and scores it with the table's `continuous` functions
        self.head = getattr(task, "head", CATEGORICAL)
        self.continuous = is_continuous(self.head)
        self.y = batch.targets.double().to(dev) if self.continuous else None
        self.floor = getattr(task, "floor_predictives")(batch)["prior"].to(dev) if self.continuous else None

    def log_probs(self, model) -> Tensor:
        """log-softmax of every member's logits [E, N, L, C] (float64, on the device), computed in
        exact float32 in eval mode; the model's training mode is restored."""
        was_training = model.training
        model.eval()
        E, out = model.ensemble, []
        try:
            with torch.no_grad(), exact_float32(), torch.autocast("cuda", enabled=False), \
                    torch.autocast("cpu", enabled=False):
                for start in range(0, self.n, self.chunk):
                    tokens = self.tokens[start:start + self.chunk]
                    header = None if self.header is None else self.header[start:start + self.chunk]
                    tokens = tokens.unsqueeze(0).expand(E, *tokens.shape)
                    header = None if header is None else header.unsqueeze(0).expand(E, *header.shape)
                    out.append(read_outputs(model(tokens, header).double(), self.head))
        finally:
            model.train(was_training)
        return torch.cat(out, dim=1)

    def score(self, model) -> Tensor:
        """[len(curve_metrics()), E] float64 on the device: each metric of each member (NaN for a
        member with non-finite predictions). No host read."""
        return self.score_log_probs(self.log_probs(model))

    def score_log_probs(self, log_q: Tensor) -> Tensor:
        """The metrics of log-predictives `log_q` [E, N, L, C] (or [1, ...], broadcast); on a
        continuous tunnel, of predictive densities [E, N, L, 3M] (`models.heads` layout)."""
        if self.continuous:
            return self._score_continuous(log_q)
        h_q = -(log_q.exp() * log_q).sum(-1) / LOG2  # [E, N, L], as metrics.entropy_bits_from_log_probs
        values = torch.stack([curve_value(self, METRICS[name], log_q, h_q) for name in curve_metrics()])
        return torch.where(torch.isfinite(values), values, torch.full_like(values, math.nan))

    def _score_continuous(self, q: Tensor) -> Tensor:
        """[len(curve_metrics()), E]: each metric's `continuous` function, averaged as `curve_value`
        averages (NaN for a metric without one or that does not apply)."""
        assert self.y is not None
        v = ContinuousValues.of(self.p, q, self.y, self.mask, getattr(self.task, "error_dim", 1))
        rows = []
        for name in curve_metrics():
            metric = METRICS[name]
            if metric.continuous is None or metric.case is not None or metric.tasks is not None \
                    and self.task.name not in metric.tasks:
                rows.append(torch.full(q.shape[:1], math.nan, dtype=torch.float64, device=q.device))
                continue
            values = metric.continuous(v)  # [E, N, L]
            if metric.over_sequences == "pairs":
                rows.append(_masked_mean(values, self.mask, self.n_scored))
            else:
                total = torch.where(self.mask, values, torch.zeros((), dtype=values.dtype, device=values.device)).sum(1)
                rows.append((total[:, self.positions] / self.position_counts).abs().mean(-1))
        values = torch.stack(rows)
        return torch.where(torch.isfinite(values), values, torch.full_like(values, math.nan))

    def uniform(self) -> dict[str, float]:
        """The metrics of the uniform predictor (1/C everywhere) on this set: the curve's floor.
        Reads back to the host (call it once, not inside a step). A metric without positions on
        this set (a case the task does not have) is left out."""
        if self.floor is not None:  # a continuous tunnel's floor: its prior predictive
            values = dict(zip(curve_metrics(), self._score_continuous(self.floor.unsqueeze(0))[:, 0].tolist()))
            return {name: v for name, v in values.items() if math.isfinite(v)}
        C = self.p.shape[-1]
        log_q = torch.full((1, *self.p.shape), -math.log(C), dtype=torch.float64, device=self.p.device)
        values = dict(zip(curve_metrics(), self.score_log_probs(log_q)[:, 0].tolist()))
        return {name: v for name, v in values.items() if math.isfinite(v)}


def _masked_mean(per_position: Tensor, mask: Tensor, n: float) -> Tensor:
    """Mean of [E, N, L] values over the `n` (sequence, position) pairs where `mask` [N, L] is True: [E]."""
    zero = torch.zeros((), dtype=per_position.dtype, device=per_position.device)
    return torch.where(mask, per_position, zero).sum((1, 2)) / n


def curve_value(s: CurveSet, metric: Metric, log_q: Tensor, h_q: Tensor) -> Tensor:
    """One metric of the table (`bayesbench.metric_table`) for every member: [E], NaN where the set has
    none of its positions (a task it does not apply to, a case the task does not have)."""
    if metric.tasks is not None and s.task.name not in metric.tasks or metric.case is not None \
            and metric.case not in s.cases:
        return torch.full(log_q.shape[:1], math.nan, dtype=log_q.dtype, device=log_q.device)
    mask, n = (s.mask, s.n_scored) if metric.case is None else s.cases[metric.case]
    values = metric.values(s.p, s.plogp, s.h_p, log_q, h_q)  # [E, N, L]
    if metric.over_sequences == "pairs":
        return _masked_mean(values, mask, n)
    zero = torch.zeros((), dtype=values.dtype, device=values.device)
    total = torch.where(mask, values, zero).sum(1)  # [E, L]: sum over the sequences scored there
    if metric.case is None:  # the scored positions, counted once at construction
        return (total[:, s.positions] / s.position_counts).abs().mean(-1)
    counts = mask.sum(0)  # [L]
    scored = counts > 0
    return torch.where(scored, (total / counts.clamp(min=1)).abs(), zero).sum(-1) / scored.sum()


@dataclass
class EnsembleCurve:
    """The host copy of a run's learning curves: one point per measured step, every metric of
    every member (bits; NaN for a member with non-finite predictions), kept in the checkpoint.

    Tokens seen by a member at step s: s x batch_size x seq_len (sequences: s x batch_size).
    wall_s: the run's wall time when the point was taken (on an accelerator, the host's clock
    when its evaluation was queued)."""

    task: str  # the evaluated task, described
    n_sequences: int
    cadence: str
    batch_size: int
    seq_len: int
    uniform: dict[str, float]  # the uniform predictor's metrics on the same sequences (the floor)
    steps: list[int] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)
    values: dict[str, list[list[float]]] = field(default_factory=dict)  # metric -> per point, per member

    @classmethod
    def empty(cls, curve_set: CurveSet, every: int, batch_size: int, seq_len: int) -> EnsembleCurve:
        """The curve of a run before its first point: measured on `curve_set`, every `every`
        steps (0: log-spaced)."""
        cadence = f"every {every} steps" if every else f"log-spaced, {CURVE_PER_DECADE} per decade"
        return cls(task=curve_set.task.describe(), n_sequences=curve_set.n, cadence=cadence, batch_size=batch_size,
                   seq_len=seq_len, uniform=curve_set.uniform())

    def append(self, step: int, wall_s: float, values: list[list[float]]) -> None:
        """A point: `values` [metric][member] in the order of `curve_metrics()`; a metric without a
        finite uniform value (none of its positions on this set) is not kept."""
        previous = len(self.steps)
        self.steps.append(int(step))
        self.wall_s.append(float(wall_s))
        for name, row in zip(curve_metrics(), values):
            if not math.isfinite(self.uniform.get(name, math.nan)):
                continue
            kept = self.values.setdefault(name, [[math.nan] * len(row) for _ in range(previous)])
            kept.append([float(v) for v in row])

    def truncate(self, last: int) -> None:
        """Keep the points of steps <= last (a run cut short when its last member diverged)."""
        keep = sum(s <= last for s in self.steps)
        self.steps, self.wall_s = self.steps[:keep], self.wall_s[:keep]
        self.values = {k: v[:keep] for k, v in self.values.items()}

    def values_kept(self) -> list[str]:
        """The metrics this curve keeps: those with a finite uniform value on its set."""
        return [name for name in curve_metrics() if math.isfinite(self.uniform.get(name, math.nan))]

    def member(self, e: int, metric: str) -> list[float]:
        """Member e's values of `metric`, one per point."""
        return [row[e] for row in self.values.get(metric, [])]

    def copy(self) -> EnsembleCurve:
        return EnsembleCurve(**dataclasses.asdict(self))

    def state_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_state(cls, state: dict) -> EnsembleCurve:
        """Back from `state_dict` (a checkpoint). A metric added since it was written has no
        uniform value there, so the curve goes on without it, as `append` does."""
        return cls(**{f.name: state[f.name] for f in dataclasses.fields(cls)})
