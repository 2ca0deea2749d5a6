"""Data of the EM-vs-SGD experiments (Paper II, arXiv 2512.22473, section 7.2) and their Bayes floors.

Paper variant (the authors' multi-seed script, `experiments/paper2_gradient/em_vs_sgd_multiseed.py`
in vishalmisra/bayesian-wind-tunnel, built the same way, number for number):

- a chain over V = 8 symbols; row i starts as weight `self_weight` (0.3) on i and 1/d(i, j) on
  j != i, d the circular distance; the row is scaled to sum to 1 - self_weight and then
  self_weight is added on the diagonal. The diagonal therefore ends at
  self_weight + (1 - self_weight) * self_weight / (self_weight + sum_j 1/d) = 0.3498 for V = 8,
  not at 0.3 as the paper text says (`transition_matrix`);
- symbol means mu [V, 20] ~ N(0, I), drawn from a generator seeded 0 and shared by every seed
  (`means="shared"`); the variant `means="per-seed"` draws them per seed s from a generator
  seeded MEANS_PER_SEED + s, so that the seeds are independent draws of the whole problem;
- per seed s (a generator seeded s): y_0 uniform, then y_1..y_{T-1} one draw at a time from P's
  rows, then the noise; inputs x_t = mu_{y_(t-1)} + N(0, I), targets y_t, t = 1..T-1;
- the floor the authors print, H(Y_t | Y_(t-1)) = mean_i H(P[i, :]) (in nats, like the loss).

Because the model only sees noisy x's, the best possible loss is above H(Y_t | Y_(t-1)): the exact
predictive p(y_t | x_1..x_t) is a hidden-Markov filter (hidden state y_(t-1), Gaussian emission
x_t); `filter_floor` computes it, the floor a perfect model of this data reaches.

Beta-sticky variant (this project's sticky tunnel, `bayesbench.tasks.StickyTask`): B sequences of
L symbols, each with its own stickiness rho ~ Beta(a, b); inputs x_t = mu_{y_t} (noise-free, so
the exact posterior predictive of the oracle, `oracle.sticky_predictive`, is the floor).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ...checks import int_at_least

MEANS_SEED = 0  # the authors draw the symbol means from seed 0 for every run
MEANS_PER_SEED = 1_000_000  # the per-seed variant: seed s's means from MEANS_PER_SEED + s
MEANS = ("shared", "per-seed")


def means_seed(seed: int, means: str = "shared") -> int:
    """The generator seed of seed `seed`'s symbol means: MEANS_SEED for every seed ("shared", the
    authors'), or MEANS_PER_SEED + seed ("per-seed")."""
    if means not in MEANS:
        raise ValueError(f"means must be one of {MEANS}, got {means!r}")
    return MEANS_SEED if means == "shared" else MEANS_PER_SEED + int(seed)


def transition_matrix(n_symbols: int = 8, self_weight: float = 0.3) -> Tensor:
    """The authors' sticky transition matrix [V, V] (float32, as theirs); see the module docstring."""
    int_at_least("n_symbols", n_symbols, 2)
    if not 0.0 < self_weight < 1.0:
        raise ValueError(f"self_weight must be in (0, 1), got {self_weight!r}")
    i = torch.arange(n_symbols)
    gap = (i.view(-1, 1) - i.view(1, -1)).abs()
    dist = torch.minimum(gap, n_symbols - gap)
    eye = dist == 0
    w = torch.where(eye, torch.tensor(self_weight), 1.0 / dist.clamp(min=1).float())
    P = w / w.sum(1, keepdim=True) * (1 - self_weight) + eye.float() * self_weight
    return P / P.sum(1, keepdim=True)


def symbol_means(n_symbols: int = 8, d: int = 20, seed: int = MEANS_SEED) -> Tensor:
    """Symbol means mu [V, d] ~ N(0, I) from a generator seeded `seed` (MEANS_SEED: the authors')."""
    return torch.randn(n_symbols, d, generator=torch.Generator().manual_seed(int(seed)))


def conditional_entropy(P: Tensor) -> float:
    """H(Y_t | Y_(t-1)) in nats as the authors compute it: the mean over rows of H(P[i, :])
    (the chain is doubly stochastic, so this is the stationary average)."""
    P = P.double()
    return float(-(P * torch.log(P + 1e-10)).sum(1).mean())


