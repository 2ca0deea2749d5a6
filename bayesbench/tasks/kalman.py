"""Kalman filtering in context (issue 41; docs/tasks.md, "Continuous tunnels"): the continuous
analogue of the HMM tunnel, named as future work of the wind-tunnel method in Paper I ("The
Bayesian Geometry of Transformer Attention", arXiv 2512.22471, Sec. 7).

Each sequence draws a stable linear-Gaussian state-space model: A [m, m] with spectral radius
below `rho` < 1 (`oracle.kalman.random_stable_matrix`), C [1, m] ~ N(0, 1); Q = q^2 I, R = r^2,
s_1 ~ N(0, p0^2 I), fixed by the settings. Then s_{t+1} = A s_t + N(0, Q), y_t = C s_t + N(0, R),
t = 1..K. The header shows the model (A's rows at positions 0..m-1, C at position m, as the HMM
shows T and E) and the observations follow (y_t in channel 0 at position m + t); at position
m + t - 1 the model predicts y_t from y_1..y_{t-1}. The exact predictive is the Kalman filter's
N(C m_{t|t-1}, C P_{t|t-1} C' + R) (`oracle.kalman.kalman_predictive`). Trained at one K and
scored at longer K as the HMM is (`eval_lengths`).

Reference predictor: "prior", the predictive that ignores the observations, N(0, C P_t C' + R)
with P_t the state's prior covariance at t (P_1 = p0^2 I, P_{t+1} = A P_t A' + Q).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..checks import number_in, positive_int, positive_number
from ..models.heads import gaussian_layout
from ..oracle.kalman import kalman_predictive, random_stable_matrix
from .base import Batch, batch_device, check_batch_size, check_fits
from .continuous import ContinuousTask, off_mask_layout, place
from .registry import register_task


@register_task("kalman")
@dataclass(frozen=True)
class KalmanTask(ContinuousTask):
    """Predict y_t from y_1..y_{t-1} of a fresh stable state-space model given in the header."""

    m: int = 2
    K: int = 20
    rho: float = 0.95
    q: float = 0.5
    r: float = 0.1
    p0: float = 1.0
    components: int = 1

    name = "kalman"

    def __post_init__(self) -> None:
        positive_int("m", self.m, "state dimension")
        positive_int("K", self.K, "observations per sequence")
        number_in("rho", self.rho, 0, 1, low_open=True, high_open=True,
                  what="bound on A's spectral radius; rho >= 1 requests an unstable A")
        positive_number("q", self.q, "state noise standard deviation")
        positive_number("r", self.r, "observation noise standard deviation; r <= 0 has no density")
        positive_number("p0", self.p0, "initial state standard deviation")
        positive_int("components", self.components, "Gaussians of the model's predictive head")
        self.check_size()

    @property
    def vocab_size(self) -> int:
        return self.m + 2  # A's rows, C, an observation

    @property
    def seq_len(self) -> int:
        return self.m + self.K

    @property
    def header_dim(self) -> int:
        return self.m

    def obs_positions(self, device=None) -> Tensor:
        """The positions where y_1..y_K are predicted (m .. m + K - 1)."""
        return torch.arange(self.K, device=device) + self.m

    def system(self, A: Tensor, C: Tensor) -> tuple[Tensor, ...]:
        """(A, C, Q, R, mu0, P0) float64 of sequences with transition A [B, m, m] and output C [B, 1, m]."""
        m, dev = self.m, A.device
        eye = torch.eye(m, dtype=torch.float64, device=dev)
        return (A, C, self.q**2 * eye, torch.full((1, 1), self.r**2, dtype=torch.float64, device=dev),
                torch.zeros(m, dtype=torch.float64, device=dev), self.p0**2 * eye)

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        B, m, K = check_batch_size(batch_size), self.m, self.K
        dev = batch_device(generator, device)
        check_fits(self, B, dev, dtype)
        cpu = generator  # random_stable_matrix draws on the CPU: a device generator seeds a CPU one
        if generator is not None and dev.type != "cpu":
            seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=dev).item())
            cpu = torch.Generator().manual_seed(seed)
        A = random_stable_matrix(B, m, self.rho, cpu).to(dev)
        C = torch.randn((B, 1, m), generator=generator, device=dev, dtype=torch.float64)
        _, _, Q, R, mu0, P0 = self.system(A, C)
        s = self.p0 * torch.randn((B, m), generator=generator, device=dev, dtype=torch.float64)
        y = torch.empty((B, K), dtype=torch.float64, device=dev)
        for t in range(K):
            if t:
                s = (A @ s.unsqueeze(-1)).squeeze(-1) + self.q * torch.randn((B, m), generator=generator, device=dev,
                                                                             dtype=torch.float64)
            y[:, t] = (C[:, 0] * s).sum(-1) + self.r * torch.randn((B,), generator=generator, device=dev,
                                                                    dtype=torch.float64)
        mean, cov = kalman_predictive(y.unsqueeze(-1), A, C, Q, R, mu0, P0)
        return self.assemble(A, C, y, gaussian_layout(mean[..., 0], cov[..., 0, 0]), dtype)

    def assemble(self, A: Tensor, C: Tensor, y: Tensor, predictive: Tensor, dtype: torch.dtype) -> Batch:
        """The batch of systems (A, C), observations y [B, K] and exact predictives [B, K, 3]."""
        B, m, dev = A.shape[0], self.m, A.device
        L, pos = self.seq_len, self.obs_positions(dev)
        header = torch.zeros((B, L, m), dtype=dtype, device=dev)
        header[:, :m] = A.to(dtype)
        header[:, m] = C[:, 0].to(dtype)
        header[:, m + 1:, 0] = y[:, :-1].to(dtype)
        tokens = torch.full((B, L), m + 1, dtype=torch.long, device=dev)
        tokens[:, : m + 1] = torch.arange(m + 1, device=dev)
        mask = torch.zeros((B, L), dtype=torch.bool, device=dev)
        mask[:, pos] = True
        targets = torch.zeros((B, L), dtype=dtype, device=dev)
        targets[:, pos] = y.to(dtype)
        posterior = place(off_mask_layout(B, L, 1, dev, dtype), pos, predictive)
        return Batch(tokens, mask, targets, posterior, {"A": A, "C": C, "y": y}, header)

    def floor_predictives(self, batch: Batch) -> dict[str, Tensor]:
        A, C = batch.latents["A"].double(), batch.latents["C"].double()
        _, _, Q, R, _, P0 = self.system(A, C)
        B, dev = A.shape[0], A.device
        P = P0.expand(B, self.m, self.m)
        var = torch.empty((B, self.K), dtype=torch.float64, device=dev)
        for t in range(self.K):
            if t:
                P = A @ P @ A.transpose(1, 2) + Q
            var[:, t] = (C @ P @ C.transpose(1, 2))[:, 0, 0] + R[0, 0]
        layout = off_mask_layout(B, self.seq_len, 1, dev, torch.float64)
        return {"prior": place(layout, self.obs_positions(dev), gaussian_layout(torch.zeros_like(var), var))}
