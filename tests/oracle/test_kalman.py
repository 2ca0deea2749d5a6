"""Kalman one-step predictive: fast path against the float64 reference, against filterpy, the
stable-matrix sampler, long sequences and every bad setting."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bayesbench.oracle.gaussian_bits import mvn_nll_bits
from bayesbench.oracle.kalman import kalman_predictive, kalman_predictive_reference, random_stable_matrix

F64 = torch.float64


def ssm(B, T, m, p, seed, rho=0.9, shared=False):
    """A random stable model and observations drawn from it."""
    g = torch.Generator().manual_seed(seed)
    A = random_stable_matrix(B, m, rho, g)
    C = torch.randn(B, p, m, generator=g, dtype=F64)
    G = torch.randn(B, m, m, generator=g, dtype=F64) * 0.3
    Q = G @ G.transpose(1, 2) + 0.01 * torch.eye(m, dtype=F64)
    H = torch.randn(B, p, p, generator=g, dtype=F64) * 0.3
    R = H @ H.transpose(1, 2) + 0.1 * torch.eye(p, dtype=F64)
    mu0 = torch.randn(B, m, generator=g, dtype=F64)
    P0 = torch.eye(m, dtype=F64).expand(B, m, m).clone()
    if shared:
        C, Q, R, mu0, P0 = C[0], Q[0], R[0], mu0[0], P0[0]
    s = mu0 + torch.randn(B, m, generator=g, dtype=F64)  # P0 = I
    LR, LQ = torch.linalg.cholesky(R), torch.linalg.cholesky(Q)
    ys = []
    for _ in range(T):
        ys.append(((C @ s.unsqueeze(-1)) + LR @ torch.randn(B, p, 1, generator=g, dtype=F64)).squeeze(-1))
        s = ((A @ s.unsqueeze(-1)) + LQ @ torch.randn(B, m, 1, generator=g, dtype=F64)).squeeze(-1)
    return torch.stack(ys, 1), A, C, Q, R, mu0, P0


def _close(got, want):
    mean, cov = got
    torch.testing.assert_close(cov, want[1], rtol=1e-10, atol=1e-13)
    scale = torch.diagonal(want[1], dim1=-2, dim2=-1).sqrt()
    assert float(((mean - want[0]).abs() / scale).max()) < 1e-10


@pytest.mark.parametrize("B,T,m,p,shared", [(1, 1, 1, 1, False), (3, 6, 1, 1, True), (2, 10, 4, 2, False),
                                            (2, 8, 2, 3, True), (4, 30, 5, 1, False)])
def test_fast_path_equals_reference(B, T, m, p, shared):
    args = ssm(B, T, m, p, seed=B * 100 + T + m, shared=shared)
    got = kalman_predictive(*args)
    assert got[0].shape == (B, T, p) and got[1].shape == (B, T, p, p) and got[0].dtype == F64
    _close(got, kalman_predictive_reference(*args))


def test_nearly_singular_a_and_deterministic_dynamics():
    """A of rank 1 up to 1e-9, Q = 0 and P0 = 0: the filter must stay exact and symmetric."""
    y, _, C, _, R, mu0, _ = ssm(3, 12, 3, 2, seed=4)
    u = torch.randn(3, 3, 1, generator=torch.Generator().manual_seed(1), dtype=F64)
    A = 0.5 * u @ u.transpose(1, 2) / (u * u).sum((1, 2), keepdim=True) + 1e-9 * torch.eye(3, dtype=F64)
    for Q, P0 in ((torch.zeros(3, 3, dtype=F64), torch.eye(3, dtype=F64)), (0.1 * torch.eye(3, dtype=F64),
                                                                          torch.zeros(3, 3, dtype=F64))):
        got = kalman_predictive(y, A, C, Q, R, mu0, P0)
        _close(got, kalman_predictive_reference(y, A, C, Q, R, mu0, P0))
        torch.testing.assert_close(got[1], got[1].transpose(-1, -2), rtol=0, atol=0)


def test_first_step_is_the_prior_predictive():
    y, A, C, Q, R, mu0, P0 = ssm(2, 3, 3, 2, seed=5)
    mean, cov = kalman_predictive(y, A, C, Q, R, mu0, P0)
    torch.testing.assert_close(mean[:, 0], (C @ mu0.unsqueeze(-1)).squeeze(-1))
    torch.testing.assert_close(cov[:, 0], C @ P0 @ C.transpose(1, 2) + R)


@pytest.mark.parametrize("m,p", [(1, 1), (4, 2), (3, 3)])
def test_equals_filterpy(m, p):
    """Independent: filterpy's KalmanFilter, predict() then update() per step; its prediction of
    y_t is H x and its system uncertainty S = H P H' + R, its log-likelihood that of N(H x, S)."""
    filterpy = pytest.importorskip("filterpy.kalman", reason="filterpy is not installed (requirements.txt)")
    KalmanFilter = filterpy.KalmanFilter

    y, A, C, Q, R, mu0, P0 = ssm(3, 25, m, p, seed=m * 10 + p)
    mean, cov = kalman_predictive(y, A, C, Q, R, mu0, P0)
    for b in range(3):
        kf = KalmanFilter(dim_x=m, dim_z=p)
        kf.x, kf.P = mu0[b].numpy().reshape(m, 1).copy(), P0[b].numpy().copy()
        kf.F, kf.H, kf.Q, kf.R = A[b].numpy(), C[b].numpy(), Q[b].numpy(), R[b].numpy()
        for t in range(25):
            if t:
                kf.predict()
            np.testing.assert_allclose((kf.H @ kf.x).ravel(), mean[b, t].numpy(), rtol=1e-10, atol=1e-10)
            kf.update(y[b, t].numpy().reshape(p, 1))
            np.testing.assert_allclose(kf.S, cov[b, t].numpy(), rtol=1e-10, atol=1e-12)
            nll = float(mvn_nll_bits(y[b, t], mean[b, t], cov[b, t])) * math.log(2)
            assert -kf.log_likelihood == pytest.approx(nll, rel=1e-10, abs=1e-12)


