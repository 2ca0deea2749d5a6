"""Random draws that honour a `torch.Generator` on any device.

`torch.distributions` cannot take a generator, so Gamma, Beta and Dirichlet draws are built here
from uniform and normal draws (Marsaglia-Tsang rejection, vectorised: the loop runs over
rejection rounds, never over sequences). Same generator state, same numbers.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..oracle.validate import require_positive
from .base import batch_device


def uniform(shape: tuple[int, ...], generator: torch.Generator | None, device=None,
            dtype: torch.dtype = torch.float32) -> Tensor:
    """U(0, 1) draws strictly inside (0, 1), safe for logarithms."""
    dev = batch_device(generator, device)
    u = torch.rand(shape, generator=generator, device=dev, dtype=dtype)
    tiny = torch.finfo(dtype).tiny
    return u.clamp_(min=tiny)


def log_gamma(concentration: float, shape: tuple[int, ...], generator: torch.Generator | None,
              device=None, dtype: torch.dtype = torch.float64) -> Tensor:
    """log of Gamma(concentration, 1) draws (Marsaglia and Tsang, boosted when < 1).

    Kept in log space so tiny concentrations (whose draws underflow to 0) still give proper
    Dirichlet and Beta draws after normalisation.
    """
    concentration = require_positive("concentration", concentration)
    dev = batch_device(generator, device)
    if concentration == 1.0:
        return torch.log(-torch.log(uniform(shape, generator, dev, dtype)))
    boost = concentration < 1.0
    alpha = concentration + 1.0 if boost else concentration
    d = alpha - 1.0 / 3.0
    c = 1.0 / (9.0 * d) ** 0.5
    out = torch.empty(shape, device=dev, dtype=dtype)
    pending = torch.ones(shape, device=dev, dtype=torch.bool)
    while bool(pending.any()):
        x = torch.randn(shape, generator=generator, device=dev, dtype=dtype)
        u = uniform(shape, generator, dev, dtype)
        v = (1.0 + c * x) ** 3
        ok = (v > 0) & (torch.log(u) < 0.5 * x * x + d - d * v + d * torch.log(v.clamp(min=1e-300)))
        take = ok & pending
        out = torch.where(take, math.log(d) + torch.log(v.clamp(min=1e-300)), out)
        pending &= ~take
    if boost:  # Gamma(a) = Gamma(a + 1) * U^(1/a)
        out = out + torch.log(uniform(shape, generator, dev, dtype)) / concentration
    return out


def gamma(concentration: float, shape: tuple[int, ...], generator: torch.Generator | None,
          device=None, dtype: torch.dtype = torch.float64) -> Tensor:
    """Gamma(concentration, 1) draws."""
    return log_gamma(concentration, shape, generator, device, dtype).exp()


def dirichlet(concentration: float, shape: tuple[int, ...], generator: torch.Generator | None,
              device=None, dtype: torch.dtype = torch.float32) -> Tensor:
    """Symmetric Dirichlet(concentration) rows over the last dimension of `shape`."""
    return torch.softmax(log_gamma(concentration, shape, generator, device), -1).to(dtype)


def beta(a: float, b: float, shape: tuple[int, ...], generator: torch.Generator | None,
         device=None, dtype: torch.dtype = torch.float32) -> Tensor:
    """Beta(a, b) draws as X / (X + Y) with X ~ Gamma(a), Y ~ Gamma(b), in log space."""
    x = log_gamma(a, shape, generator, device)
    y = log_gamma(b, shape, generator, device)
    return torch.sigmoid(x - y).to(dtype)


def permutations(batch: int, n: int, generator: torch.Generator | None, device=None) -> Tensor:
    """`batch` independent uniformly random permutations of 0..n-1, shape [batch, n]."""
    keys = torch.rand((batch, n), generator=generator, device=batch_device(generator, device))
    return keys.argsort(dim=-1)


def categorical(probs: Tensor, generator: torch.Generator | None) -> Tensor:
    """One draw from each row of `probs` [..., C] by inverse CDF (no per-row Python loop)."""
    u = uniform(probs.shape[:-1] + (1,), generator, probs.device, probs.dtype)
    cdf = probs.cumsum(-1)
    idx = (cdf < u * cdf[..., -1:]).sum(-1)
    return idx.clamp_(max=probs.shape[-1] - 1)
