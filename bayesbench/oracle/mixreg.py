"""Exact predictives of linear regression whose weights come from a mixture of Gaussians (groundwork
for issue 41; Panwar et al. 2024's prior).

Each sequence: a component j ~ pi, w ~ N(m_j, D_j) (D_j = s_j^2 I, or diagonal; a zero variance
pins that coordinate to m_j, e.g. a sparse component with a fixed support), x_k ~ N(0, I_d),
y_k = w . x_k + eps_k, eps_k ~ N(0, sigma^2). The predictive of y_k given x_k and the pairs before
k is the Gaussian mixture sum_j p(j | pairs before k) N(mean_jk, var_jk): each component's own
conjugate predictive (as in `linreg`), weighted by its posterior probability
p(j | ...) ∝ pi_j p(y_<k | x_<k, j), the marginal likelihood taken in log space as the sum of the
component's one-step log predictive densities (the chain rule).

Computed and returned in float64.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..checks import positive_number
from .gaussian_bits import check_weights, normal_logpdf
from .linreg import check_xy, gaussian_prior_predictive
from .validate import require_float, require_tensor


def check_mixture_prior(weights: Tensor, means: Tensor, variances: Tensor, d: int) -> tuple[Tensor, Tensor, Tensor]:
    """weights [J], means [J, d], variances [J] (isotropic) or [J, d] (diagonal), float64 out."""
    for name, t in (("weights", weights), ("means", means), ("variances", variances)):
        require_tensor(name, t)
        require_float(name, t)
    if weights.dim() != 1:
        raise ValueError(f"weights must have shape [J] (one weight per component), got {list(weights.shape)}")
    w = check_weights("weights", weights)
    J = w.shape[0]
    if tuple(means.shape) != (J, d):
        raise ValueError(f"means must have shape [J, d] = {[J, d]} (J = len(weights), d = the features of x), "
                         f"got {list(means.shape)}")
    if tuple(variances.shape) not in ((J,), (J, d)):
        raise ValueError(f"variances must have shape [J] = {[J]} (s_j^2 I) or [J, d] = {[J, d]} (diagonal), "
                         f"got {list(variances.shape)}")
    for name, t in (("means", means), ("variances", variances)):
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} must be finite (no NaN or inf)")
    if bool((variances < 0).any()):
        raise ValueError(f"variances must be >= 0 (a prior variance; 0 pins a coordinate), found "
                         f"{variances[variances < 0].flatten()[0].item()!r}")
    v = variances.double()
    if v.dim() == 1:
        v = v.unsqueeze(-1).expand(J, d)
    return w, means.double(), v


def mixreg_predictive(x: Tensor, y: Tensor, weights: Tensor, means: Tensor, variances: Tensor,
                      sigma: float) -> tuple[Tensor, Tensor, Tensor]:
    """Predictive of every y_k under the mixture prior sum_j weights_j N(means_j, variances_j).

    Args:
        x: [B, n, d]; y: [B, n]; weights: [J] in [0, 1] summing to 1; means: [J, d];
        variances: [J] (s_j^2) or [J, d] (diagonal), >= 0; sigma: noise standard deviation (> 0).

    Returns:
        (post [B, n, J], mean [B, n, J], var [B, n, J]), float64: y_k | context ~
        sum_j post[:, k, j] N(mean[:, k, j], var[:, k, j]).
    """
    sigma = positive_number("sigma", sigma)
    x, y = check_xy(x, y)
    B, n, d = x.shape
    w, m, v = check_mixture_prior(weights, means, variances, d)
    J = w.shape[0]
    xj = x.unsqueeze(1).expand(B, J, n, d).reshape(B * J, n, d)
    yj = y.unsqueeze(1).expand(B, J, n).reshape(B * J, n)
    mean, var = gaussian_prior_predictive(xj, yj, m.to(x.device).repeat(B, 1), v.to(x.device).repeat(B, 1), sigma)
    mean, var = (t.reshape(B, J, n).transpose(1, 2) for t in (mean, var))
    return _posterior(w.to(x.device), y, mean, var), mean, var


def _posterior(w: Tensor, y: Tensor, mean: Tensor, var: Tensor) -> Tensor:
    """p(j | pairs before k) [B, n, J] from the components' one-step predictives (chain rule)."""
    loglik = normal_logpdf(y.unsqueeze(-1), mean, var)
    before = torch.cat([torch.zeros_like(loglik[:, :1]), loglik[:, :-1].cumsum(1)], 1)
    logw = torch.where(w > 0, w.log(), -math.inf)
    return torch.softmax(before + logw, -1)


def mixreg_predictive_reference(x: Tensor, y: Tensor, weights: Tensor, means: Tensor, variances: Tensor,
                                sigma: float) -> tuple[Tensor, Tensor, Tensor]:
    """Plain Gaussian conditioning, per position k and component j (float64; checks as
    `mixreg_predictive`): (y_<k, y_k) ~ N(X m_j, X D_j X' + sigma^2 I); the predictive is the
    conditional of y_k, the weight pi_j N(y_<k; X_<k m_j, K_j) normalised, K_j's log-determinant
    by slogdet."""
    sigma = positive_number("sigma", sigma)
    x, y = check_xy(x, y)
    B, n, d = x.shape
    w, m, v = check_mixture_prior(weights, means, variances, d)
    J = w.shape[0]
    post, mean, var = (torch.empty((B, n, J), dtype=torch.float64, device=x.device) for _ in range(3))
    for j in range(J):
        mj, Dj = m[j].to(x.device), v[j].to(x.device)
        for k in range(n):
            X, xk = x[:, :k], x[:, k]
            r = y[:, :k] - X @ mj
            K = (X * Dj) @ X.transpose(1, 2) + sigma**2 * torch.eye(k, dtype=torch.float64, device=x.device)
            c = (X * Dj) @ xk.unsqueeze(-1)  # cov(y_<k, y_k) [B, k, 1]
            sol = torch.linalg.solve(K, torch.cat([r.unsqueeze(-1), c], -1))
            mean[:, k, j] = xk @ mj + (c[..., 0] * sol[..., 0]).sum(-1)
            var[:, k, j] = (xk * Dj * xk).sum(-1) + sigma**2 - (c[..., 0] * sol[..., 1]).sum(-1)
            logdet = torch.linalg.slogdet(K)[1]
            loglik = -0.5 * (k * math.log(2 * math.pi) + logdet + (r * sol[..., 0]).sum(-1))
            post[:, k, j] = loglik + (math.log(w[j]) if w[j] > 0 else -math.inf)
    return torch.softmax(post, -1), mean, var
