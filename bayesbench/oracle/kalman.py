"""Exact one-step predictives of linear-Gaussian state-space models: the Kalman filter (groundwork
for issue 41).

Each sequence b: s_1 ~ N(mu0, P0), s_{t+1} = A s_t + q_t, q_t ~ N(0, Q), y_t = C s_t + r_t,
r_t ~ N(0, R), with A [m, m], C [p, m]. The predictive of y_t given y_1..y_{t-1} is
N(C m_{t|t-1}, C P_{t|t-1} C' + R), the filter's prediction (m_{1|0} = mu0, P_{1|0} = P0).

- `kalman_predictive_reference`: the textbook filter, one sequence and one step at a time, float64.
- `kalman_predictive`: all sequences at once (a loop over time only), batched solves, the Joseph
  form of the covariance update and covariances symmetrised after every step.
- `random_stable_matrix`: a random A with spectral radius below rho < 1, for a tunnel's sampler.

Every parameter is either per sequence ([B, ...]) or shared by all (no leading B). Inputs may be
float32 or float64; outputs are float64.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..checks import number_in, positive_int
from .gaussian_bits import check_covariance
from .validate import require_float, require_tensor


def _param(name: str, t: Tensor, B: int, shape: tuple[int, ...], meaning: str, device) -> Tensor:
    require_tensor(name, t)
    require_float(name, t)
    if tuple(t.shape) == shape:
        t = t.unsqueeze(0).expand(B, *shape)
    elif tuple(t.shape) != (B, *shape):
        raise ValueError(f"{name} must have shape {list(shape)} or {[B, *shape]} ({meaning}), got {list(t.shape)}")
    if t.device != device:
        raise ValueError(f"{name} must be on the device of y ({device}), got {t.device}")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return t.double()


def check_kalman_inputs(y, A, C, Q, R, mu0, P0) -> tuple[Tensor, ...]:
    """Shapes, finiteness and covariances; returns float64 [B, ...] tensors (y, A, C, Q, R, mu0, P0)."""
    require_tensor("y", y)
    require_float("y", y)
    if y.dim() != 3 or y.shape[1] < 1 or y.shape[2] < 1:
        raise ValueError(f"y must have shape [B, T, p] with T >= 1 steps and p >= 1 outputs, got {list(y.shape)}")
    if not bool(torch.isfinite(y).all()):
        raise ValueError("y must be finite (no NaN or inf)")
    B, _, p = y.shape
    require_tensor("A", A)
    if A.dim() < 2 or A.shape[-1] != A.shape[-2] or A.shape[-1] < 1:
        raise ValueError(f"A must be square in its last two dimensions ([m, m] or [B, m, m], m >= 1), "
                         f"got {list(A.shape)}")
    m = A.shape[-1]
    A = _param("A", A, B, (m, m), "state transition", y.device)
    C = _param("C", C, B, (p, m), f"p = {p} outputs of y by m = {m} states of A", y.device)
    Q = _param("Q", Q, B, (m, m), "state noise covariance", y.device)
    R = _param("R", R, B, (p, p), "observation noise covariance", y.device)
    mu0 = _param("mu0", mu0, B, (m,), "initial state mean", y.device)
    P0 = _param("P0", P0, B, (m, m), "initial state covariance", y.device)
    check_covariance("Q", Q, definite=False, meaning="state noise covariance")
    check_covariance("R", R, definite=True, meaning="observation noise covariance")
    check_covariance("P0", P0, definite=False, meaning="initial state covariance")
    return y.double(), A, C, Q, R, mu0, P0


def _sym(M: Tensor) -> Tensor:
    return 0.5 * (M + M.transpose(-1, -2))


def kalman_predictive(y: Tensor, A: Tensor, C: Tensor, Q: Tensor, R: Tensor, mu0: Tensor,
                      P0: Tensor) -> tuple[Tensor, Tensor]:
    """One-step predictives of B state-space models.

    Args:
        y: [B, T, p] observations; A: [B, m, m]; C: [B, p, m]; Q: [B, m, m] (positive
        semidefinite); R: [B, p, p] (positive definite); mu0: [B, m]; P0: [B, m, m] (positive
        semidefinite). Each parameter may drop its leading B (shared).

    Returns:
        (mean [B, T, p], cov [B, T, p, p]), float64: y_t | y_<t ~ N(mean[:, t], cov[:, t]).
    """
    y, A, C, Q, R, mu0, P0 = check_kalman_inputs(y, A, C, Q, R, mu0, P0)
    B, T, p = y.shape
    eye = torch.eye(A.shape[-1], dtype=torch.float64, device=y.device)
    mean = torch.empty((B, T, p), dtype=torch.float64, device=y.device)
    cov = torch.empty((B, T, p, p), dtype=torch.float64, device=y.device)
    s, P = mu0.unsqueeze(-1), P0
    At, Ct = A.transpose(1, 2), C.transpose(1, 2)
    for t in range(T):
        if t:
            s, P = A @ s, _sym(A @ P @ At + Q)
        pred = C @ s
        CP = C @ P
        S = _sym(CP @ Ct + R)
        mean[:, t], cov[:, t] = pred.squeeze(-1), S
        if t + 1 < T:
            Kt = torch.linalg.solve(S, CP)  # K' = S^-1 C P (S, P symmetric) [B, p, m]
            K = Kt.transpose(1, 2)
            s = s + K @ (y[:, t].unsqueeze(-1) - pred)
            IKC = eye - K @ C
            P = _sym(IKC @ P @ IKC.transpose(1, 2) + K @ R @ Kt)  # Joseph form
    return mean, cov


def kalman_predictive_reference(y: Tensor, A: Tensor, C: Tensor, Q: Tensor, R: Tensor, mu0: Tensor,
                                P0: Tensor) -> tuple[Tensor, Tensor]:
    """The textbook filter, a plain loop over sequences and steps (float64; checks and returns as
    `kalman_predictive`): S = C P C' + R, K = P C' S^-1, s += K (y - C s), P -= K S K', then
    s = A s, P = A P A' + Q."""
    y, A, C, Q, R, mu0, P0 = check_kalman_inputs(y, A, C, Q, R, mu0, P0)
    B, T, p = y.shape
    mean = torch.empty((B, T, p), dtype=torch.float64, device=y.device)
    cov = torch.empty((B, T, p, p), dtype=torch.float64, device=y.device)
    for b in range(B):
        s, P = mu0[b], P0[b]
        for t in range(T):
            if t:
                s = A[b] @ s
                P = A[b] @ P @ A[b].T + Q[b]
            S = C[b] @ P @ C[b].T + R[b]
            mean[b, t], cov[b, t] = C[b] @ s, S
            K = P @ C[b].T @ torch.linalg.inv(S)
            s = s + K @ (y[b, t] - C[b] @ s)
            P = P - K @ S @ K.T
    return mean, cov


