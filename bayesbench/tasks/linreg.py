"""In-context Bayesian linear regression (issue 41; docs/tasks.md, "Continuous tunnels"): Garg et
al. 2022, "What Can Transformers Learn In-Context? A Case Study of Simple Function Classes"
(arXiv 2208.01066), scored against the exact posterior predictive rather than its mean alone.

Each sequence draws w ~ N(0, tau^2 I_d), inputs x_k ~ N(0, I_d) and y_k = w . x_k + eps_k,
eps_k ~ N(0, sigma^2), k = 1..n. The model reads (x_1, y_1, ..., x_n, y_n), one real vector per
position (header [B, 2n, d + 1]: x_k in the first d channels at position 2k - 2, y_k in the last
at position 2k - 1; the token names the slot, 0 for an x, 1 for a y), and at x_k's position
predicts y_k. The exact predictive is N(x_k . mu_{k-1}, sigma^2 + x_k' Sigma_{k-1} x_k), the
conjugate ridge posterior (`oracle.linreg.linreg_predictive`).

With `pool=M` (M >= 1; Raventos et al. 2023, "Pretraining task diversity and the emergence of
non-Bayesian in-context learning for regression", arXiv 2306.15063, Sec. 2) w is drawn uniformly
from M fixed vectors instead, the pool, drawn once from N(0, tau^2 I_d) by `pool_seed`
(`pool_vectors`): the pool is a function of (pool, pool_seed, d, tau), all in the task's
configuration, so every result is keyed by it. The exact predictive is then the mixture of the
M Gaussians N(x_k . w_m, sigma^2), weighted by each member's posterior probability given the
pairs before k (`oracle.linreg.pool_predictive`); the posterior has M components. The model's
head stays `components` (set components=M for a `mixture:M` head that can represent it exactly;
the default Gaussian head's KL is at least that of the mixture's moment-matched Gaussian). With
pool=0 (the default) the configuration and the label are what they were before the option.

Reference predictors (`floor_predictives`), scored beside the models on the same sequences:
- "prior": the prior predictive N(0, tau^2 |x_k|^2 + sigma^2), which ignores the context (with a
  pool: the uniform mixture over the pool's N(x_k . w_m, sigma^2));
- "least_squares": the minimum-norm least-squares fit of the pairs before k (Garg et al.'s
  baseline) with its textbook prediction variance sigma^2 (1 + x_k' (X'X)^+ x_k), blind to the
  directions not yet seen;
- "ridge": the Bayes predictive under a wrong prior, tau / RIDGE_TAU_DIVISOR (a ridge regression
  with too strong a penalty, and its own variance).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor

from ..checks import SettingError, int_at_least, positive_int, positive_number
from ..models.heads import gaussian_layout
from ..oracle.linreg import linreg_predictive, pool_predictive
from .base import Batch, batch_device, check_batch_size, check_fits
from .continuous import ContinuousTask, off_mask_layout, place
from .registry import register_task

#: The ridge reference's prior standard deviation is tau divided by this (a wrong, too tight prior).
RIDGE_TAU_DIVISOR = 3.0
#: The largest finite pool: the exact predictive is a mixture of M Gaussians per position, stored
#: with every sequence ([L, 3M]) and scored by quadrature over its M components and the model's.
POOL_MAX = 64
#: The fields of the pool option, left out of the configuration and the label while pool = 0.
POOL_FIELDS = ("pool", "pool_seed")


def draw_regression(B: int, n: int, d: int, w: Tensor, sigma: float, generator, dev) -> tuple[Tensor, Tensor]:
    """x [B, n, d] ~ N(0, I) and y = x w + N(0, sigma^2), float64, for weights w [B, d]."""
    x = torch.randn((B, n, d), generator=generator, device=dev, dtype=torch.float64)
    eps = torch.randn((B, n), generator=generator, device=dev, dtype=torch.float64)
    return x, (x @ w.unsqueeze(-1)).squeeze(-1) + sigma * eps


def interleave(x: Tensor, y: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """(tokens [B, 2n], header [B, 2n, d + 1]) of the sequence x_1, y_1, ..., x_n, y_n."""
    B, n, d = x.shape
    header = torch.zeros((B, 2 * n, d + 1), dtype=dtype, device=x.device)
    header[:, 0::2, :d] = x.to(dtype)
    header[:, 1::2, d] = y.to(dtype)
    tokens = torch.zeros((B, 2 * n), dtype=torch.long, device=x.device)
    tokens[:, 1::2] = 1
    return tokens, header


def regression_batch(x: Tensor, y: Tensor, predictive: Tensor, latents: dict[str, Tensor],
                     dtype: torch.dtype) -> Batch:
    """The batch of regression sequences (x, y) whose exact predictive at x_k is `predictive`
    [B, n, 3J]: supervised at the x positions, targets y_k there."""
    B, n, _ = x.shape
    tokens, header = interleave(x, y, dtype)
    pos = torch.arange(n, device=x.device) * 2
    mask = torch.zeros((B, 2 * n), dtype=torch.bool, device=x.device)
    mask[:, pos] = True
    targets = torch.zeros((B, 2 * n), dtype=dtype, device=x.device)
    targets[:, pos] = y.to(dtype)
    J = predictive.shape[-1] // 3
    posterior = place(off_mask_layout(B, 2 * n, J, x.device, dtype), pos, predictive)
    return Batch(tokens, mask, targets, posterior, latents, header)


def prior_layout(x: Tensor, batch: Batch, var_w: Tensor | float, sigma: float, mean_w: Tensor | None = None) -> Tensor:
    """The prior predictive N(x_k . m, x_k' D x_k + sigma^2) (D = var_w, a number or [d]) at the x
    positions of `batch`, in the posterior's layout [B, L, 3]."""
    B, n, _ = x.shape
    mean = torch.zeros((B, n), dtype=torch.float64, device=x.device) if mean_w is None else x @ mean_w
    var = (x * x * var_w).sum(-1) + sigma * sigma
    pos = torch.arange(n, device=x.device) * 2
    return place(off_mask_layout(B, 2 * n, 1, x.device, torch.float64), pos, gaussian_layout(mean, var))


class RegressionTask(ContinuousTask):
    """What the in-context regression tunnels (linreg, mixreg) share: n pairs (x_k, y_k) in d
    dimensions read as 2n positions of real vectors [d + 1] (x_k in the first d channels, y_k in
    the last; the token names the slot), the error of a predictive mean normalised by d (Garg et
    al.'s)."""

    d: int
    n: int

    @property
    def vocab_size(self) -> int:
        return 2

    @property
    def seq_len(self) -> int:
        return 2 * self.n

    @property
    def header_dim(self) -> int:
        return self.d + 1

    @property
    def error_dim(self) -> int:
        return self.d


@register_task("linreg")
@dataclass(frozen=True)
class LinRegTask(RegressionTask):
    """Predict y_k from x_k and the k - 1 pairs before it, w drawn afresh per sequence."""

    d: int = 5
    n: int = 16
    tau: float = 1.0
    sigma: float = 0.25
    components: int = 1  # the model's head: 1 a Gaussian, M > 1 a mixture of M
    pool: int = 0  # 0: w ~ N(0, tau^2 I_d); M >= 1: w uniform over a pool of M vectors (Raventos et al.)
    pool_seed: int = 0  # the seed the pool is drawn with, once

    name = "linreg"
    #: 2: a mixture predictive (the Bayes one, or a model's `mixture:M` head) is scored by one composite
    #: Gauss-Legendre rule (`oracle.gaussian_bits`) in place of the two Gauss-Hermite rules, which
    #: moves mixture KL and entropy scores by up to about 0.01 bits: rows scored before are not pooled.
    version = 2

    def __post_init__(self) -> None:
        positive_int("d", self.d, "the dimension of x and w; d < 1 has nothing to regress")
        positive_int("n", self.n, "pairs per sequence")
        positive_number("tau", self.tau, "the prior standard deviation of each weight")
        positive_number("sigma", self.sigma, "the noise standard deviation; sigma <= 0 has no density")
        positive_int("components", self.components, "Gaussians of the model's predictive head")
        int_at_least("pool", self.pool, 0, "vectors w is drawn from uniformly; 0 for the Gaussian prior")
        if self.pool > POOL_MAX:
            raise SettingError(f"pool must be at most {POOL_MAX} (the exact predictive is a mixture of pool Gaussians "
                               f"per position, stored and scored component by component), got {self.pool}", ["pool"])
        int_at_least("pool_seed", self.pool_seed, 0, "the seed of the finite task pool")
        if self.pool_seed and not self.pool:
            raise SettingError(f"pool_seed applies to a finite pool only: set pool >= 1 or leave pool_seed at 0, "
                               f"got pool_seed={self.pool_seed} with pool=0", ["pool_seed", "pool"])
        self.check_size()

    def config(self) -> dict:
        """Task.config() without the pool's fields while pool = 0: the Gaussian prior's keys and
        rows stay those it had before the option."""
        config = super().config()
        return config if self.pool else {k: v for k, v in config.items() if k not in POOL_FIELDS}

    def describe(self) -> str:
        if self.pool:
            return super().describe()
        fields = ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(self).items() if k not in POOL_FIELDS)
        return f"{self.name}({fields})"

    @property
    def posterior_components(self) -> int:
        """M with a pool (the exact predictive is a mixture over it), else 1."""
        return self.pool or 1

    def pool_vectors(self, device=None) -> Tensor:
        """The pool [M, d], float64: M draws from N(0, tau^2 I_d) by a generator seeded with
        pool_seed (on the CPU, so the pool is the same on every device)."""
        if not self.pool:
            raise ValueError("pool_vectors: this linreg has no finite pool (pool=0: w ~ N(0, tau^2 I))")
        g = torch.Generator().manual_seed(self.pool_seed)
        return (self.tau * torch.randn((self.pool, self.d), generator=g, dtype=torch.float64)).to(device)

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        B, d = check_batch_size(batch_size), self.d
        dev = batch_device(generator, device)
        check_fits(self, B, dev, dtype)
        if self.pool:
            return self._sample_pool(B, generator, dev, dtype)
        w = self.tau * torch.randn((B, d), generator=generator, device=dev, dtype=torch.float64)
        x, y = draw_regression(B, self.n, d, w, self.sigma, generator, dev)
        mean, var = linreg_predictive(x, y, self.tau, self.sigma)
        return regression_batch(x, y, gaussian_layout(mean, var), {"x": x, "y": y, "w": w}, dtype)

    def _sample_pool(self, B: int, generator, dev, dtype) -> Batch:
        pool = self.pool_vectors(dev)
        member = torch.randint(0, self.pool, (B,), generator=generator, device=dev)
        w = pool[member]
        x, y = draw_regression(B, self.n, self.d, w, self.sigma, generator, dev)
        weights, means, var = pool_predictive(x, y, pool, self.sigma)
        predictive = torch.cat([weights, means, torch.full_like(means, var)], -1)
        return regression_batch(x, y, predictive, {"x": x, "y": y, "w": w, "member": member}, dtype)

    def floor_predictives(self, batch: Batch) -> dict[str, Tensor]:
        x, y = batch.latents["x"].double(), batch.latents["y"].double()
        pos = torch.arange(self.n, device=x.device) * 2
        ridge_mean, ridge_var = linreg_predictive(x, y, self.tau / RIDGE_TAU_DIVISOR, self.sigma)
        layout = off_mask_layout(x.shape[0], self.seq_len, 1, x.device, torch.float64)
        if self.pool:
            means = x @ self.pool_vectors(x.device).T  # [B, n, M]
            uniform = torch.cat([torch.full_like(means, 1.0 / self.pool), means,
                                 torch.full_like(means, self.sigma**2)], -1)
            prior = place(off_mask_layout(x.shape[0], self.seq_len, self.pool, x.device, torch.float64), pos, uniform)
        else:
            prior = prior_layout(x, batch, self.tau**2, self.sigma)
        return {"prior": prior,
                "least_squares": place(layout, pos, gaussian_layout(*least_squares(x, y, self.sigma))),
                "ridge": place(layout, pos, gaussian_layout(ridge_mean, ridge_var))}


def least_squares(x: Tensor, y: Tensor, sigma: float) -> tuple[Tensor, Tensor]:
    """(mean, var) [B, n] of the least-squares predictive: mean x_k . w_hat_k, w_hat_k the
    minimum-norm least-squares fit of the pairs before k (0 before any pair), by the
    pseudo-inverse X^+; var sigma^2 (1 + x_k' (X'X)^+ x_k), the textbook prediction variance
    with the noise known (it ignores the directions the pairs have not seen: overconfident while
    k <= d, as least squares is)."""
    B, n, d = x.shape
    mean = torch.zeros((B, n), dtype=torch.float64, device=x.device)
    var = torch.full((B, n), sigma**2, dtype=torch.float64, device=x.device)
    for k in range(1, n):
        pinv = torch.linalg.pinv(x[:, :k])  # [B, d, k]
        w_hat = pinv @ y[:, :k].unsqueeze(-1)  # [B, d, 1]
        mean[:, k] = (x[:, k] * w_hat.squeeze(-1)).sum(-1)
        var[:, k] = sigma**2 * (1 + (pinv.transpose(1, 2) @ x[:, k].unsqueeze(-1)).square().sum((1, 2)))
    return mean, var
