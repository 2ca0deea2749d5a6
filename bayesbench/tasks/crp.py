"""Chinese restaurant process (docs/tasks.md#crp--chinese-restaurant-process): new symbols keep
arriving. Each sequence seats L customers by the CRP with concentration theta (a customer joins
table k with probability n_k / (n + theta), opens a new table with probability theta / (n + theta));
a token is its table's label in order of opening, the tables from the V-th on sharing label V - 1
(the vocabulary cap). Position t predicts x_{t+1} with the exact predictive under that labelling
(`oracle.crp_predictive`): the cap's mass, a new table once the labels run out plus the overflow
tables' own customers, is (n_{V-1} + theta) / (n + theta) on label V - 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..oracle.crp import check_crp_settings, crp_predictive, crp_predictive_reference
from .base import Batch, batch_device, check_batch_size, check_fits
from .next_symbol import NextSymbolTask, next_symbol_batch
from .registry import register_task


@register_task("crp")
@dataclass(frozen=True)
class CRPTask(NextSymbolTask):
    """Chinese restaurant process labels over a vocabulary capped at V, L customers, concentration theta."""

    V: int = 8
    L: int = 32
    theta: float = 1.0

    name = "crp"
    #: The first scored position sees x_0, always label 0 (the first table): nothing about the
    #: seating yet; its posterior is the same for every sequence (tasks/check.py).
    first_scored_given = "nothing"

    def __post_init__(self) -> None:
        check_crp_settings(self.V, self.theta)
        super().__post_init__()

    def sequence_bytes(self, dtype: torch.dtype = torch.float32) -> int:
        """Posterior [L, V], the tables [L] and the oracle's counts [L, V] (float64)."""
        return super().sequence_bytes(dtype) + (self.L + self.L * self.V) * 8

    def brute_force_posterior(self, batch: Batch) -> torch.Tensor:
        """The predictive recomputed by a plain pass per sequence (`oracle.crp_predictive_reference`)."""
        return crp_predictive_reference(batch.tokens.cpu(), self.V, self.theta)

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        B, V, L = check_batch_size(batch_size), self.V, self.L
        dev = batch_device(generator, device)
        check_fits(self, B, dev, dtype)
        # Seat customers at tables numbered in opening order: customer t opens a new table with
        # probability theta / (t + theta), else sits with a uniformly chosen earlier customer
        # (table k with probability n_k / (t + theta): the CRP, drawn without its predictive).
        table = torch.zeros((B, L), dtype=torch.long, device=dev)
        opened = torch.ones(B, dtype=torch.long, device=dev)  # customer 0 opened table 0
        for t in range(1, L):  # loop over time, vectorised over the batch
            u = torch.rand((2, B), generator=generator, device=dev, dtype=torch.float64)
            new = u[0] * (t + self.theta) < self.theta
            earlier = (u[1] * t).long().clamp(max=t - 1)
            table[:, t] = torch.where(new, opened, table.gather(1, earlier.unsqueeze(1)).squeeze(1))
            opened = opened + new.long()
        x = table.clamp(max=V - 1)  # labels in opening order; tables from the V-th on share V - 1
        pred = crp_predictive(x, V, self.theta, dtype=dtype, check=False)
        return next_symbol_batch(x, pred, {"tables": table})
