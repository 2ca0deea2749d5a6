"""Bayesian linear regression oracle: fast path against the float64 reference, against brute-force
Bayes by importance sampling, the pool predictive against its plain reference, enumeration and
importance sampling of the pool member, and every bad setting."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from importance import importance_predictive, regression_data

from bayesbench.oracle.gaussian_bits import mixture_nll_bits
from bayesbench.oracle.linreg import (
    linreg_predictive,
    linreg_predictive_reference,
    pool_predictive,
    pool_predictive_reference,
)

# (B, n, d, tau, sigma): one of everything, d > n, a long context, large tau with small sigma.
AWKWARD = [(1, 1, 1, 1.0, 0.5), (1, 6, 1, 1.0, 0.1), (3, 1, 4, 2.0, 1.0), (2, 12, 3, 3.0, 0.05),
           (4, 8, 20, 1.0, 0.5), (5, 40, 20, 1.0, 0.3), (2, 25, 2, 0.01, 2.0)]


@pytest.mark.parametrize("B,n,d,tau,sigma", AWKWARD)
def test_fast_path_equals_reference(B, n, d, tau, sigma):
    x, y = regression_data(B, n, d, tau, sigma, seed=B * 1000 + n * 10 + d)
    mean, var = linreg_predictive(x, y, tau, sigma)
    want_mean, want_var = linreg_predictive_reference(x, y, tau, sigma)
    assert mean.dtype == var.dtype == torch.float64 and mean.shape == var.shape == (B, n)
    torch.testing.assert_close(var, want_var, rtol=1e-10, atol=0)
    # the mean to 1e-10 of the predictive's standard deviation (it may itself be near 0)
    assert float(((mean - want_mean).abs() / want_var.sqrt()).max()) < 1e-10


def test_first_position_is_the_prior_predictive():
    x, y = regression_data(3, 4, 5, 2.0, 0.5, seed=1)
    mean, var = linreg_predictive(x, y, 2.0, 0.5)
    torch.testing.assert_close(mean[:, 0], torch.zeros(3, dtype=torch.float64))
    torch.testing.assert_close(var[:, 0], 0.25 + 4.0 * (x[:, 0] ** 2).sum(-1), rtol=1e-14, atol=0)


def test_float32_inputs_give_the_float64_answer():
    x, y = regression_data(2, 5, 3, 1.0, 0.5, seed=2)
    x, y = x.float(), y.float()
    got = linreg_predictive(x, y, 1.0, 0.5)
    want = linreg_predictive_reference(x.double(), y.double(), 1.0, 0.5)
    for a, b in zip(got, want):
        assert a.dtype == torch.float64
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("k", [0, 1, 3, 5])
def test_equals_importance_sampling_of_w(k):
    """Independent: sample w from its prior (1,000,000 draws), weight by the context's likelihood,
    average the predictive density of y_k at three points and its mean. Tolerance 2% of the
    density (and 2% of the predictive sd for the mean); the Monte Carlo standard error must be
    below a quarter of it (printed with -s)."""
    tau, sigma, d = 1.0, 1.0, 2
    x, y = regression_data(2, 6, d, tau, sigma, seed=7)
    mean, var = linreg_predictive(x, y, tau, sigma)
    w = tau * torch.randn(1_000_000, d, generator=torch.Generator().manual_seed(k), dtype=torch.float64)
    for b in range(2):
        sd = math.sqrt(var[b, k])
        points = mean[b, k] + sd * torch.tensor([-1.0, 0.0, 1.5], dtype=torch.float64)
        exact = torch.exp(-0.5 * ((points - mean[b, k]) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
        est = importance_predictive(w, x[b], y[b], k, sigma, points)
        dens, se = est["density"]
        print(f"k={k} b={b}: density rel. error {((dens - exact).abs() / exact).max():.2e}, "
              f"MC se {(se / exact).max():.2e}")
        assert bool((se / exact < 0.005).all())
        assert bool(((dens - exact).abs() / exact < 0.02).all())
        m_est, m_se = est["mean"]
        assert float(m_se) < 0.005 * sd and abs(float(m_est) - float(mean[b, k])) < 0.02 * sd


def _pool_enumeration(x, y, pool, sigma):
    """p(w_m | pairs before k) by multiplying the likelihoods out, member by member (numpy)."""
    B, n, _ = x.shape
    M = pool.shape[0]
    post = np.zeros((B, n, M))
    for b in range(B):
        for k in range(n):
            lik = np.ones(M)
            for m in range(M):
                for j in range(k):
                    r = y[b, j] - pool[m] @ x[b, j]
                    lik[m] *= math.exp(-0.5 * r * r / sigma**2) / (sigma * math.sqrt(2 * math.pi))
            post[b, k] = lik / lik.sum()
    return post


@pytest.mark.parametrize("B,n,d,M", [(1, 1, 1, 1), (2, 6, 3, 4), (3, 8, 1, 5)])
def test_pool_equals_enumeration(B, n, d, M):
    g = torch.Generator().manual_seed(M)
    pool = torch.randn(M, d, generator=g, dtype=torch.float64)
    x = torch.randn(B, n, d, generator=g, dtype=torch.float64)
    w = pool[torch.randint(0, M, (B,), generator=g)]
    y = (x @ w.unsqueeze(-1)).squeeze(-1) + 0.7 * torch.randn(B, n, generator=g, dtype=torch.float64)
    weights, means, var = pool_predictive(x, y, pool, 0.7)
    assert var == pytest.approx(0.49)
    np.testing.assert_allclose(weights.numpy(), _pool_enumeration(x.numpy(), y.numpy(), pool.numpy(), 0.7),
                               rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(means.numpy(), np.einsum("bnd,md->bnm", x.numpy(), pool.numpy()), rtol=1e-12)
    # a per-sequence pool [B, M, d] equal to the shared one gives the same answer
    same = pool_predictive(x, y, pool.expand(B, M, d), 0.7)
    torch.testing.assert_close(same[0], weights)
    assert bool(torch.isfinite(mixture_nll_bits(y, weights, means, torch.tensor(var))).all())


@pytest.mark.parametrize("B,n,d,M,shared", [(1, 1, 1, 1, True), (1, 5, 1, 1, True), (2, 1, 3, 4, True),
                                             (3, 9, 1, 6, False), (2, 12, 4, 32, True)])
def test_pool_fast_path_equals_reference(B, n, d, M, shared):
    """Awkward shapes: M = 1 (the member is known: weights 1), d = 1, n = 1 (the prior only), a
    per-sequence pool [B, M, d]."""
    g = torch.Generator().manual_seed(B + n + d + M)
    pool = torch.randn(M, d, generator=g, dtype=torch.float64) if shared else torch.randn(B, M, d, generator=g,
                                                                                          dtype=torch.float64)
    x = torch.randn(B, n, d, generator=g, dtype=torch.float64)
    y = torch.randn(B, n, generator=g, dtype=torch.float64)
    fast, ref = pool_predictive(x, y, pool, 0.3), pool_predictive_reference(x, y, pool, 0.3)
    torch.testing.assert_close(fast[0], ref[0], rtol=1e-10, atol=1e-14)
    torch.testing.assert_close(fast[1], ref[1], rtol=1e-12, atol=1e-14)
    assert fast[2] == ref[2] == pytest.approx(0.09)
    torch.testing.assert_close(fast[0][:, 0], torch.full((B, M), 1.0 / M, dtype=torch.float64))
    if M == 1:
        assert bool((fast[0] == 1).all())


def test_pool_equals_importance_sampling_of_the_member():
    """Independent: draw the member uniformly from the pool (200,000 draws of the prior), weight by
    the context's likelihood (tests/importance.py), and average the predictive density at three
    points: within 2%, the Monte Carlo standard error below 0.5% (printed with -s)."""
    g = torch.Generator().manual_seed(5)
    pool = torch.randn(6, 2, generator=g, dtype=torch.float64)
    x = torch.randn(1, 5, 2, generator=g, dtype=torch.float64)
    y = (x @ pool[4]) + 0.8 * torch.randn(1, 5, generator=g, dtype=torch.float64)
    weights, means, var = pool_predictive(x, y, pool, 0.8)
    w = pool[torch.randint(0, 6, (200_000,), generator=g)]
    for k in (0, 2, 4):
        points = (weights[0, k] * means[0, k]).sum() + torch.tensor([-1.0, 0.0, 1.5], dtype=torch.float64)
        exact = torch.exp(-mixture_nll_bits(points, weights[0, k], means[0, k], torch.tensor(var)) * math.log(2))
        dens, se = importance_predictive(w, x[0], y[0], k, 0.8, points)["density"]
        print(f"pool k={k}: density rel. error {((dens - exact).abs() / exact).max():.2e}, "
              f"MC se {(se / exact).max():.2e}")
        assert bool((se / exact < 0.005).all()) and bool(((dens - exact).abs() / exact < 0.02).all())


def test_pool_stays_finite_on_long_contexts():
    """Log space: 2000 pairs, where the likelihoods themselves underflow to 0."""
    g = torch.Generator().manual_seed(3)
    pool = torch.randn(8, 4, generator=g, dtype=torch.float64)
    x = torch.randn(2, 2000, 4, generator=g, dtype=torch.float64)
    y = (x @ pool[2]) + 0.1 * torch.randn(2, 2000, generator=g, dtype=torch.float64)
    weights, _, _ = pool_predictive(x, y, pool, 0.1)
    assert bool(torch.isfinite(weights).all())
    assert float(weights[:, -1, 2].min()) == pytest.approx(1.0)


def _xy(B=2, n=3, d=2):
    return regression_data(B, n, d, 1.0, 0.5, seed=0)


@pytest.mark.parametrize("fn", [linreg_predictive, linreg_predictive_reference])
@pytest.mark.parametrize("args,match", [
    ((torch.zeros(2, 3, 0), torch.zeros(2, 3), 1.0, 0.5), r"x must have at least one feature \(d >= 1\)"),
    ((torch.zeros(2, 0, 2), torch.zeros(2, 0), 1.0, 0.5), r"x must have at least one position \(n >= 1\)"),
    ((*_xy(), 1.0, 0.0), "sigma must be a positive finite number, got 0.0"),
    ((*_xy(), 1.0, -1), "sigma must be a positive finite number, got -1"),
    ((*_xy(), 0.0, 0.5), "tau must be a positive finite number, got 0.0"),
    ((*_xy(), float("nan"), 0.5), "tau must be a positive finite number, got nan"),
    ((_xy()[0], torch.zeros(2, 4, dtype=torch.float64), 1.0, 0.5), r"y must have shape \[B, n\] = \[2, 3\]"),
    ((torch.zeros(2, 3), torch.zeros(2, 3), 1.0, 0.5), r"x must have shape \[B, n, d\]"),
    ((torch.zeros(2, 3, 2, dtype=torch.long), torch.zeros(2, 3), 1.0, 0.5), "x must be float32 or float64"),
    ((torch.full((2, 3, 2), float("nan")), torch.zeros(2, 3), 1.0, 0.5), r"x must be finite"),
    (([[1.0]], torch.zeros(1, 1), 1.0, 0.5), "x must be a torch.Tensor"),
])
def test_bad_settings_raise_one_line(fn, args, match):
    with pytest.raises(ValueError, match=match) as err:
        fn(*args)
    assert "\n" not in str(err.value)


def test_a_prior_too_wide_for_float64_is_refused():
    x, y = regression_data(1, 30, 3, 1.0, 1.0, seed=3)
    with pytest.raises(ValueError, match=r"prior variance / sigma\^2 = 1e\+32 is too large for float64"):
        linreg_predictive(x, y, 1e8, 1e-8)


@pytest.mark.parametrize("pool,sigma,match", [
    (torch.zeros(4, 3), 0.5, r"pool must have shape \[M, d\] or \[B, M, d\] with M >= 1, d = 2"),
    (torch.zeros(0, 2), 0.5, "pool must have shape"),
    (torch.zeros(3, 4, 2), 0.5, "pool must have shape"),
    (torch.full((4, 2), float("inf")), 0.5, "pool must be finite"),
    (torch.zeros(4, 2), 0, "sigma must be a positive finite number"),
])
def test_pool_bad_settings(pool, sigma, match):
    x, y = _xy()
    with pytest.raises(ValueError, match=match):
        pool_predictive(x, y, pool, sigma)


def test_the_cpu_chunks_change_no_bit(monkeypatch):
    """The fast path runs on the CPU in chunks of CPU_CHUNK sequences (cache-sized): bit for bit the
    one-call answer, a per-sequence prior [B, d] sliced with its sequences (mixreg's path)."""
    from bayesbench.oracle import linreg as oracle

    x, y = regression_data(11, 5, 3, 1.0, 0.5, seed=4)
    g = torch.Generator().manual_seed(4)
    prior_mean, prior_var = torch.randn(11, 3, generator=g, dtype=torch.float64), torch.rand(11, 3, generator=g,
                                                                                            dtype=torch.float64)
    whole = [oracle.gaussian_prior_predictive(x, y, prior_mean, prior_var, 0.5), linreg_predictive(x, y, 1.0, 0.5)]
    monkeypatch.setattr(oracle, "CPU_CHUNK", 4)
    chunked = [oracle.gaussian_prior_predictive(x, y, prior_mean, prior_var, 0.5), linreg_predictive(x, y, 1.0, 0.5)]
    for a, b in zip(whole, chunked):
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
