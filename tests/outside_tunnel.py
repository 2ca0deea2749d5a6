"""A wind tunnel written as a user would, outside the package (tests/tasks/test_outside.py and
docs/tasks.md "Your own tunnel"): coin flips of a fresh coin per sequence.

Each sequence draws a bias theta ~ Uniform(0, 1), then L + 1 flips x_t ~ Bernoulli(theta). The
model sees flips 0..t and predicts flip t + 1; the exact posterior predictive is Laplace's rule
of succession, P(x_{t+1} = 1 | x_0..x_t) = (heads + 1) / (t + 3). `brute_force_posterior`
integrates theta numerically, so bayesbench can check the closed form against it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bayesbench.tasks import IGNORE_INDEX, Batch, Task


@dataclass(frozen=True)
class CoinTask(Task):
    L: int = 12
    wrong: bool = False  # a deliberately wrong posterior (an off-by-one count), for the checks' tests

    name = "coin"

    @property
    def vocab_size(self) -> int:
        return 2

    @property
    def num_classes(self) -> int:
        return 2

    @property
    def seq_len(self) -> int:
        return self.L

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        dev = generator.device if generator is not None else torch.device(device or "cpu")
        theta = torch.rand(batch_size, generator=generator, device=dev)
        flips = (torch.rand(batch_size, self.L + 1, generator=generator, device=dev) < theta[:, None]).long()
        tokens, targets = flips[:, :-1], flips[:, 1:]
        heads = tokens.cumsum(1).double()
        seen = torch.arange(1, self.L + 1, device=dev, dtype=torch.float64)
        shift = 1.0 if self.wrong else 0.0
        p1 = (heads + 1 + shift) / (seen + 2 + shift)
        posterior = torch.stack([1 - p1, p1], -1).to(dtype)
        mask = torch.ones(batch_size, self.L, dtype=torch.bool, device=dev)
        return Batch(tokens, mask, targets.masked_fill(~mask, IGNORE_INDEX), posterior, {"theta": theta})

    def brute_force_posterior(self, batch: Batch) -> torch.Tensor:
        """P(next flip | flips so far), integrating theta on a grid (slow: small batches only)."""
        grid = torch.linspace(1e-6, 1 - 1e-6, 20001, dtype=torch.float64)
        heads = batch.tokens.cumsum(1).double()
        tails = torch.arange(1, self.L + 1, dtype=torch.float64) - heads
        like = grid ** heads[..., None] * (1 - grid) ** tails[..., None]  # [B, L, grid]
        p1 = (like * grid).sum(-1) / like.sum(-1)
        return torch.stack([1 - p1, p1], -1)


def build(**options) -> CoinTask:
    return CoinTask(**options)
