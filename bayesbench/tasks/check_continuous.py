"""Checks of a continuous wind tunnel before anything trains on it (issue 41):
`check_continuous_task(task)`, the counterpart of `tasks.check.check_task` for a tunnel whose
head is "gaussian" or "mixture:M" (a user's own file with a Gaussian or mixture predictive).

- the head: `task.head` is a continuous head (`models.heads.parse_head`) and `num_classes` is its
  number of outputs (2, or 3M);
- the batch: `sample(B, generator)` returns a `Batch` whose tokens are long [B, L] in
  [0, vocab_size), mask bool [B, L] with a supervised position in every sequence, header [B, L, D]
  (a real vector at every position, `header_every_position`) finite, targets float [B, L]
  finite, posterior [B, L, 3J] a mixture at every supervised position (weights in [0, 1] summing
  to 1 within 1e-4, variances > 0, all finite), every tensor on the generator's device;
- determinism: the same seed gives the same batch, another seed another one;
- the posterior against the sampler: the sampled y is as surprising as the predictive says,
  E[-log2 p(y)] = E[h(p)] (differential entropy), within 6 standard errors over sequences; and
  its probability integral transform, F_p(y), has mean 1/2 within 6 standard errors (a predictive
  of another process, or shifted, fails these);
- its floors, where it offers `floor_predictives(batch)`: a "prior" entry, each entry a mixture
  of the same [B, L] at the supervised positions.

Each failure is a ValueError naming the task and the rule; success returns the lines checked.
(`tasks/check.py`'s `check_task`, which `bayesbench tasks --check` and `--task ./file.py:build`
run, calls this module for a task with a continuous head; `check_validity` there has its own
continuous form.)
"""

from __future__ import annotations

import math

import torch

from ..models.heads import head_outputs, parse_head, split_layout
from .base import Batch, Task

SEQUENCES = 512
Z_LIMIT = 6.0
WEIGHT_ATOL = 1e-4


def _fail(task: Task, rule: str) -> None:
    raise ValueError(f"task {task.describe()}: {rule}")


def _mixture_rows(task: Task, name: str, x: torch.Tensor, mask: torch.Tensor) -> None:
    """x [B, L, 3J] must be a mixture of Gaussians at every supervised position."""
    if x.dim() != 3 or x.shape[:2] != mask.shape or x.shape[-1] % 3 or x.shape[-1] == 0:
        _fail(task, f"{name} must be [B, L, 3J] (J weights, J means, J variances) with [B, L] = "
                    f"{list(mask.shape)}, got {list(x.shape)}")
    rows = x[mask].double()
    if not bool(torch.isfinite(rows).all()):
        _fail(task, f"{name} must be finite at every supervised position")
    w, _, v = split_layout(rows)
    if bool(((w < 0) | (w > 1)).any()):
        _fail(task, f"{name}'s weights must lie in [0, 1]")
    if bool(((w.sum(-1) - 1).abs() > WEIGHT_ATOL).any()):
        _fail(task, f"{name}'s weights must sum to 1 (within {WEIGHT_ATOL:g}) at every supervised position")
    if bool((v <= 0).any()):
        _fail(task, f"{name}'s variances must be > 0 at every supervised position")


def check_continuous_batch(task: Task, batch: Batch, n: int, device: torch.device) -> None:
    """The shapes, types, devices and values of one sampled batch (see the module doc)."""
    if not isinstance(batch, Batch):
        _fail(task, f"sample must return a bayesbench.tasks.Batch, got {type(batch).__name__}")
    L = task.seq_len
    if batch.tokens.dtype != torch.long or tuple(batch.tokens.shape) != (n, L):
        _fail(task, f"tokens must be long [B, L] = [{n}, {L}], got {batch.tokens.dtype} {list(batch.tokens.shape)}")
    if int(batch.tokens.min()) < 0 or int(batch.tokens.max()) >= task.vocab_size:
        _fail(task, f"tokens must lie in [0, {task.vocab_size - 1}] (the vocabulary)")
    if batch.mask.dtype != torch.bool or tuple(batch.mask.shape) != (n, L) or not bool(batch.mask.any(1).all()):
        _fail(task, "mask must be bool [B, L] with a supervised position in every sequence")
    header = batch.header
    if header is None or tuple(header.shape) != (n, L, task.header_dim) or not header.is_floating_point():
        _fail(task, f"header must be a float [B, L, D] = [{n}, {L}, {task.header_dim}] (a real vector at every "
                    f"position), got {None if header is None else list(header.shape)}")
    assert header is not None
    if not bool(torch.isfinite(header).all()):
        _fail(task, "header must be finite")
    if not batch.targets.is_floating_point() or tuple(batch.targets.shape) != (n, L):
        _fail(task, f"targets must be the real y, float [B, L] = [{n}, {L}], got {batch.targets.dtype} "
                    f"{list(batch.targets.shape)}")
    if not bool(torch.isfinite(batch.targets[batch.mask]).all()):
        _fail(task, "targets must be finite at every supervised position")
    _mixture_rows(task, "posterior", batch.posterior, batch.mask)
    for name, t in (("tokens", batch.tokens), ("mask", batch.mask), ("targets", batch.targets),
                    ("posterior", batch.posterior), ("header", header)):
        if t.device.type != device.type:
            _fail(task, f"{name} must be on the generator's device {device}, got {t.device}")


