"""In-context Markov chain (docs/science.md#sticky-chain-and-in-context-markov-chain; Paper II,
Sec. 7.2): each sequence draws a V x V transition matrix with Dirichlet(alpha) rows; position t
predicts x_{t+1} with the exact predictive
p(j | i, history) = (alpha + N_ij) / (V alpha + N_i) (`oracle.markov_predictive`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..checks import positive_number
from ..oracle import markov_predictive
from ._random import categorical, dirichlet
from .base import Batch, batch_device, check_batch_size, check_fits
from .next_symbol import NextSymbolTask, next_symbol_batch
from .registry import register_task


@register_task("markov")
@dataclass(frozen=True)
class MarkovTask(NextSymbolTask):
    """In-context Markov chain over V symbols, L tokens, rows ~ Dirichlet(alpha)."""

    V: int = 5
    L: int = 50
    alpha: float = 1.0

    name = "markov"

    def __post_init__(self) -> None:
        super().__post_init__()
        positive_number("alpha", self.alpha, "the Dirichlet prior's concentration")

    def sequence_bytes(self, dtype: torch.dtype = torch.float32) -> int:
        """Posterior [L, V], the transition matrix [V, V] and the oracle's counts [L, V] in float64."""
        return super().sequence_bytes(dtype) + (self.V * self.V + self.L * self.V) * 8

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        B, V, L = check_batch_size(batch_size), self.V, self.L
        dev = batch_device(generator, device)
        check_fits(self, B, dev, dtype)
        trans = dirichlet(self.alpha, (B, V, V), generator, dev, torch.float64)
        x = torch.empty((B, L), dtype=torch.long, device=dev)
        x[:, 0] = torch.randint(0, V, (B,), generator=generator, device=dev)
        rows = torch.arange(B, device=dev)
        for t in range(1, L):  # loop over time, vectorised over the batch
            x[:, t] = categorical(trans[rows, x[:, t - 1]], generator)
        pred = markov_predictive(x, V, self.alpha, dtype=dtype, check=False)  # x in range by construction
        return next_symbol_batch(x, pred, {"trans": trans.to(dtype)})
