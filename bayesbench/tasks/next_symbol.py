"""What the next-symbol tunnels (sticky, markov) share: V symbols, L tokens, and batches where
position t predicts x_{t+1} with a closed-form predictive."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..checks import int_at_least
from .base import IGNORE_INDEX, Batch, Task


@dataclass(frozen=True)
class NextSymbolTask(Task):
    """A chain over V symbols of L tokens; subclasses add their prior's fields and `sample`."""

    V: int = 8
    L: int = 50

    def __post_init__(self) -> None:
        int_at_least("V", self.V, 2)
        int_at_least("L", self.L, 2, "one prediction needs two tokens")
        self.check_size()

    @property
    def vocab_size(self) -> int:
        return self.V

    @property
    def num_classes(self) -> int:
        return self.V

    @property
    def seq_len(self) -> int:
        return self.L


def next_symbol_batch(x: torch.Tensor, predictive: torch.Tensor, latents: dict) -> Batch:
    """A next-symbol batch: positions 0..L-2 predict x[t+1] with the given exact predictive."""
    B, L = x.shape
    mask = torch.ones((B, L), dtype=torch.bool, device=x.device)
    mask[:, -1] = False
    targets = torch.full((B, L), IGNORE_INDEX, dtype=torch.long, device=x.device)
    targets[:, :-1] = x[:, 1:]
    posterior = predictive.clone()
    posterior[:, -1] = 0.0
    return Batch(x, mask, targets, posterior, latents)
