"""In-context Markov chain (SPEC.md 3.3): each sequence draws a V x V transition matrix with
Dirichlet(alpha) rows; position t predicts x_{t+1} with the exact predictive
p(j | i, history) = (alpha + N_ij) / (V alpha + N_i) (`oracle.markov_predictive`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..oracle import markov_predictive
from ._random import categorical, dirichlet
from .base import Batch, Task, batch_device, check_batch_size
from .registry import register_task
from .sticky import counting_batch


@register_task("markov")
@dataclass(frozen=True)
class MarkovTask(Task):
    """In-context Markov chain over V symbols, L tokens, rows ~ Dirichlet(alpha)."""

    V: int = 5
    L: int = 50
    alpha: float = 1.0

    name = "markov"

    def __post_init__(self) -> None:
        if isinstance(self.V, bool) or not isinstance(self.V, int) or self.V < 2:
            raise ValueError(f"V must be an integer >= 2, got {self.V!r}")
        if isinstance(self.L, bool) or not isinstance(self.L, int) or self.L < 2:
            raise ValueError(f"L must be an integer >= 2 (one prediction needs two tokens), got {self.L!r}")
        if not float(self.alpha) > 0:
            raise ValueError(f"alpha must be > 0 (Dirichlet prior), got {self.alpha!r}")

    @property
    def vocab_size(self) -> int:
        return self.V

    @property
    def num_classes(self) -> int:
        return self.V

    @property
    def seq_len(self) -> int:
        return self.L

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        B, V, L = check_batch_size(batch_size), self.V, self.L
        dev = batch_device(generator, device)
        trans = dirichlet(self.alpha, (B, V, V), generator, dev, torch.float64)
        x = torch.empty((B, L), dtype=torch.long, device=dev)
        x[:, 0] = torch.randint(0, V, (B,), generator=generator, device=dev)
        rows = torch.arange(B, device=dev)
        for t in range(1, L):  # loop over time, vectorised over the batch
            x[:, t] = categorical(trans[rows, x[:, t - 1]], generator)
        pred = markov_predictive(x, V, self.alpha, dtype=dtype)
        return counting_batch(x, pred, {"trans": trans.to(dtype)})