def random_stable_matrix(B: int, m: int, rho: float, generator: torch.Generator | None = None,
                         dtype: torch.dtype = torch.float64) -> Tensor:
    """B random transition matrices [B, m, m] with spectral radius < rho (0 < rho < 1).

    A = U D U' with U a random (Haar) orthogonal matrix and D block diagonal: 2x2 blocks
    r [[cos a, -sin a], [sin a, cos a]] (eigenvalues r e^{+-ia}, an oscillation decaying at rate r)
    and, for odd m, one real eigenvalue +-r; every r ~ U(0, rho), a ~ U(0, pi). A is normal, so
    its spectral norm equals its spectral radius: every state contracts, without transients.
    """
    positive_int("B", B, "number of matrices")
    positive_int("m", m, "state dimension")
    number_in("rho", rho, 0, 1, low_open=True, high_open=True, what="spectral radius bound; rho >= 1 is unstable")
    g = generator
    D = torch.zeros((B, m, m), dtype=torch.float64)
    for i in range(0, m - 1, 2):
        r = rho * torch.rand(B, generator=g, dtype=torch.float64)
        a = math.pi * torch.rand(B, generator=g, dtype=torch.float64)
        D[:, i, i], D[:, i, i + 1] = r * a.cos(), -r * a.sin()
        D[:, i + 1, i], D[:, i + 1, i + 1] = r * a.sin(), r * a.cos()
    if m % 2:
        sign = torch.randint(0, 2, (B,), generator=g).double() * 2 - 1
        D[:, -1, -1] = sign * rho * torch.rand(B, generator=g, dtype=torch.float64)
    Z = torch.randn((B, m, m), generator=g, dtype=torch.float64)
    U, Rr = torch.linalg.qr(Z)
    U = U * torch.sign(Rr.diagonal(dim1=-2, dim2=-1)).unsqueeze(-2)  # Haar: fix the signs of QR
    return (U @ D @ U.transpose(1, 2)).to(dtype)
