"""Variable-order Markov chain (docs/tasks.md#vomc--variable-order-markov-chain; Zhou, Tian and
Diggavi, "Transformers learn variable-order Markov chains in-context", arXiv 2410.05493): each
sequence draws a context tree of depth at most D from the context-tree-weighting prior (every node
above depth D is a leaf with probability `leaf_prob`) and a next-symbol distribution
theta_s ~ Dirichlet(alpha) for each leaf s (alpha = 1/2: Krichevsky-Trofimov). The first D
symbols are uniform (the initial context); every later symbol is drawn from the leaf its
preceding symbols reach. Position t (from max(D, 1) - 1 on) predicts x_{t+1} with the exact Bayes
mixture over trees and leaf distributions, context-tree weighting (Willems, Shtarkov and Tjalkens
1995; `oracle.ctw_predictive`). Depth 0 is a single leaf: an i.i.d. Dirichlet-categorical
sequence (a Polya urn).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..checks import int_at_least
from ..oracle.ctw import check_ctw_settings, ctw_predictive, ctw_predictive_reference, node_count
from ._random import dirichlet
from .base import IGNORE_INDEX, Batch, batch_device, check_batch_size, check_fits
from .markov_k import sample_chain
from .next_symbol import NextSymbolTask, next_symbol_batch
from .registry import register_task


def leaf_table(leaf: torch.Tensor, theta: torch.Tensor, V: int, depth: int) -> torch.Tensor:
    """[B, V^D, V]: for each full context c = sum_{i<D} x_{t-1-i} V^i, the distribution of the
    leaf it reaches, the shallowest node on its path flagged a leaf (leaf [B, N] bool, theta
    [B, N, V]); the chain is then an order-D chain with this table."""
    B = leaf.shape[0]
    c = torch.arange(V**depth, device=leaf.device)
    path = torch.stack([node_count(V, d - 1) + c % V**d if d > 0 else torch.zeros_like(c)
                        for d in range(depth + 1)], 1)  # [V^D, D+1]: the context's node at each depth
    first = leaf[:, path].long().argmax(-1)  # [B, V^D]: the depth of the shallowest leaf
    node = path.unsqueeze(0).expand(B, -1, -1).gather(2, first.unsqueeze(-1))  # [B, V^D, 1]
    return theta.gather(1, node.expand(B, V**depth, V))


@register_task("vomc")
@dataclass(frozen=True)
class VariableOrderMarkovTask(NextSymbolTask):
    """Variable-order Markov chain over V symbols, L tokens, context trees of depth <= `depth`."""

    V: int = 2
    L: int = 32
    depth: int = 2
    alpha: float = 0.5
    leaf_prob: float = 0.5

    name = "vomc"

    def __post_init__(self) -> None:
        check_ctw_settings(self.V, self.depth, self.alpha, self.leaf_prob)
        super().__post_init__()
        if self.L < self.depth + 1:
            int_at_least("L", self.L, self.depth + 1, f"depth {self.depth} needs {self.depth + 1} tokens for one "
                                                       "prediction")

    @property
    def first_scored_given(self) -> str:
        """What the first scored position legitimately conditions on (tasks/check.py): nothing for
        depth >= 1 (it sees only the uniform initial context); at depth 0 it sees x_0, the first
        draw of the urn (one position's evidence), so the tokens up to it."""
        return "nothing" if self.depth >= 1 else "tokens"

    def sequence_bytes(self, dtype: torch.dtype = torch.float32) -> int:
        """Posterior [L, V], the tree's leaf flags and distributions and the oracle's per-node
        counts and logs (float64), and the [L, D + 1] context paths."""
        nodes = node_count(self.V, self.depth)
        return super().sequence_bytes(dtype) + (nodes * (2 * self.V + 3) + self.L * (self.depth + 1 + self.V)) * 8

    def brute_force_posterior(self, batch: Batch) -> torch.Tensor:
        """The posterior [B, L, V] recomputed from scratch at every position: the root's weighted
        probability of the prefix followed by each candidate symbol, from counts, in plain float64
        (`oracle.ctw_predictive_reference`; tasks/check.py compares it with the batch's)."""
        return ctw_predictive_reference(batch.tokens.cpu(), self.V, self.depth, self.alpha, self.leaf_prob)

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        B, V, L, D = check_batch_size(batch_size), self.V, self.L, self.depth
        dev = batch_device(generator, device)
        check_fits(self, B, dev, dtype)
        N = node_count(V, D)
        # Each node is a leaf with probability leaf_prob (depth D: always); the leaf a context
        # reaches is the shallowest leaf on its path (nodes below a leaf are never reached).
        leaf = torch.rand((B, N), generator=generator, device=dev, dtype=torch.float64) < self.leaf_prob
        leaf[:, node_count(V, D - 1) if D > 0 else 0 :] = True
        theta = dirichlet(self.alpha, (B, N, V), generator, dev, torch.float64)
        x = torch.empty((B, L), dtype=torch.long, device=dev)
        x[:, :D] = torch.randint(0, V, (B, D), generator=generator, device=dev)
        sample_chain(leaf_table(leaf, theta, V, D), x, D, generator)
        pred = ctw_predictive(x, V, D, self.alpha, self.leaf_prob, dtype=dtype, check=False)
        batch = next_symbol_batch(x, pred, {"leaf": leaf, "theta": theta.to(dtype)})
        start = max(D, 1) - 1  # the first position with a full context
        batch.mask[:, :start] = False
        batch.targets[:, :start] = IGNORE_INDEX
        batch.posterior[:, :start] = 0.0
        return batch
