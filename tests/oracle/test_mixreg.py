"""Mixture-of-Gaussians regression oracle: fast path against the float64 reference, a one-component
mixture against linreg, point-mass components against the pool, importance sampling of (j, w)
from the prior, long contexts, and every bad setting."""

from __future__ import annotations

import math

import pytest
import torch
from importance import importance_predictive, regression_data

from bayesbench.oracle.gaussian_bits import mixture_logpdf
from bayesbench.oracle.linreg import linreg_predictive, pool_predictive
from bayesbench.oracle.mixreg import mixreg_predictive, mixreg_predictive_reference

F64 = torch.float64


def _prior(J, d, seed, sparse=False):
    g = torch.Generator().manual_seed(seed)
    w = torch.rand(J, generator=g, dtype=F64) + 0.2
    means = torch.randn(J, d, generator=g, dtype=F64)
    var = torch.rand(J, d, generator=g, dtype=F64) + 0.1
    if sparse:  # the last component: only the first coordinate free, the rest pinned to 0
        means[-1], var[-1, 1:] = 0.0, 0.0
    return w / w.sum(), means, var


# (B, n, d, J, sparse, sigma)
AWKWARD = [(1, 1, 1, 1, False, 0.5), (3, 7, 2, 1, False, 0.3), (2, 10, 4, 2, True, 0.5), (1, 5, 1, 3, False, 1.0),
           (4, 30, 5, 2, True, 0.05), (2, 6, 8, 4, False, 0.2)]


