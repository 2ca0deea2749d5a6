"""Brute-force Bayes for the continuous oracles' tests (tests/oracle/test_linreg.py, test_mixreg.py):
self-normalised importance sampling of the latent weight vector from its prior, at float64, with
the Monte Carlo standard error of every estimate (import as `from importance import ...`)."""

from __future__ import annotations

import math

import torch


def regression_data(B: int, n: int, d: int, tau: float, sigma: float, seed: int):
    """x [B, n, d] ~ N(0, I), w [B, d] ~ N(0, tau^2 I), y = x w + N(0, sigma^2): float64."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, n, d, generator=g, dtype=torch.float64)
    w = tau * torch.randn(B, d, generator=g, dtype=torch.float64)
    y = (x @ w.unsqueeze(-1)).squeeze(-1) + sigma * torch.randn(B, n, generator=g, dtype=torch.float64)
    return x, y


def importance_predictive(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, k: int, sigma: float,
                          points: torch.Tensor) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Estimates for ONE sequence (x [n, d], y [n]) at position k from prior samples w [N, d]:
    {"density": (p(points | context) [P], standard errors [P]), "mean": (E[y_k | context], se)}.

    Weights W_i ∝ prod_{j<k} N(y_j; w_i . x_j, sigma^2); an estimate sum_i W_i f_i has the
    delta-method standard error sqrt(sum_i W_i^2 (f_i - estimate)^2).
    """
    logl = (-0.5 * ((y[:k] - w @ x[:k].T) / sigma) ** 2).sum(-1)  # [N] (constants cancel)
    W = torch.softmax(logl, 0)
    mu = w @ x[k]  # [N]: each sample's mean of y_k
    f = torch.exp(-0.5 * ((points.unsqueeze(0) - mu.unsqueeze(1)) / sigma) ** 2) / (sigma * math.sqrt(2 * math.pi))
    out = {}
    for name, vals in (("density", f), ("mean", mu.unsqueeze(1))):
        est = (W.unsqueeze(1) * vals).sum(0)
        se = ((W.unsqueeze(1) ** 2) * (vals - est) ** 2).sum(0).sqrt()
        out[name] = (est, se)
    return out
