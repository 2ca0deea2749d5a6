"""Scores of a continuous predictive against the exact one, in bits (issue 41; docs/science.md,
"Continuous tunnels"): what the metric table's `continuous` functions read.

Both predictives come in the layout of `models.heads` ([..., 3J]: weights, means, variances):
the exact one from the batch (`Batch.posterior`), the model's from its head. Per supervised
(sequence, position), in bits:

- `kl`: KL(Bayes || model). Closed form when both are Gaussians; otherwise E_Bayes[log2 p - log2 q]
  by a deterministic quadrature (`_under`): Gauss-Hermite with NODES nodes under each component
  of the equal mixture of Bayes's and the model's components, weighted by p / r, so that each
  component, however narrow, has nodes at its own scale. Its error against 200,000-draw Monte
  Carlo on mixreg's predictives is asserted below 4 standard errors + 2e-3 bits
  (tests/scoring/test_continuous.py).
- `h_bayes`, `h_model`: differential entropies (closed form for a Gaussian, the same quadrature
  for a mixture).
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
    _hermite,
    gaussian_entropy_bits,
    gaussian_kl_bits,
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


#: Gauss-Hermite nodes per component of the proposal mixture (`_under`).
NODES = 64


def _under(weights: Tensor, means: Tensor, variances: Tensor, f, proposal: tuple[Tensor, Tensor]) -> Tensor:
    """integral of p(y) f(y) dy for the mixture p = (weights, means, variances) [R, J], by
    Gauss-Hermite quadrature of NODES nodes under each component of the proposal r, the equal
    mixture of the K Gaussians `proposal` = (means, variances) [R, K] (p's and q's components):
    sum_i (1 / K) E_{N_i}[p f / r]. Every narrow component has nodes at its own scale, so the
    bump a narrow component puts in log p or log q is resolved even under a wide one (plain
    quadrature under p's components alone errs by up to 0.1 bits when widths differ tenfold,
    `oracle.gaussian_bits`); measured in tests/scoring/test_continuous.py."""
    t, gw = (torch.as_tensor(a, dtype=torch.float64, device=means.device) for a in _hermite(NODES))
    pm, pv = proposal
    K = pm.shape[-1]
    y = pm.unsqueeze(-1) + (2 * pv).sqrt().unsqueeze(-1) * t  # [R, K, Q]
    flat = y.flatten(1)  # [R, K*Q]

    def logpdf(w: Tensor, m: Tensor, v: Tensor) -> Tensor:
        return mixture_logpdf(flat, w.unsqueeze(1), m.unsqueeze(1), v.unsqueeze(1)).view(y.shape)

    log_r = logpdf(torch.full_like(pm, 1.0 / K), pm, pv)
    log_p = logpdf(weights, means, variances)
    ratio = torch.exp(log_p - log_r)
    return (ratio * f(y, log_p) * gw).sum(-1).mean(-1)


def _mixture_entropy_bits(w: Tensor, m: Tensor, v: Tensor) -> Tensor:
    return -_under(w, m, v, lambda y, log_p: log_p, (m, v)) / LN2


def _mixture_kl_bits(bw: Tensor, bm: Tensor, bv: Tensor, qw: Tensor, qm: Tensor, qv: Tensor) -> Tensor:
    def log_ratio(y: Tensor, log_p: Tensor) -> Tensor:
        log_q = mixture_logpdf(y.flatten(1), qw.unsqueeze(1), qm.unsqueeze(1), qv.unsqueeze(1)).view(y.shape)
        return log_p - log_q

    return _under(bw, bm, bv, log_ratio, (torch.cat([bm, qm], -1), torch.cat([bv, qv], -1))) / LN2


def entropy_bits(params: Tensor) -> Tensor:
    """Differential entropy in bits of predictives [..., 3J] (closed form when J = 1)."""
    w, m, v = split_layout(params)
    if w.shape[-1] == 1:
        return gaussian_entropy_bits(v[..., 0])
    J = w.shape[-1]
    return _mixture_entropy_bits(w.reshape(-1, J), m.reshape(-1, J), v.reshape(-1, J)).view(w.shape[:-1])


def _rows(b: Tensor, q: Tensor, y: Tensor, dim: int) -> tuple[Tensor, ...]:
    bw, bm, bv = split_layout(b)
    qw, qm, qv = split_layout(q)
    bw, qw = bw / bw.sum(-1, keepdim=True), qw / qw.sum(-1, keepdim=True)  # float32 weights, renormalised in float64
    b = torch.cat([bw, bm, bv], -1)
    if bw.shape[-1] == 1 and qw.shape[-1] == 1:
        kl = gaussian_kl_bits(bm[..., 0], bv[..., 0], qm[..., 0], qv[..., 0])
    else:
        kl = _mixture_kl_bits(bw, bm, bv, qw, qm, qv)
    nll_b = -mixture_logpdf(y, bw, bm, bv) / LN2
    nll_q = -mixture_logpdf(y, qw, qm, qv) / LN2
    excess = ((qw * qm).sum(-1) - (bw * bm).sum(-1)) ** 2 / dim
    return kl, entropy_bits(b), entropy_bits(torch.cat([qw, qm, qv], -1)), nll_b, nll_q, excess


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
