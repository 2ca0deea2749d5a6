"""Exact posterior predictives of Bayesian linear regression in context (groundwork for issue 41).

Each sequence b: w ~ N(0, tau^2 I_d), x_k ~ N(0, I_d), y_k = w . x_k + eps_k, eps_k ~ N(0, sigma^2).
The predictive of y_k given x_k and the pairs before k is N(x_k . mu_{k-1}, sigma^2 + x_k' Sigma_{k-1} x_k)
with Sigma_{k-1} = (I / tau^2 + X' X / sigma^2)^-1 and mu_{k-1} = Sigma_{k-1} X' y / sigma^2 over the
first k - 1 pairs (docs/oracle.md#continuous-oracles-groundwork-for-issue-41s-tunnels).

- `linreg_predictive_reference`: those formulas, one batched solve per position, float64.
- `linreg_predictive`: all positions at once. Marginally y_1..n ~ N(X m, X D X' + sigma^2 I)
  (prior N(m, D), here m = 0, D = tau^2 I); with K = L L' (one batched Cholesky), z = L^-1 (y - X m)
  are independent N(0, 1), so y_k given y_<k is N(x_k . m + sum_{j<k} L_kj z_j, L_kk^2).
- `pool_predictive`: w drawn uniformly from a fixed pool of M vectors (Raventos et al. 2023,
  "Pretraining task diversity and the emergence of non-Bayesian in-context learning for
  regression", arXiv 2306.15063, Sec. 2): the predictive is the mixture over the pool with the
  members' posterior probabilities, all positions at once (one cumulative sum of the members'
  log-likelihoods); `pool_predictive_reference` sums each position's log-likelihoods afresh.

Inputs may be float32 or float64; everything is computed and returned in float64.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..checks import positive_number
from .gaussian_bits import normal_logpdf
from .validate import require_float, require_tensor


def check_xy(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """x [B, n, d] and y [B, n] (n >= 1 positions, d >= 1 features), finite: returned as float64."""
    require_tensor("x", x)
    require_tensor("y", y)
    require_float("x", x)
    require_float("y", y)
    if x.dim() != 3:
        raise ValueError(f"x must have shape [B, n, d] (batch, position, feature), got {list(x.shape)}")
    B, n, d = x.shape
    if n < 1:
        raise ValueError(f"x must have at least one position (n >= 1), got shape {list(x.shape)}")
    if d < 1:
        raise ValueError(f"x must have at least one feature (d >= 1), got shape {list(x.shape)}")
    if tuple(y.shape) != (B, n):
        raise ValueError(f"y must have shape [B, n] = {[B, n]} (one target per row of x), got {list(y.shape)}")
    if y.device != x.device:
        raise ValueError(f"y must be on the device of x ({x.device}), got {y.device}")
    for name, t in (("x", x), ("y", y)):
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} must be finite (no NaN or inf)")
    return x.double(), y.double()


#: Sequences per chunk of the fast path on the CPU: the batched products and Cholesky factors of
#: a chunk stay in cache (measured at B = 16384, d = 20, n = 40, one thread, under load: 1.5x to
#: 3x faster than one call on the whole batch, chunks of 64 to 2048 alike; results bit for bit
#: equal, each sequence's algebra being its own). A GPU takes the batch whole.
CPU_CHUNK = 128


def gaussian_prior_predictive(x: Tensor, y: Tensor, prior_mean: Tensor | None, prior_var: Tensor | float,
                              sigma: float) -> tuple[Tensor, Tensor]:
    """The fast path behind `linreg_predictive` and `mixreg_predictive` (no checks): prior
    w ~ N(prior_mean, diag(prior_var)) with prior_mean, prior_var [B, d] (or broadcastable; a
    zero variance pins that coordinate; a float: isotropic), float64 x [B, n, d], y [B, n]:
    (mean, var), each [B, n]. On the CPU in chunks of CPU_CHUNK sequences."""
    B = x.shape[0]
    if x.device.type != "cpu" or B <= CPU_CHUNK:
        return _gaussian_prior_predictive(x, y, prior_mean, prior_var, sigma)

    def rows(t, i: int):  # a per-sequence prior [B, d] is sliced with the batch; a shared one is not
        return t[i:i + CPU_CHUNK] if isinstance(t, Tensor) and t.dim() >= 2 and t.shape[0] == B else t

    parts = [_gaussian_prior_predictive(x[i:i + CPU_CHUNK], y[i:i + CPU_CHUNK], rows(prior_mean, i),
                                        rows(prior_var, i), sigma) for i in range(0, B, CPU_CHUNK)]
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


def _gaussian_prior_predictive(x: Tensor, y: Tensor, prior_mean: Tensor | None, prior_var: Tensor | float,
                               sigma: float) -> tuple[Tensor, Tensor]:
    B, n, _ = x.shape
    noise = torch.eye(n, dtype=x.dtype, device=x.device).mul_(sigma * sigma).expand(B, n, n)
    if isinstance(prior_var, Tensor):
        K = torch.baddbmm(noise, x * prior_var.unsqueeze(-2), x.transpose(1, 2))
    else:  # isotropic: no scaled copy of x
        K = torch.baddbmm(noise, x, x.transpose(1, 2), alpha=prior_var)
    L, info = torch.linalg.cholesky_ex(K)
    if bool((info != 0).any()):
        top = float(prior_var.max()) if isinstance(prior_var, Tensor) else prior_var
        raise ValueError(f"prior variance / sigma^2 = {top / sigma**2:.3g} is too large for float64: the covariance "
                         "X D X' + sigma^2 I of the targets is not positive definite in rounding (raise sigma or "
                         "lower the prior's scale)")
    r = y if prior_mean is None else y - (x @ prior_mean.unsqueeze(-1)).squeeze(-1)
    z = torch.linalg.solve_triangular(L, r.unsqueeze(-1), upper=False).squeeze(-1)
    sd = L.diagonal(dim1=-2, dim2=-1)
    # y_k - (prior_k + sum_{j<k} L_kj z_j) = L_kk z_k: the mean without a second product with L
    return y - sd * z, sd.square()


def linreg_predictive(x: Tensor, y: Tensor, tau: float, sigma: float) -> tuple[Tensor, Tensor]:
    """Posterior predictive of every y_k given x_k and (x_j, y_j), j < k, under w ~ N(0, tau^2 I).

    Args:
        x: [B, n, d] inputs; y: [B, n] targets (float32 or float64, finite).
        tau: prior standard deviation of each weight (> 0); sigma: noise standard deviation (> 0).

    Returns:
        (mean [B, n], var [B, n]) in float64: y_k | context ~ N(mean[:, k], var[:, k]).
    """
    tau, sigma = positive_number("tau", tau), positive_number("sigma", sigma)
    x, y = check_xy(x, y)
    return gaussian_prior_predictive(x, y, None, tau * tau, sigma)


def linreg_predictive_reference(x: Tensor, y: Tensor, tau: float, sigma: float) -> tuple[Tensor, Tensor]:
    """The textbook conjugate formulas, one batched solve per position k (float64; checks as
    `linreg_predictive`): Lambda = I / tau^2 + X'X / sigma^2 over the first k - 1 pairs,
    mean = x_k . Lambda^-1 X'y / sigma^2, var = sigma^2 + x_k . Lambda^-1 x_k."""
    tau, sigma = positive_number("tau", tau), positive_number("sigma", sigma)
    x, y = check_xy(x, y)
    B, n, d = x.shape
    eye = torch.eye(d, dtype=torch.float64, device=x.device)
    mean = torch.empty((B, n), dtype=torch.float64, device=x.device)
    var = torch.empty_like(mean)
    for k in range(n):
        X, Y, xk = x[:, :k], y[:, :k], x[:, k]
        precision = eye / tau**2 + X.transpose(1, 2) @ X / sigma**2
        rhs = torch.stack([(X.transpose(1, 2) @ Y.unsqueeze(-1)).squeeze(-1) / sigma**2, xk], -1)  # [B, d, 2]
        sol = torch.linalg.solve(precision, rhs)
        mean[:, k] = (xk * sol[..., 0]).sum(-1)
        var[:, k] = sigma**2 + (xk * sol[..., 1]).sum(-1)
    return mean, var


