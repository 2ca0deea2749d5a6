"""A mixture of HMMs (docs/science.md#mixture-of-hmms-ginc; Xie et al. 2022, "An Explanation of
In-context Learning as Implicit Bayesian Inference", arXiv 2111.02080: GINC).

The tunnel holds M fixed HMMs (S states, V symbols; transition, emission and start rows drawn
once from Dirichlet(concentration) by `mixture_seed`, the same for every sequence of a
configuration: the "concepts"). Each sequence picks one component uniformly (GINC's prior over
its HMMs) and emits o_0..o_{L-1} from it; position t predicts o_{t+1} from o_0..o_t with the
exact Bayes predictive, the components' predictives weighted by their posteriors
(`bayesbench.oracle.hmm_mixture_predictive`). What is inferred in context is which HMM (the
concept) and its hidden state; the posterior over the component sharpens with the context.

GINC's own code (github.com/p-lambda/incontext-learning, generate_data.py) does not score this
predictive: see docs/science.md for what it does instead.

Latents: `component` [B], `states` [B, L], `weights` [B, L, M] = p(z | o_0..t) and `beliefs`
[B, L, M * S] = p(z, s_t | o_0..t) (the belief-geometry probe's target).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..checks import int_at_least, positive_int, positive_number
from ..oracle.hmm_mixture import hmm_mixture_predictive, hmm_mixture_reference
from ._random import categorical, dirichlet
from .base import Batch, batch_device, check_batch_size, check_fits
from .next_symbol import NextSymbolTask, next_symbol_batch
from .registry import register_task


@register_task("hmm_mixture")
@dataclass(frozen=True)
class HMMMixtureTask(NextSymbolTask):
    """Next-symbol prediction on one of M fixed HMMs per sequence (GINC), with the exact mixture predictive."""

    M: int = 4
    S: int = 3
    V: int = 5
    L: int = 16
    # Dirichlet(1) rows over 5 symbols give near-uniform predictives and concepts the context
    # barely tells apart in 16 tokens; sparser rows (as GINC's peaked HMMs) make both informative.
    concentration: float = 0.3
    mixture_seed: int = 0

    name = "hmm_mixture"

    def __post_init__(self) -> None:
        positive_int("M", self.M, "number of HMMs in the mixture")
        positive_int("S", self.S, "hidden states of each HMM")
        int_at_least("V", self.V, 2)
        int_at_least("L", self.L, 2, "one prediction needs two tokens")
        positive_number("concentration", self.concentration, "the Dirichlet prior of the components' rows")
        int_at_least("mixture_seed", self.mixture_seed, 0, "the seed that draws the M HMMs")
        self.check_size()

    def sequence_bytes(self, dtype: torch.dtype = torch.float32) -> int:
        """Posterior [L, V], the oracle's per-component filters and predictives [M, L, S + V] in
        float64, weights [L, M] and beliefs [L, M * S]."""
        M, S, V, L = self.M, self.S, self.V, self.L
        return super().sequence_bytes(dtype) + 8 * L * (M * (S + V) + M + M * S) + 16 * L

    def components(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(trans [M, S, S], emit [M, S, V], init [M, S], prior [M]) in float64, drawn on the CPU
        from `mixture_seed` alone: the same HMMs for every sequence, seed and device."""
        g = torch.Generator().manual_seed(self.mixture_seed)
        M, S, V, c = self.M, self.S, self.V, self.concentration
        trans = dirichlet(c, (M, S, S), g, dtype=torch.float64)
        emit = dirichlet(c, (M, S, V), g, dtype=torch.float64)
        init = dirichlet(c, (M, S), g, dtype=torch.float64)
        return trans, emit, init, torch.full((M,), 1.0 / M, dtype=torch.float64)

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        B, L, S = check_batch_size(batch_size), self.L, self.S
        dev = batch_device(generator, device)
        check_fits(self, B, dev, dtype)
        trans, emit, init, prior = (x.to(dev) for x in self.components())
        z = categorical(prior.expand(B, self.M), generator)
        s = categorical(init[z], generator)
        obs = torch.empty((B, L), dtype=torch.long, device=dev)
        states = torch.empty((B, L), dtype=torch.long, device=dev)
        for i in range(L):  # loop over time, vectorised over the batch
            if i > 0:
                s = categorical(trans[z, s], generator)
            states[:, i] = s
            obs[:, i] = categorical(emit[z, s], generator)
        pred, weights, beliefs = hmm_mixture_predictive(trans, emit, init, prior, obs, check=False)
        latents = {"component": z, "states": states, "weights": weights.to(dtype),
                   "beliefs": beliefs.reshape(B, L, self.M * S).to(dtype)}
        return next_symbol_batch(obs, pred.to(dtype), latents)

    def brute_force_posterior(self, batch: Batch) -> Tensor:
        """The predictive by the product-space forward pass (`oracle.hmm_mixture_reference`),
        which shares nothing with the sampler's path (component filters, log-space weights)."""
        trans, emit, init, prior = self.components()
        pred, _, _ = hmm_mixture_reference(trans, emit, init, prior, batch.tokens.cpu())
        pred[:, -1] = 0.0
        return pred.to(batch.tokens.device)