def test_long_sequences_stay_symmetric_positive_definite():
    args = ssm(8, 2000, 4, 2, seed=6, rho=0.99)
    mean, cov = kalman_predictive(*args)
    assert bool(torch.isfinite(mean).all() & torch.isfinite(cov).all())
    torch.testing.assert_close(cov, cov.transpose(-1, -2), rtol=0, atol=0)
    assert bool((torch.linalg.eigvalsh(cov)[..., 0] > 0).all())


@pytest.mark.parametrize("m", [1, 2, 5, 8])
def test_random_stable_matrix(m):
    g = torch.Generator().manual_seed(m)
    A = random_stable_matrix(500, m, 0.95, g)
    assert A.shape == (500, m, m) and A.dtype == F64
    radius = torch.linalg.eigvals(A).abs().amax(-1)
    assert float(radius.max()) < 0.95
    assert float(torch.linalg.matrix_norm(A, ord=2).max()) < 0.95 + 1e-12  # normal: no transient growth
    torch.testing.assert_close(A, random_stable_matrix(500, m, 0.95, torch.Generator().manual_seed(m)))
    assert random_stable_matrix(2, m, 0.5, dtype=torch.float32).dtype == torch.float32


@pytest.mark.parametrize("kw,match", [
    ({"rho": 1.0}, r"rho must be a number in \(0, 1\) \(spectral radius bound; rho >= 1 is unstable\), got 1.0"),
    ({"rho": 1.5}, "rho must be a number in \\(0, 1\\)"),
    ({"rho": 0.0}, "rho must be a number in \\(0, 1\\)"),
    ({"m": 0}, r"m must be a positive integer \(state dimension\), got 0"),
    ({"B": 0}, r"B must be a positive integer \(number of matrices\), got 0"),
])
def test_random_stable_matrix_bad_settings(kw, match):
    args = {"B": 2, "m": 3, "rho": 0.9} | kw
    with pytest.raises(ValueError, match=match) as err:
        random_stable_matrix(**args)
    assert "\n" not in str(err.value)


def _good():
    return {"y": torch.zeros(2, 5, 2), "A": torch.eye(3), "C": torch.ones(2, 3), "Q": torch.eye(3), "R": torch.eye(2),
            "mu0": torch.zeros(3), "P0": torch.eye(3)}


@pytest.mark.parametrize("fn", [kalman_predictive, kalman_predictive_reference])
@pytest.mark.parametrize("change,match", [
    ({"A": torch.ones(3, 2)}, r"A must be square in its last two dimensions"),
    ({"A": torch.ones(2, 3, 3, 2)}, r"A must be square"),
    ({"A": torch.eye(3).expand(4, 3, 3)}, r"A must have shape \[3, 3\] or \[2, 3, 3\]"),
    ({"C": torch.ones(3, 3)}, r"C must have shape \[2, 3\] or \[2, 2, 3\] \(p = 2 outputs of y by m = 3 states"),
    ({"R": torch.zeros(2, 2)}, "R must be positive definite"),
    ({"R": torch.tensor([[1.0, 0.5], [0.0, 1.0]])}, "R must be symmetric"),
    ({"Q": -torch.eye(3)}, "Q must be positive semidefinite"),
    ({"P0": torch.diag(torch.tensor([1.0, -1e-3, 1.0]))}, "P0 must be positive semidefinite"),
    ({"mu0": torch.zeros(4)}, r"mu0 must have shape \[3\] or \[2, 3\]"),
    ({"y": torch.zeros(2, 0, 2)}, r"y must have shape \[B, T, p\] with T >= 1"),
    ({"y": torch.zeros(2, 5)}, r"y must have shape \[B, T, p\]"),
    ({"y": torch.full((2, 5, 2), float("nan"))}, "y must be finite"),
    ({"Q": torch.full((3, 3), float("inf"))}, "Q must be finite"),
    ({"A": torch.eye(3, dtype=torch.long)}, "A must be float32 or float64"),
])
def test_bad_settings_raise_one_line(fn, change, match):
    with pytest.raises(ValueError, match=match) as err:
        fn(**(_good() | change))
    assert "\n" not in str(err.value)
