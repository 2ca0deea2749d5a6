"""A continuous wind tunnel written as a user would, outside the package (tests/tasks/test_outside_continuous.py
and docs/tasks.md "Your own tunnel"): the mean of a fresh Gaussian per sequence.

Each sequence draws mu ~ N(0, tau^2), then L draws y_t ~ N(mu, sigma^2). Position t reads the
real vector (y_{t-1}) (0 at t = 0) and predicts y_t; the exact posterior predictive is the
normal-normal conjugate one, N(m_t, s_t^2 + sigma^2) with precision 1/s_t^2 = 1/tau^2 + t/sigma^2
and m_t = s_t^2 sum_{u<t} y_u / sigma^2. The prior predictive N(0, tau^2 + sigma^2) is its floor.
For the checks' tests: `broken=True` gives a negative variance at the last position, and
`peek=True` a posterior that reads the latent, N(mu, sigma^2), at every position.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bayesbench.tasks import Batch, Task


@dataclass(frozen=True)
class GaussianMeanTask(Task):
    L: int = 8
    tau: float = 1.0
    sigma: float = 0.5
    broken: bool = False
    peek: bool = False

    name = "gaussian-mean"

    @property
    def vocab_size(self) -> int:
        return 2

    @property
    def num_classes(self) -> int:
        return 2  # the gaussian head's (mean, log-variance)

    @property
    def seq_len(self) -> int:
        return self.L

    @property
    def head(self) -> str:
        return "gaussian"

    @property
    def header_every_position(self) -> bool:
        return True

    @property
    def header_len(self) -> int:
        return self.L

    @property
    def header_dim(self) -> int:
        return 1

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        dev = generator.device if generator is not None else torch.device(device or "cpu")
        B, L = batch_size, self.L
        mu = self.tau * torch.randn(B, generator=generator, device=dev, dtype=torch.float64)
        y = mu[:, None] + self.sigma * torch.randn(B, L, generator=generator, device=dev, dtype=torch.float64)
        seen = torch.cat([torch.zeros(B, 1, dtype=torch.float64, device=dev), y[:, :-1]], 1)
        t = torch.arange(L, dtype=torch.float64, device=dev)
        post_var = 1 / (1 / self.tau**2 + t / self.sigma**2)
        mean = post_var * seen.cumsum(1) / self.sigma**2
        var = (post_var + self.sigma**2).expand(B, L).clone()
        if self.peek:
            mean, var = mu[:, None].expand(B, L).clone(), torch.full((B, L), self.sigma**2, dtype=torch.float64)
        if self.broken:
            var[:, -1] = -var[:, -1]
        posterior = torch.stack([torch.ones_like(mean), mean, var], -1).to(dtype)
        tokens = torch.ones(B, L, dtype=torch.long, device=dev)
        tokens[:, 0] = 0
        mask = torch.ones(B, L, dtype=torch.bool, device=dev)
        return Batch(tokens, mask, y.to(dtype), posterior, {"mu": mu}, seen.unsqueeze(-1).to(dtype))

    def floor_predictives(self, batch: Batch) -> dict[str, torch.Tensor]:
        """The prior predictive N(0, tau^2 + sigma^2) at every position (it ignores the context)."""
        B, L = batch.mask.shape
        prior = torch.zeros(B, L, 3, dtype=torch.float64, device=batch.mask.device)
        prior[..., 0] = 1.0
        prior[..., 2] = self.tau**2 + self.sigma**2
        return {"prior": prior}


def build(**options) -> GaussianMeanTask:
    return GaussianMeanTask(**options)
