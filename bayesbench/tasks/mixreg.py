"""Linear regression under a Gaussian-mixture prior over tasks (issue 41; docs/tasks.md,
"Continuous tunnels"): Panwar et al. 2024, "In-Context Learning through the Bayesian Prism"
(arXiv 2306.04891), a dense and a sparse family of regressions in one prior.

Each sequence draws its family, dense with probability `dense_weight`, else sparse; then
w ~ N(0, tau^2 I_d) (dense) or w ~ N(0, tau^2 I_s) on the first s = `sparsity` coordinates and 0
on the others (sparse, a fixed support, so that the prior is a mixture of two Gaussians); then
x_k and y_k as `linreg`, read in the same way. The exact predictive of y_k is the two-component
mixture sum_j p(j | pairs before k) N(mean_jk, var_jk) (`oracle.mixreg.mixreg_predictive`): the
tunnel where a model can match the predictive mean and still miss its two modes, so the model's
head is a mixture of `components` Gaussians (2 by default).

Reference predictors: "prior" (the prior predictive mixture, which ignores the context) and
"dense_prior" (the Bayes predictive of `linreg` with the dense prior alone: one Gaussian, right
in the dense family, wrong in the sparse one).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..checks import SettingError, number_in, positive_int, positive_number
from ..models.heads import gaussian_layout, mixture_layout
from ..oracle.linreg import linreg_predictive
from ..oracle.mixreg import mixreg_predictive
from .base import Batch, batch_device, check_batch_size, check_fits
from .continuous import off_mask_layout, place
from .linreg import RegressionTask, draw_regression, regression_batch
from .registry import register_task


@register_task("mixreg")
@dataclass(frozen=True)
class MixRegTask(RegressionTask):
    """Predict y_k from x_k and the pairs before it, w from a dense-or-sparse mixture prior."""

    d: int = 5
    n: int = 16
    tau: float = 1.0
    sigma: float = 0.25
    dense_weight: float = 0.5
    sparsity: int = 1
    components: int = 2

    name = "mixreg"
    #: 2: a mixture predictive (the Bayes one, or a model's `mixture:M` head) is scored by one composite
    #: Gauss-Legendre rule (`oracle.gaussian_bits`) in place of the two Gauss-Hermite rules, which
    #: moves mixture KL and entropy scores by up to about 0.01 bits: rows scored before are not pooled.
    version = 2

    def __post_init__(self) -> None:
        positive_int("d", self.d, "the dimension of x and w; d < 1 has nothing to regress")
        positive_int("n", self.n, "pairs per sequence")
        positive_number("tau", self.tau, "the prior standard deviation of each weight")
        positive_number("sigma", self.sigma, "the noise standard deviation; sigma <= 0 has no density")
        number_in("dense_weight", self.dense_weight, 0, 1, what="the prior weight of the dense component, a "
                  "mixture weight")
        positive_int("sparsity", self.sparsity, "nonzero weights of the sparse component")
        if self.sparsity > self.d:
            raise SettingError(f"sparsity must be at most d = {self.d} (nonzero weights of the sparse component), "
                               f"got {self.sparsity}", ("sparsity", "d"))
        positive_int("components", self.components, "Gaussians of the model's predictive head")
        self.check_size()

    @property
    def posterior_components(self) -> int:
        return 2

    def prior(self, device=None) -> tuple[Tensor, Tensor, Tensor]:
        """(weights [2], means [2, d], variances [2, d]) of the prior over w: dense, then sparse."""
        weights = torch.tensor([self.dense_weight, 1.0 - self.dense_weight], dtype=torch.float64, device=device)
        variances = torch.full((2, self.d), self.tau**2, dtype=torch.float64, device=device)
        variances[1, self.sparsity:] = 0.0
        return weights, torch.zeros((2, self.d), dtype=torch.float64, device=device), variances

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        B, d = check_batch_size(batch_size), self.d
        dev = batch_device(generator, device)
        check_fits(self, B, dev, dtype)
        weights, means, variances = self.prior(dev)
        dense = torch.rand((B,), generator=generator, device=dev, dtype=torch.float64) < self.dense_weight
        w = self.tau * torch.randn((B, d), generator=generator, device=dev, dtype=torch.float64)
        w = torch.where(dense.unsqueeze(-1), w, w * (variances[1] > 0))
        x, y = draw_regression(B, self.n, d, w, self.sigma, generator, dev)
        post, mean, var = mixreg_predictive(x, y, weights, means, variances, self.sigma)
        return regression_batch(x, y, mixture_layout(post, mean, var),
                                {"x": x, "y": y, "w": w, "dense": dense}, dtype)

    def floor_predictives(self, batch: Batch) -> dict[str, Tensor]:
        x, y = batch.latents["x"].double(), batch.latents["y"].double()
        B, n = y.shape
        weights, _, variances = self.prior(x.device)
        pos = torch.arange(n, device=x.device) * 2
        prior_var = (x * x) @ variances.T + self.sigma**2  # [B, n, 2]
        prior = mixture_layout(weights.expand(B, n, 2), torch.zeros_like(prior_var), prior_var)
        mean, var = linreg_predictive(x, y, self.tau, self.sigma)
        return {"prior": place(off_mask_layout(B, self.seq_len, 2, x.device, torch.float64), pos, prior),
                "dense_prior": place(off_mask_layout(B, self.seq_len, 1, x.device, torch.float64), pos,
                                     gaussian_layout(mean, var))}
