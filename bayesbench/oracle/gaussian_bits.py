"""Information in bits between Gaussians and univariate Gaussian mixtures: the scores of the
continuous wind tunnels (groundwork for issue 41; docs/oracle.md#continuous-oracles-groundwork-for-issue-41s-tunnels).

Closed forms: KL(N1 || N2), differential entropy and NLL of a Gaussian, univariate ([...]) or
multivariate ([..., p], [..., p, p]). A univariate mixture (weights [..., J], means [..., J],
variances [..., J]) has no closed-form entropy: its entropy and its KL to a Gaussian or another
mixture are integrals of p(y) f(y) over the line, taken by one deterministic rule (`_integrate`,
no sampling): composite Gauss-Legendre, `nodes` nodes on each interval between breakpoints placed
at m_k + s_k * BREAKPOINTS for every component k of p and of q (so every component, however
narrow, has intervals at its own scale: the bump it puts in log p or log q is resolved), on the
range p's components reach within REACH standard deviations (p's mass beyond: < 1e-32).
Measured against scipy.integrate.quad and a fine trapezoid grid (tests/oracle/test_gaussian_bits.py
prints it; random mixtures of 1 to 4 components, means ~ N(0, 2^2), standard deviations within a
factor 1 to 100 of each other): below 1e-10 bits for the entropy and the KL, where the two rules it replaced
(Gauss-Hermite under p's components, and under an equal mixture of p's and q's) erred by up to
0.05 and 0.1 bits (with standard deviations within a factor 100) and by 0.012 and 0.013 bits on
mixreg's predictives (measured 2026-12-06, CHANGELOG; docs/science.md, "The mixture quadrature").

Every function computes in float64 and returns float64; all inputs broadcast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, overload

import numpy as np
import torch
from torch import Tensor

from ..checks import positive_int
from ..models.heads import split_layout
from .validate import ROW_SUM_ATOL

LN2 = math.log(2.0)
LOG_2PI = math.log(2.0 * math.pi)
#: Gauss-Legendre nodes per interval of the mixture quadrature (`_integrate`).
GL_NODES = 8
#: Where each component k puts breakpoints: m_k + s_k * BREAKPOINTS (intervals of at most 0.75 sd
#: near its mean, 4 sd in its tails).
BREAKPOINTS = (-12.0, -8.0, -5.0, -3.5, -2.5, -1.5, -0.75, 0.0, 0.75, 1.5, 2.5, 3.5, 5.0, 8.0, 12.0)
#: The integrals run over [min_j m_j - REACH s_j, max_j m_j + REACH s_j] of p's components.
REACH = 12.0


def _f64(name: str, x) -> Tensor:
    if isinstance(x, Tensor):
        if not (x.is_floating_point()):
            raise ValueError(f"{name} must be a floating-point tensor, got {x.dtype}")
        x = x.to(torch.float64)
    else:
        try:
            x = torch.as_tensor(x, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(f"{name} must be a number or a tensor of numbers, got {type(x).__name__}") from None
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return x


def _positive(name: str, x) -> Tensor:
    x = _f64(name, x)
    if not bool((x > 0).all()):
        raise ValueError(f"{name} must be positive (a variance > 0); found {x[x <= 0].flatten()[0].item()!r}")
    return x


def check_weights(name: str, w: Tensor) -> Tensor:
    """Mixture weights [..., J]: each in [0, 1], each row summing to 1 within ROW_SUM_ATOL of the
    input's dtype (float64: 1e-6, float32: 1e-4); returned in float64, renormalised to sum to 1."""
    atol = ROW_SUM_ATOL.get(w.dtype if isinstance(w, Tensor) else torch.float64, ROW_SUM_ATOL[torch.float64])
    w = _f64(name, w)
    if w.dim() == 0 or w.shape[-1] < 1:
        raise ValueError(f"{name} must have at least one component (last dimension J >= 1), got {list(w.shape)}")
    if bool(((w < 0) | (w > 1)).any()):
        bad = w[(w < 0) | (w > 1)].flatten()[0].item()
        raise ValueError(f"{name} must each lie in [0, 1] (mixture weights); found {bad!r}")
    off = (w.sum(-1) - 1).abs() > atol
    if bool(off.any()):
        raise ValueError(f"{name} must sum to 1 over the last dimension (within {atol:g}); "
                         f"a row sums to {w.sum(-1)[off].flatten()[0].item():.12g}")
    return w / w.sum(-1, keepdim=True)