@dataclass(frozen=True)
class ChainData:
    """One seed's training data: inputs [B, N, d], targets [B, N] (-100 = not scored), and the
    exact predictive [B, N, V] of a perfect model of this data (its floor)."""

    inputs: Tensor
    targets: Tensor
    predictive: Tensor

    def floor(self) -> float:
        """Cross-entropy (nats) of the exact predictive on the realised targets: the lowest
        training loss any model can reach in expectation."""
        mask = self.targets >= 0
        p = self.predictive.double().gather(-1, self.targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        return float(-torch.where(mask, p, torch.ones_like(p)).log().sum() / mask.sum())


def sample_chain(seed: int, T: int, P: Tensor, mu: Tensor) -> tuple[Tensor, Tensor]:
    """The authors' draw for one seed: symbols y [T] then inputs x [T-1, d] = mu[y[:-1]] + noise.

    Same generator calls in the same order as their script (randint for y_0, one multinomial per
    step, then the noise), so a seed gives their numbers exactly.
    """
    gen = torch.Generator().manual_seed(int(seed))
    y = [int(torch.randint(P.shape[0], (1,), generator=gen))]
    for _ in range(T - 1):
        y.append(int(torch.multinomial(P[y[-1]], 1, generator=gen)))
    ys = torch.tensor(y)
    x = mu[ys[:-1]] + torch.randn(T - 1, mu.shape[1], generator=gen)
    return x, ys


def filter_predictive(x: Tensor, P: Tensor, mu: Tensor) -> Tensor:
    """Exact p(y_t | x_1..x_t) [N, V] for x_t = mu_{y_(t-1)} + N(0, I), y_0 uniform.

    Forward filter over the hidden state z_t = y_(t-1): alpha_t(z) ∝ N(x_t; mu_z, I) *
    sum_z' alpha_(t-1)(z') P[z', z], then the prediction alpha_t @ P. float64, log-space emissions.
    """
    P64, x64, mu64 = P.double(), x.double(), mu.double()
    loglik = -0.5 * torch.cdist(x64, mu64).pow(2)  # [N, V] up to a constant
    prior = torch.full((P.shape[0],), 1.0 / P.shape[0], dtype=torch.float64)
    out = torch.empty(x.shape[0], P.shape[0], dtype=torch.float64)
    for t in range(x.shape[0]):
        logp = loglik[t] + prior.log()
        post = torch.softmax(logp, 0)
        out[t] = post @ P64
        prior = out[t]
    return out


def paper_data(seed: int, T: int = 2000, n_symbols: int = 8, d: int = 20, self_weight: float = 0.3,
               mu_seed: int = MEANS_SEED) -> ChainData:
    """The paper variant's data for one seed (one sequence, N = T - 1 scored positions); the
    symbol means from `mu_seed` (`means_seed`)."""
    int_at_least("T", T, 3, "sequence length")
    P, mu = transition_matrix(n_symbols, self_weight), symbol_means(n_symbols, d, mu_seed)
    x, y = sample_chain(seed, T, P, mu)
    pred = filter_predictive(x, P, mu).float()
    return ChainData(x.unsqueeze(0), y[1:].unsqueeze(0), pred.unsqueeze(0))


def beta_sticky_data(seed: int, n_sequences: int = 40, L: int = 50, n_symbols: int = 8, d: int = 20,
                     a: float = 1.0, b: float = 1.0, mu_seed: int = MEANS_SEED) -> ChainData:
    """The Beta-sticky variant's data for one seed: `n_sequences` chains of L symbols, a fresh
    rho ~ Beta(a, b) each; inputs mu_{y_t}; the exact posterior predictive of y_(t+1)."""
    from ...tasks import StickyTask

    task = StickyTask(V=n_symbols, L=L, a=a, b=b)
    batch = task.sample(n_sequences, torch.Generator().manual_seed(int(seed)))
    mu = symbol_means(n_symbols, d, mu_seed)
    targets = batch.targets.masked_fill(~batch.mask, -100)
    return ChainData(mu[batch.tokens], targets, batch.posterior.float())


def nats_to_bits(x: float) -> float:
    return x / math.log(2)