def pool_predictive(x: Tensor, y: Tensor, pool: Tensor, sigma: float) -> tuple[Tensor, Tensor, float]:
    """Predictive of every y_k when w is drawn uniformly from a finite pool (Raventos et al. 2023).

    Args:
        x: [B, n, d]; y: [B, n]; pool: [M, d] (one pool shared by all sequences) or [B, M, d];
        sigma: noise standard deviation (> 0).

    Returns:
        (weights [B, n, M], means [B, n, M], var): y_k | context ~ sum_m weights[:, k, m]
        N(means[:, k, m], var), with weights the members' posterior probabilities given the pairs
        before k (uniform at k = 0), means x_k . w_m and var = sigma^2. Float64.
    """
    sigma = positive_number("sigma", sigma)
    x, y = check_xy(x, y)
    B, n, d = x.shape
    require_tensor("pool", pool)
    require_float("pool", pool)
    if pool.dim() == 2:
        pool = pool.unsqueeze(0)
    if pool.dim() != 3 or pool.shape[0] not in (1, B) or pool.shape[2] != d or pool.shape[1] < 1:
        raise ValueError(f"pool must have shape [M, d] or [B, M, d] with M >= 1, d = {d} (the features of x) "
                         f"and B = {B}, got {list(pool.shape)}")
    if not bool(torch.isfinite(pool).all()):
        raise ValueError("pool must be finite (no NaN or inf)")
    means = x @ pool.double().transpose(1, 2)  # [B, n, M]
    var = sigma * sigma
    loglik = normal_logpdf(y.unsqueeze(-1), means, torch.tensor(var, dtype=torch.float64))
    before = torch.cat([torch.zeros_like(loglik[:, :1]), loglik[:, :-1].cumsum(1)], 1)  # log p(pairs before k | w_m)
    return torch.softmax(before, -1), means, var



def pool_predictive_reference(x: Tensor, y: Tensor, pool: Tensor, sigma: float) -> tuple[Tensor, Tensor, float]:
    """The plain float64 form of `pool_predictive` (same arguments, checks and returns), one
    position at a time: log p(pairs before k | w_m) = sum_{j<k} log N(y_j; x_j . w_m, sigma^2)
    summed afresh for each k, the weights their softmax over the pool (Bayes with the uniform
    prior over its M members), the means x_k . w_m."""
    weights, means, var = pool_predictive(x[:, :1], y[:, :1], pool, sigma)  # the checks of the fast path
    x, y = check_xy(x, y)
    B, n, d = x.shape
    members = (pool.unsqueeze(0) if pool.dim() == 2 else pool).double().expand(B, -1, d)  # [B, M, d]
    weights = torch.empty((B, n, members.shape[1]), dtype=torch.float64, device=x.device)
    means = torch.empty_like(weights)
    noise = torch.tensor(var, dtype=torch.float64, device=x.device)
    for k in range(n):
        fit = torch.einsum("bjd,bmd->bjm", x[:, :k], members)  # [B, k, M]
        loglik = normal_logpdf(y[:, :k].unsqueeze(-1), fit, noise).sum(1)  # [B, M]
        weights[:, k] = torch.softmax(loglik, -1)
        means[:, k] = torch.einsum("bd,bmd->bm", x[:, k], members)
    return weights, means, var