def calibration_gaps(batch: Batch) -> tuple[tuple[float, float], tuple[float, float]]:
    """((mean of -log2 p(y) - h(p), its standard error), (mean PIT - 1/2, its standard error)),
    over sequences (each sequence's mean over its supervised positions)."""
    from ..oracle.gaussian_bits import entropy_bits

    p, y, mask = batch.posterior.double(), batch.targets.double(), batch.mask
    w, m, v = split_layout(p)
    log_p = torch.logsumexp(torch.where(w > 0, w.log(), -math.inf)
                            - 0.5 * (math.log(2 * math.pi) + v.log() + (y.unsqueeze(-1) - m) ** 2 / v), -1)
    gap = -log_p / math.log(2) - entropy_bits(p)
    pit = (w * 0.5 * (1 + torch.erf((y.unsqueeze(-1) - m) / (2 * v).sqrt()))).sum(-1) - 0.5
    out = []
    for d in (gap, pit):
        per = torch.where(mask, d, torch.zeros_like(d)).sum(1) / mask.sum(1)
        out.append((float(per.mean()), float(per.std()) / math.sqrt(per.numel())))
    return out[0], out[1]


def check_continuous_task(task: Task, *, sequences: int = SEQUENCES, seed: int = 0) -> list[str]:
    """Every check of the module doc; returns the lines checked (one per rule)."""
    try:
        kind, _ = parse_head(task.head)
    except ValueError as err:
        _fail(task, str(err))
    if kind == "categorical":
        _fail(task, "its head is categorical: check it with tasks.check.check_task")
    if task.num_classes != head_outputs(task.head):
        _fail(task, f"num_classes must be the {task.head} head's {head_outputs(task.head)} outputs per position, "
                    f"got {task.num_classes}")
    if not getattr(task, "header_every_position", False):
        _fail(task, "header_every_position must be True (a continuous tunnel reads a real vector at every position)")
    g = torch.Generator().manual_seed(seed)
    batch = task.sample(sequences, g)
    device = torch.device("cpu")
    check_continuous_batch(task, batch, sequences, device)
    lines = [f"head {task.head}: {task.num_classes} outputs per position; batch of {sequences}: shapes, types, "
             "finite header and targets, a mixture posterior at every supervised position"]
    again = task.sample(sequences, torch.Generator().manual_seed(seed))
    other = task.sample(sequences, torch.Generator().manual_seed(seed + 1))
    if not (torch.equal(batch.targets, again.targets) and torch.equal(batch.posterior, again.posterior)):
        _fail(task, "the same seed must give the same batch")
    if torch.equal(batch.targets, other.targets):
        _fail(task, "another seed must give another batch")
    lines.append("determinism: the same seed, the same batch; another seed, another batch")
    (gap, gap_se), (pit, pit_se) = calibration_gaps(batch)
    if abs(gap) > Z_LIMIT * gap_se + 1e-6:
        _fail(task, f"the sampled y must be as surprising as the posterior says: E[-log2 p(y)] - E[h(p)] = {gap:.4g} "
                    f"bits, {abs(gap) / max(gap_se, 1e-300):.1f} standard errors from 0 (limit {Z_LIMIT:g})")
    if abs(pit) > Z_LIMIT * pit_se + 1e-6:
        _fail(task, f"the sampled y's probability integral transform must have mean 1/2: off by {pit:.4g}, "
                    f"{abs(pit) / max(pit_se, 1e-300):.1f} standard errors (limit {Z_LIMIT:g})")
    lines.append(f"the posterior against the sampler: surprise gap {gap:+.4f} bits (se {gap_se:.4f}), "
                 f"PIT mean - 1/2 {pit:+.4f} (se {pit_se:.4f})")
    floors = getattr(task, "floor_predictives", None)
    if floors is not None:
        refs = floors(batch)
        if "prior" not in refs:
            _fail(task, f"floor_predictives must name the prior predictive 'prior', got {list(refs)}")
        for name, q in refs.items():
            _mixture_rows(task, f"floor {name!r}", q, batch.mask)
        lines.append(f"floors: {', '.join(refs)}")
    return lines
