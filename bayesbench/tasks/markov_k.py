"""Order-k in-context Markov chain (docs/tasks.md#markov-k--order-k-in-context-markov-chain;
Edelman, Edelman, Goel, Malach and Tsilivis 2024, "The Evolution of Statistical Induction Heads:
In-Context Learning Markov Chains", arXiv 2402.11004): each sequence draws a fresh order-k chain,
one next-symbol distribution T_c ~ Dirichlet(alpha) for each of the V^k contexts c; the first k
symbols are uniform. Position t (from k - 1 on) predicts x_{t+1} with the exact predictive
p(j | x_{..t}) = (alpha + N_{c_t, j}) / (V alpha + N_{c_t}) (`oracle.markov_k_predictive`).
Positions before k - 1 (a symbol of the uniform initial context) are not scored. Order 1 is the
`markov` tunnel's process and posterior.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..checks import int_at_least, positive_number
from ..oracle.markov_k import markov_k_predictive, markov_k_predictive_reference
from ._random import categorical, dirichlet
from .base import IGNORE_INDEX, Batch, batch_device, check_batch_size, check_fits
from .next_symbol import NextSymbolTask, next_symbol_batch
from .registry import register_task


def sample_chain(table: torch.Tensor, x: torch.Tensor, k: int, generator: torch.Generator | None) -> None:
    """Fill x[:, k:] in place with an order-k chain: x_t ~ table[b, sum_{i<k} x_{t-1-i} V^i] (table
    [B, V^k, V] rows; x[:, :k] given). A loop over time, vectorised over the batch; k = 0 draws
    every symbol from the single row table[b, 0]."""
    B, L = x.shape
    V = table.shape[-1]
    rows = table.reshape(-1, V)
    first_row = torch.arange(B, device=x.device) * V**k
    for t in range(k, L):
        c = first_row.clone()
        for i in range(k):
            c += x[:, t - 1 - i] * V**i
        x[:, t] = categorical(rows.index_select(0, c), generator)


@register_task("markov-k")
@dataclass(frozen=True)
class MarkovKTask(NextSymbolTask):
    """Order-k in-context Markov chain over V symbols, L tokens, rows ~ Dirichlet(alpha)."""

    V: int = 3
    L: int = 32
    order: int = 2
    alpha: float = 1.0

    name = "markov-k"
    #: The first scored position (k - 1) sees only the uniform initial context: its posterior is
    #: the prior predictive, uniform, for every sequence (tasks/check.py, `check_validity`).
    first_scored_given = "nothing"

    def __post_init__(self) -> None:
        int_at_least("order", self.order, 1, "the chain's order k")
        positive_number("alpha", self.alpha, "the Dirichlet prior's concentration")
        int_at_least("L", self.L, self.order + 1,
                     f"order {self.order} needs {self.order + 1} tokens for one prediction")
        super().__post_init__()

    def sequence_bytes(self, dtype: torch.dtype = torch.float32) -> int:
        """Posterior [L, V], the V^k x V transition table and the oracle's [L, L] comparison (float64)."""
        return super().sequence_bytes(dtype) + (self.V**self.order * self.V + self.L * self.L + self.L * self.V) * 8

    def brute_force_posterior(self, batch: Batch) -> torch.Tensor:
        """The posterior [B, L, V] recomputed by the oracle's loop over time with a count table
        (tasks/check.py compares it with the batch's)."""
        return markov_k_predictive_reference(batch.tokens.cpu(), self.V, self.order, self.alpha)

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        B, V, L, k = check_batch_size(batch_size), self.V, self.L, self.order
        dev = batch_device(generator, device)
        check_fits(self, B, dev, dtype)
        trans = dirichlet(self.alpha, (B, V**k, V), generator, dev, torch.float64)
        x = torch.empty((B, L), dtype=torch.long, device=dev)
        x[:, :k] = torch.randint(0, V, (B, k), generator=generator, device=dev)
        sample_chain(trans, x, k, generator)
        pred = markov_k_predictive(x, V, k, self.alpha, dtype=dtype, check=False)  # x in range by construction
        batch = next_symbol_batch(x, pred, {"trans": trans.to(dtype)})
        batch.mask[:, : k - 1] = False  # a symbol of the initial context: nothing to infer
        batch.targets[:, : k - 1] = IGNORE_INDEX
        batch.posterior[:, : k - 1] = 0.0
        return batch
