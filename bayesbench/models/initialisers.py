"""Per-member initialisers: draws on the CPU in float32 from one member's own generator.

`EnsembleModel.init_members` hands each module's `reset_member(e, generator)` the generator of
member e, so the numbers a seed yields do not depend on the device or on the other members.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def normal(shape: tuple[int, ...], std: float, generator: torch.Generator) -> Tensor:
    """N(0, std^2) draws (the embeddings' and linear maps' default)."""
    return torch.randn(shape, generator=generator, dtype=torch.float32) * std


def uniform(shape: tuple[int, ...], bound: float, generator: torch.Generator) -> Tensor:
    """U(-bound, bound) draws."""
    return (torch.rand(shape, generator=generator, dtype=torch.float32) * 2 - 1) * bound


def glorot_uniform(shape: tuple[int, int], generator: torch.Generator) -> Tensor:
    """U(-r, r), r = sqrt(6 / (fan_in + fan_out)) (Keras' default kernel init for RNNs)."""
    return uniform(shape, math.sqrt(6.0 / (shape[0] + shape[1])), generator)


def orthogonal(n: int, generator: torch.Generator) -> Tensor:
    """A Haar-random n x n orthogonal matrix: QR of a Gaussian with the sign of diag(R) fixed
    (what torch.nn.init.orthogonal_ does; the QR runs in float64 so Q^T Q = I to ~1e-7)."""
    q, r = torch.linalg.qr(torch.randn((n, n), generator=generator, dtype=torch.float32).double())
    return (q * torch.sign(torch.diagonal(r)).unsqueeze(0)).float()
