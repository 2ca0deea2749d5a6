"""Scores of a continuous predictive against the exact one, in bits (issue 41; docs/science.md,
"Continuous tunnels"): what the metric table's `continuous` functions read.

Both predictives come in the layout of `models.heads` ([..., 3J]: weights, means, variances):
the exact one from the batch (`Batch.posterior`), the model's from its head. Per supervised
(sequence, position), in bits:

- `kl`: KL(Bayes || model). Closed form when both are Gaussians; when the model is a Gaussian
  and Bayes a mixture, -h(Bayes) (Gauss-Hermite) plus the closed-form cross-entropy; when the
  model is a mixture, -h(Bayes) - E_Bayes[log2 q] by Gauss-Hermite quadrature of
  `oracle.gaussian_bits.GH_NODES` nodes under each Bayes component (deterministic; its error is
  measured in tests/oracle/test_gaussian_bits.py and tests/scoring/test_continuous.py).
- `h_bayes`, `h_model`: differential entropies (closed form for a Gaussian, quadrature for a mixture).
- `nll_bayes`, `nll_model`: -log2 density of the sampled y under each; their difference, the NLL
  regret, is an unbiased estimate of the KL (E_y[log p(y) - log q(y)] = KL(p || q)) that a user
  can compute from predictions alone.
- `excess_sq`: (mean of the model's predictive - the Bayes mean)^2 / d, the excess of Garg et
  al.'s normalised squared error (arXiv 2208.01066, Sec. 3) over Bayes.

Every quantity is computed at the supervised positions only (0 elsewhere), in chunks of
`CHUNK_ROWS` rows, in float64; a member whose predictive is not finite gets NaN throughout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ..models.heads import split_layout
from ..oracle.gaussian_bits import (
    LN2,
    gaussian_entropy_bits,
    gaussian_kl_bits,
    mixture_entropy_bits,
    mixture_kl_bits,
    mixture_logpdf,
)

CHUNK_ROWS = 8192


@dataclass(frozen=True)
class ContinuousValues:
    """Per (sequence, position) bits of one model's predictive against the exact one ([..., N, L]
    each, zeros off the mask): see the module docstring."""

    kl: Tensor
    h_bayes: Tensor
    h_model: Tensor
    nll_bayes: Tensor
    nll_model: Tensor
    excess_sq: Tensor

    @classmethod
    def of(cls, bayes: Tensor, model: Tensor, y: Tensor, mask: Tensor, dim: int = 1) -> ContinuousValues:
        """bayes [N, L, 3J], model [N, L, 3M] (or [E, N, L, 3M]: every member), y [N, L], mask [N, L]."""
        if model.dim() == bayes.dim() + 1:
            parts = [cls.of(bayes, m, y, mask, dim) for m in model.unbind(0)]
            return cls(*(torch.stack([getattr(p, f) for p in parts]) for f in cls.__dataclass_fields__))
        rows = mask.nonzero(as_tuple=True)
        b, q, yy = bayes[rows].double(), model[rows].double(), y[rows].double()
        names = list(cls.__dataclass_fields__)
        if not bool(torch.isfinite(q).all()):
            full = torch.full(mask.shape, math.nan, dtype=torch.float64, device=mask.device)
            return cls(*(full.clone() for _ in names))
        pieces = [_rows(b[i:i + CHUNK_ROWS], q[i:i + CHUNK_ROWS], yy[i:i + CHUNK_ROWS], dim)
                  for i in range(0, b.shape[0], CHUNK_ROWS)]
        out = []
        for k in range(len(names)):
            full = torch.zeros(mask.shape, dtype=torch.float64, device=mask.device)
            if pieces:
                full[rows] = torch.cat([p[k] for p in pieces])
            out.append(full)
        return cls(*out)


def entropy_bits(params: Tensor) -> Tensor:
    """Differential entropy in bits of predictives [..., 3J] (closed form when J = 1)."""
    w, m, v = split_layout(params)
    if w.shape[-1] == 1:
        return gaussian_entropy_bits(v[..., 0])
    return mixture_entropy_bits(w, m, v)


def _rows(b: Tensor, q: Tensor, y: Tensor, dim: int) -> tuple[Tensor, ...]:
    bw, bm, bv = split_layout(b)
    qw, qm, qv = split_layout(q)
    qw = qw / qw.sum(-1, keepdim=True)  # a float32 softmax, renormalised in float64
    if bw.shape[-1] == 1 and qw.shape[-1] == 1:
        kl = gaussian_kl_bits(bm[..., 0], bv[..., 0], qm[..., 0], qv[..., 0])
    else:
        kl = mixture_kl_bits(bw, bm, bv, qw, qm, qv)
    nll_b = -mixture_logpdf(y, bw, bm, bv) / LN2
    nll_q = -mixture_logpdf(y, qw, qm, qv) / LN2
    excess = ((qw * qm).sum(-1) - (bw * bm).sum(-1)) ** 2 / dim
    return kl, entropy_bits(b), entropy_bits(q), nll_b, nll_q, excess


def continuous_scores(values: ContinuousValues, mask: Tensor, *, task: str | None = None,
                      nonfinite: str = "raise") -> dict:
    """{name: Summary} of every final metric of the table with a `continuous` function (in table
    order) that applies to `task`: the continuous counterpart of `metrics.final_scores`."""
    from ..metric_table import METRICS, applies, final_metrics
    from .metrics import average

    out = {}
    for name in final_metrics():
        metric = METRICS[name]
        if metric.continuous is not None and metric.case is None and applies(metric, task):
            out[name] = average(metric, metric.continuous(values), mask, nonfinite=nonfinite)
    return out


def score_continuous(bayes: Tensor, mask: Tensor, model: Tensor, y: Tensor, *, dim: int = 1,
                     task: str | None = None, nonfinite: str = "raise"):
    """A model's continuous predictive `model` [N, L, 3M] against the exact `bayes` [N, L, 3J] on
    the sampled `y` [N, L], at the positions of `mask`: a `metrics.Score` (its final metrics,
    its per-position curves), as `metrics.score` gives for a categorical predictive."""
    from .metrics import Score, per_position

    v = ContinuousValues.of(bayes, model, y, mask, dim)
    err = (v.h_model - v.h_bayes).abs()
    return Score(metrics=continuous_scores(v, mask, task=task, nonfinite=nonfinite), entropy_error=err,
                 entropy_mae_curve=per_position(err, mask), kl_curve=per_position(v.kl, mask),
                 model_entropy_curve=per_position(v.h_model, mask), bayes_entropy_curve=per_position(v.h_bayes, mask))