@pytest.mark.parametrize("B,n,d,J,sparse,sigma", AWKWARD)
def test_fast_path_equals_reference(B, n, d, J, sparse, sigma):
    weights, means, var = _prior(J, d, seed=n + d + J, sparse=sparse)
    x, y = regression_data(B, n, d, 1.0, sigma, seed=B + n)
    post, mean, pvar = mixreg_predictive(x, y, weights, means, var, sigma)
    want = mixreg_predictive_reference(x, y, weights, means, var, sigma)
    assert post.shape == mean.shape == pvar.shape == (B, n, J)
    torch.testing.assert_close(pvar, want[2], rtol=1e-10, atol=0)
    assert float(((mean - want[1]).abs() / want[2].sqrt()).max()) < 1e-10
    torch.testing.assert_close(post, want[0], rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(post.sum(-1), torch.ones(B, n, dtype=F64))
    torch.testing.assert_close(post[:, 0], weights.expand(B, J))


def test_isotropic_variances_equal_the_diagonal_written_out():
    weights, means, _ = _prior(2, 3, seed=4)
    x, y = regression_data(2, 6, 3, 1.0, 0.5, seed=4)
    iso = torch.tensor([0.5, 2.0], dtype=F64)
    for a, b in zip(mixreg_predictive(x, y, weights, means, iso, 0.5),
                    mixreg_predictive(x, y, weights, means, iso.unsqueeze(-1).expand(2, 3), 0.5)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("B,n,d,tau,sigma", [(1, 1, 1, 1.0, 0.5), (3, 9, 4, 2.0, 0.1), (2, 20, 20, 1.0, 0.5)])
def test_one_component_equals_linreg(B, n, d, tau, sigma):
    x, y = regression_data(B, n, d, tau, sigma, seed=d)
    post, mean, var = mixreg_predictive(x, y, torch.ones(1, dtype=F64), torch.zeros(1, d, dtype=F64),
                                        torch.tensor([tau**2], dtype=F64), sigma)
    want_mean, want_var = linreg_predictive(x, y, tau, sigma)
    assert bool((post == 1).all())
    torch.testing.assert_close(mean[..., 0], want_mean, rtol=0, atol=0)
    torch.testing.assert_close(var[..., 0], want_var, rtol=0, atol=0)


def test_point_mass_components_equal_the_pool():
    """Zero variance: each component is one pool member, drawn uniformly."""
    g = torch.Generator().manual_seed(5)
    pool = torch.randn(5, 3, generator=g, dtype=F64)
    x, y = regression_data(3, 12, 3, 1.0, 0.4, seed=5)
    post, mean, var = mixreg_predictive(x, y, torch.full((5,), 0.2, dtype=F64), pool, torch.zeros(5, dtype=F64), 0.4)
    weights, means, pvar = pool_predictive(x, y, pool, 0.4)
    torch.testing.assert_close(post, weights, rtol=1e-10, atol=1e-14)
    torch.testing.assert_close(mean, means, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(var, torch.full_like(var, pvar), rtol=1e-12, atol=0)


@pytest.mark.parametrize("k", [0, 2, 4])
def test_equals_importance_sampling_of_component_and_w(k):
    """Independent: draw (j, w) from the mixture prior (1,000,000 draws), weight by the context's
    likelihood, average the predictive density of y_k at three points. Tolerance 2% of the
    density; the Monte Carlo standard error must be below a quarter of it (printed with -s)."""
    d, sigma = 2, 1.0
    weights = torch.tensor([0.3, 0.7], dtype=F64)
    means = torch.tensor([[2.0, -1.0], [0.0, 0.0]], dtype=F64)
    var = torch.tensor([[0.3, 0.3], [1.0, 0.0]], dtype=F64)  # a dense component and a sparse one
    x, y = regression_data(2, 5, d, 1.0, sigma, seed=11)
    post, mean, pvar = mixreg_predictive(x, y, weights, means, var, sigma)
    g = torch.Generator().manual_seed(100 + k)
    N = 1_000_000
    j = torch.multinomial(weights, N, replacement=True, generator=g)
    w = means[j] + var[j].sqrt() * torch.randn(N, d, generator=g, dtype=F64)
    for b in range(2):
        sd = float((post[b, k] * (pvar[b, k] + mean[b, k] ** 2)).sum() - (post[b, k] * mean[b, k]).sum() ** 2) ** 0.5
        centre = float((post[b, k] * mean[b, k]).sum())
        points = centre + sd * torch.tensor([-1.0, 0.0, 1.0], dtype=F64)
        exact = mixture_logpdf(points, post[b, k], mean[b, k], pvar[b, k]).exp()
        dens, se = importance_predictive(w, x[b], y[b], k, sigma, points)["density"]
        print(f"k={k} b={b}: density rel. error {((dens - exact).abs() / exact).max():.2e}, "
              f"MC se {(se / exact).max():.2e}")
        assert bool((se / exact < 0.005).all())
        assert bool(((dens - exact).abs() / exact < 0.02).all())


def test_log_space_keeps_long_contexts_finite():
    """500 pairs from the sparse component: its weight goes to 1, no NaN from underflow."""
    weights = torch.tensor([0.5, 0.5], dtype=F64)
    means = torch.zeros(2, 4, dtype=F64)
    var = torch.tensor([[1.0] * 4, [1.0, 0, 0, 0]], dtype=F64)
    g = torch.Generator().manual_seed(6)
    x = torch.randn(2, 500, 4, generator=g, dtype=F64)
    w = torch.tensor([0.8, 0, 0, 0], dtype=F64)
    y = x @ w + 0.1 * torch.randn(2, 500, generator=g, dtype=F64)
    post, mean, var_ = mixreg_predictive(x, y, weights, means, var, 0.1)
    assert bool(torch.isfinite(post).all() & torch.isfinite(mean).all() & torch.isfinite(var_).all())
    assert float(post[:, -1, 1].min()) > 0.999  # the Occam factor of 3 superfluous dimensions


def test_zero_weight_component_gets_no_posterior():
    x, y = regression_data(2, 4, 2, 1.0, 0.5, seed=8)
    post, _, _ = mixreg_predictive(x, y, torch.tensor([0.0, 1.0], dtype=F64), torch.zeros(2, 2, dtype=F64),
                                   torch.ones(2, dtype=F64), 0.5)
    assert bool((post[..., 0] == 0).all()) and not bool(torch.isnan(post).any())


def _good():
    return torch.tensor([0.4, 0.6]), torch.zeros(2, 3), torch.ones(2)


@pytest.mark.parametrize("fn", [mixreg_predictive, mixreg_predictive_reference])
@pytest.mark.parametrize("change,match", [
    ({"weights": torch.tensor([1.5, -0.5])}, r"weights must each lie in \[0, 1\] \(mixture weights\); found 1.5"),
    ({"weights": torch.tensor([0.4, 0.4])}, "weights must sum to 1 over the last dimension .* sums to 0.8"),
    ({"weights": torch.tensor([[0.4, 0.6]])}, r"weights must have shape \[J\]"),
    ({"weights": torch.tensor([float("nan"), 0.5])}, "weights must be finite"),
    ({"means": torch.zeros(2, 4)}, r"means must have shape \[J, d\] = \[2, 3\]"),
    ({"means": torch.zeros(3, 3)}, r"means must have shape \[J, d\] = \[2, 3\]"),
    ({"variances": torch.tensor([1.0, -0.1])}, r"variances must be >= 0 .* found -0.1"),
    ({"variances": torch.ones(2, 2)}, r"variances must have shape \[J\] = \[2\] \(s_j\^2 I\) or \[J, d\] = \[2, 3\]"),
    ({"variances": torch.tensor([1.0, float("inf")])}, "variances must be finite"),
    ({"sigma": 0.0}, "sigma must be a positive finite number, got 0.0"),
    ({"sigma": -2.0}, "sigma must be a positive finite number, got -2.0"),
    ({"x": torch.zeros(2, 3, 0)}, r"x must have at least one feature \(d >= 1\)"),
    ({"x": torch.zeros(2, 0, 3), "y": torch.zeros(2, 0)}, r"x must have at least one position \(n >= 1\)"),
])
def test_bad_settings_raise_one_line(fn, change, match):
    args = {"x": torch.zeros(2, 4, 3), "y": torch.zeros(2, 4), "weights": _good()[0], "means": _good()[1],
            "variances": _good()[2], "sigma": 0.5} | change
    with pytest.raises(ValueError, match=match) as err:
        fn(**args)
    assert "\n" not in str(err.value)


def test_float32_prior_gives_the_float64_answer():
    weights, means, var = _prior(2, 3, seed=9)
    x, y = regression_data(2, 5, 3, 1.0, 0.5, seed=9)
    got = mixreg_predictive(x.float(), y.float(), weights.float(), means.float(), var.float(), 0.5)
    want = mixreg_predictive_reference(x.float().double(), y.float().double(), weights.float().double(),
                                       means.float().double(), var.float().double(), 0.5)
    for a, b in zip(got, want):
        assert a.dtype == F64
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
    assert math.isclose(float(got[0][0, 0].sum()), 1.0)
