"""Sticky chain (docs/science.md#sticky-chain-and-in-context-markov-chain; Paper II, Sec. 7.2): the
next symbol repeats the current one with a per-sequence probability rho ~ Beta(a, b), else is
uniform over the other V - 1 symbols.

Position t predicts x_{t+1} from x_0..x_t; the exact predictive is
P(stay) = (a + n_stay) / (a + b + t) with the rest spread uniformly (`oracle.sticky_predictive`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..checks import positive_number
from ..oracle import sticky_predictive
from ._random import beta
from .base import Batch, batch_device, check_batch_size, check_fits
from .next_symbol import NextSymbolTask, next_symbol_batch
from .registry import register_task


@register_task("sticky")
@dataclass(frozen=True)
class StickyTask(NextSymbolTask):
    """Sticky chain over V symbols, L tokens, stickiness rho ~ Beta(a, b)."""

    V: int = 8
    L: int = 50
    a: float = 1.0
    b: float = 1.0

    name = "sticky"

    def __post_init__(self) -> None:
        super().__post_init__()
        for f in ("a", "b"):
            positive_number(f, getattr(self, f), "a parameter of the Beta prior of the stickiness")

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        B, V, L = check_batch_size(batch_size), self.V, self.L
        dev = batch_device(generator, device)
        check_fits(self, B, dev, dtype)
        rho = beta(self.a, self.b, (B, 1), generator, dev, torch.float64)
        first = torch.randint(0, V, (B, 1), generator=generator, device=dev)
        stay = torch.rand((B, L - 1), generator=generator, device=dev, dtype=torch.float64) < rho
        jump = 1 + torch.randint(0, V - 1, (B, L - 1), generator=generator, device=dev)
        step = torch.where(stay, 0, jump)  # x_{t+1} = x_t + step (mod V)
        x = (first + torch.cat([torch.zeros_like(first), step.cumsum(1)], 1)) % V
        predictive = sticky_predictive(x, V, self.a, self.b, dtype=dtype, check=False)  # x in range
        return next_symbol_batch(x, predictive, {"rho": rho.squeeze(1).to(dtype)})