#: Relative asymmetry |S - S'| / (1 + max |S|) allowed in a covariance.
SYMMETRY_RTOL = 1e-9


@overload
def check_covariance(name: str, S: Tensor, definite: Literal[True], meaning: str = ...) -> Tensor: ...


@overload
def check_covariance(name: str, S: Tensor, definite: bool, meaning: str = ...) -> Tensor | None: ...


def check_covariance(name: str, S: Tensor, definite: bool, meaning: str = "a covariance") -> Tensor | None:
    """S [..., p, p] symmetric (within SYMMETRY_RTOL) and positive definite (returns its Cholesky
    factor) or, with definite=False, positive semidefinite (returns None)."""
    if S.dim() < 2 or S.shape[-1] != S.shape[-2]:
        raise ValueError(f"{name} must be square in its last two dimensions [..., p, p], got {list(S.shape)}")
    scale = 1 + S.abs().amax((-1, -2))
    if bool(((S - S.transpose(-1, -2)).abs().amax((-1, -2)) > SYMMETRY_RTOL * scale).any()):
        raise ValueError(f"{name} must be symmetric ({meaning})")
    if definite:
        L, info = torch.linalg.cholesky_ex(0.5 * (S + S.transpose(-1, -2)))
        if bool((info != 0).any()):
            raise ValueError(f"{name} must be positive definite ({meaning}; its Cholesky factorisation failed)")
        return L
    if bool((torch.linalg.eigvalsh(S)[..., 0] < -SYMMETRY_RTOL * scale).any()):
        raise ValueError(f"{name} must be positive semidefinite ({meaning}; it has a negative eigenvalue)")
    return None


def _spd_cholesky(name: str, cov: Tensor) -> Tensor:
    return check_covariance(name, cov, definite=True)


# ---- Gaussians: closed forms ---------------------------------------------------------------------

def gaussian_nll_bits(y, mean, var) -> Tensor:
    """-log2 N(y; mean, var), elementwise."""
    y, mean, var = _f64("y", y), _f64("mean", mean), _positive("var", var)
    return normal_logpdf(y, mean, var).neg() / LN2


def normal_logpdf(y: Tensor, mean: Tensor, var: Tensor) -> Tensor:
    """log N(y; mean, var) in nats, elementwise (no checks: the oracles' inner loop)."""
    return -0.5 * (LOG_2PI + var.log() + (y - mean) ** 2 / var)


def gaussian_entropy_bits(var) -> Tensor:
    """Differential entropy of N(., var) in bits: log2(2 pi e var) / 2."""
    return 0.5 * (LOG_2PI + 1.0 + _positive("var", var).log()) / LN2


def gaussian_kl_bits(mean1, var1, mean2, var2) -> Tensor:
    """KL(N(mean1, var1) || N(mean2, var2)) in bits, elementwise."""
    m1, v1, m2, v2 = _f64("mean1", mean1), _positive("var1", var1), _f64("mean2", mean2), _positive("var2", var2)
    r = v1 / v2
    return 0.5 * (r - 1.0 - r.log() + (m1 - m2) ** 2 / v2) / LN2


def mvn_nll_bits(y, mean, cov) -> Tensor:
    """-log2 N(y; mean, cov) for y, mean [..., p] and cov [..., p, p] (symmetric positive definite)."""
    y, mean, cov = _f64("y", y), _f64("mean", mean), _f64("cov", cov)
    L = _spd_cholesky("cov", cov)
    r = torch.linalg.solve_triangular(L, (y - mean).unsqueeze(-1), upper=False).squeeze(-1)
    p = cov.shape[-1]
    logdet = 2 * L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    return 0.5 * (p * LOG_2PI + logdet + (r * r).sum(-1)) / LN2


def mvn_entropy_bits(cov) -> Tensor:
    """Differential entropy of N(., cov) in bits: log2 det(2 pi e cov) / 2."""
    L = _spd_cholesky("cov", _f64("cov", cov))
    p = L.shape[-1]
    return (0.5 * p * (LOG_2PI + 1.0) + L.diagonal(dim1=-2, dim2=-1).log().sum(-1)) / LN2


def mvn_kl_bits(mean1, cov1, mean2, cov2) -> Tensor:
    """KL(N(mean1, cov1) || N(mean2, cov2)) in bits: (tr(S2^-1 S1) + d' S2^-1 d - p + ln det S2/det S1) / 2."""
    m1, m2 = _f64("mean1", mean1), _f64("mean2", mean2)
    L1, L2 = _spd_cholesky("cov1", _f64("cov1", cov1)), _spd_cholesky("cov2", _f64("cov2", cov2))
    if L1.shape[-1] != L2.shape[-1] or m1.shape[-1] != L1.shape[-1] or m2.shape[-1] != L1.shape[-1]:
        raise ValueError(f"mean1 {list(m1.shape)}, cov1 {list(L1.shape)}, mean2 {list(m2.shape)} and cov2 "
                         f"{list(L2.shape)} must agree in their dimension p")
    p = L1.shape[-1]
    M = torch.linalg.solve_triangular(L2, L1, upper=False)  # L2^-1 L1: tr(S2^-1 S1) = |M|_F^2
    r = torch.linalg.solve_triangular(L2, (m2 - m1).unsqueeze(-1), upper=False).squeeze(-1)
    logdet = 2 * (L2.diagonal(dim1=-2, dim2=-1).log().sum(-1) - L1.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    return 0.5 * ((M * M).sum((-1, -2)) + (r * r).sum(-1) - p + logdet) / LN2


# ---- univariate Gaussian mixtures: the one quadrature ---------------------------------------------

def _mixture(prefix: str, weights, means, variances) -> tuple[Tensor, Tensor, Tensor]:
    w = check_weights(f"{prefix}weights", weights)
    m, v = _f64(f"{prefix}means", means), _positive(f"{prefix}variances", variances)
    try:
        w, m, v = torch.broadcast_tensors(w, m, v)
    except RuntimeError:
        raise ValueError(f"{prefix}weights {list(w.shape)}, {prefix}means {list(m.shape)} and {prefix}variances "
                         f"{list(v.shape)} must broadcast together ([..., J]: J components)") from None
    return w, m, v


def mixture_logpdf(y: Tensor, weights: Tensor, means: Tensor, variances: Tensor) -> Tensor:
    """log sum_j w_j N(y; m_j, v_j) in nats: y [...], mixture [..., J] (no checks)."""
    lw = torch.where(weights > 0, weights.log(), -math.inf)
    return torch.logsumexp(lw + normal_logpdf(y.unsqueeze(-1), means, variances), -1)


def mixture_nll_bits(y, weights, means, variances) -> Tensor:
    """-log2 of a univariate mixture's density at y: y [...], weights/means/variances [..., J]."""
    w, m, v = _mixture("", weights, means, variances)
    return mixture_logpdf(_f64("y", y), w, m, v).neg() / LN2


@lru_cache(maxsize=8)
def _legendre(nodes: int) -> tuple[np.ndarray, np.ndarray]:
    return np.polynomial.legendre.leggauss(nodes)


def _integrate(weights: Tensor, means: Tensor, variances: Tensor, f, scales: tuple[Tensor, Tensor],
               nodes: int = GL_NODES) -> Tensor:
    """integral of p(y) f(y, log p(y)) dy for rows of the mixture p = (weights, means, variances)
    [R, J] -> [R]: composite Gauss-Legendre with `nodes` nodes per interval between breakpoints
    m_k + s_k * BREAKPOINTS of every component k of `scales` = (means, variances) [R, K] (p's
    components and, for a KL, q's), clamped to p's range m_j +- REACH s_j. The one mixture
    quadrature of the package (the module docstring gives its measured error)."""
    x, a = (torch.as_tensor(t, dtype=torch.float64, device=means.device) for t in _legendre(nodes))
    offsets = torch.tensor(BREAKPOINTS, dtype=torch.float64, device=means.device)
    sd = variances.sqrt()
    lo = (means - REACH * sd).amin(-1, keepdim=True)
    hi = (means + REACH * sd).amax(-1, keepdim=True)
    cm, cv = scales
    cuts = (cm.unsqueeze(-1) + cv.sqrt().unsqueeze(-1) * offsets).flatten(-2)  # [R, K * P]
    cuts = torch.cat([lo, torch.minimum(torch.maximum(cuts, lo), hi), hi], -1).sort(-1).values
    half = (cuts[..., 1:] - cuts[..., :-1]) / 2  # [R, I]
    y = (cuts[..., 1:] - half).unsqueeze(-1) + half.unsqueeze(-1) * x  # [R, I, Q]
    log_p = mixture_logpdf(y.flatten(1), weights.unsqueeze(1), means.unsqueeze(1),
                           variances.unsqueeze(1)).view(y.shape)
    return (half.unsqueeze(-1) * a * log_p.exp() * f(y, log_p)).sum((-1, -2))


def _mixture_entropy_bits(w: Tensor, m: Tensor, v: Tensor, nodes: int = GL_NODES) -> Tensor:
    """Differential entropy in bits of mixture rows [R, J] -> [R] (no checks)."""
    return -_integrate(w, m, v, lambda y, log_p: log_p, (m, v), nodes) / LN2


def _mixture_kl_bits(bw: Tensor, bm: Tensor, bv: Tensor, qw: Tensor, qm: Tensor, qv: Tensor,
                     nodes: int = GL_NODES) -> Tensor:
    """KL(p || q) in bits for mixture rows p [R, J], q [R, K] -> [R] (no checks)."""
    def log_ratio(y: Tensor, log_p: Tensor) -> Tensor:
        log_q = mixture_logpdf(y.flatten(1), qw.unsqueeze(1), qm.unsqueeze(1), qv.unsqueeze(1)).view(y.shape)
        return log_p - log_q

    return _integrate(bw, bm, bv, log_ratio, (torch.cat([bm, qm], -1), torch.cat([bv, qv], -1)), nodes) / LN2


def _rows_of(*parts: Tensor) -> tuple[list[Tensor], torch.Size]:
    """Each [..., J_i] flattened to [R, J_i] over the broadcast leading shape."""
    lead = torch.broadcast_shapes(*(t.shape[:-1] for t in parts))
    return [t.expand(*lead, t.shape[-1]).reshape(-1, t.shape[-1]) for t in parts], lead


def mixture_entropy_bits(weights, means, variances, *, nodes: int = GL_NODES) -> Tensor:
    """Differential entropy in bits of sum_j w_j N(m_j, v_j) (mixture [..., J] -> [...]): -E_p[log2 p]
    by the one mixture quadrature (`_integrate`, `nodes` Gauss-Legendre nodes per interval)."""
    positive_int("nodes", nodes, "Gauss-Legendre nodes per interval")
    w, m, v = _mixture("", weights, means, variances)
    (w, m, v), lead = _rows_of(w, m, v)
    return _mixture_entropy_bits(w, m, v, nodes).view(lead)


def mixture_kl_bits(p_weights, p_means, p_variances, q_weights, q_means, q_variances, *,
                    nodes: int = GL_NODES) -> Tensor:
    """KL(p || q) in bits between univariate mixtures p [..., J] and q [..., K] (K = 1: a Gaussian):
    E_p[log2 p - log2 q] by the one mixture quadrature (`_integrate`), breakpoints at p's and q's
    components."""
    positive_int("nodes", nodes, "Gauss-Legendre nodes per interval")
    pw, pm, pv = _mixture("p_", p_weights, p_means, p_variances)
    qw, qm, qv = _mixture("q_", q_weights, q_means, q_variances)
    (pw, pm, pv, qw, qm, qv), lead = _rows_of(pw, pm, pv, qw, qm, qv)
    return _mixture_kl_bits(pw, pm, pv, qw, qm, qv, nodes).view(lead)


# Per-position bits of a model's predictive against the exact one, in the heads' layout [..., 3J]
# (weights, means, variances): what the metric table's `continuous` functions read (issue 41;
# scoring/continuous.py averages them; the module docstring there says what each is).

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
