"""Bits between Gaussians and Gaussian mixtures: closed forms against scipy and torch.distributions,
the mixture quadrature's entropy and KL against scipy.integrate.quad (its error measured, printed
and bounded, components' widths within a factor 1 to 100) and a fine trapezoid grid, and every bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats
from scipy.special import logsumexp

from bayesbench.oracle.gaussian_bits import (
    GL_NODES,
    gaussian_entropy_bits,
    gaussian_kl_bits,
    gaussian_nll_bits,
    mixture_entropy_bits,
    mixture_kl_bits,
    mixture_nll_bits,
    mvn_entropy_bits,
    mvn_kl_bits,
    mvn_nll_bits,
)

LN2 = math.log(2)
F64 = torch.float64


def _spd(p, seed, batch=()):
    g = torch.Generator().manual_seed(seed)
    G = torch.randn(*batch, p, p, generator=g, dtype=F64)
    return G @ G.transpose(-1, -2) + 0.3 * torch.eye(p, dtype=F64)


# ---- closed forms ------------------------------------------------------------------------------------

def test_gaussian_kl_against_numerical_integration():
    for m1, v1, m2, v2 in [(0.0, 1.0, 0.0, 1.0), (0.3, 0.5, -1.0, 2.0), (2.0, 3.0, 0.0, 0.1)]:
        p, q = stats.norm(m1, math.sqrt(v1)), stats.norm(m2, math.sqrt(v2))
        want = integrate.quad(lambda y: p.pdf(y) * (p.logpdf(y) - q.logpdf(y)), -40, 40, limit=200)[0] / LN2
        assert float(gaussian_kl_bits(m1, v1, m2, v2)) == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_univariate_against_scipy_broadcasting():
    y, m, v = torch.tensor([[-1.0, 0.5, 3.0]], dtype=F64), torch.tensor([[0.0], [1.0]], dtype=F64), 0.7
    want = -stats.norm(m.numpy(), math.sqrt(v)).logpdf(y.numpy()) / LN2
    np.testing.assert_allclose(gaussian_nll_bits(y, m, v).numpy(), want, rtol=1e-13)
    assert float(gaussian_entropy_bits(2.5)) == pytest.approx(stats.norm(0, math.sqrt(2.5)).entropy() / LN2, rel=1e-13)


@pytest.mark.parametrize("p", [1, 2, 5])
def test_multivariate_against_scipy_and_torch(p):
    S1, S2 = _spd(p, 1, (3,)), _spd(p, 2, (3,))
    g = torch.Generator().manual_seed(p)
    m1, m2, y = (torch.randn(3, p, generator=g, dtype=F64) for _ in range(3))
    N1, N2 = (torch.distributions.MultivariateNormal(m, S) for m, S in ((m1, S1), (m2, S2)))
    torch.testing.assert_close(mvn_kl_bits(m1, S1, m2, S2), torch.distributions.kl_divergence(N1, N2) / LN2,
                               rtol=1e-11, atol=1e-13)
    torch.testing.assert_close(mvn_entropy_bits(S1), N1.entropy() / LN2, rtol=1e-12, atol=0)
    want = [-stats.multivariate_normal(m1[b].numpy(), S1[b].numpy()).logpdf(y[b].numpy()) / LN2 for b in range(3)]
    np.testing.assert_allclose(mvn_nll_bits(y, m1, S1).numpy(), want, rtol=1e-11)
    assert bool((mvn_kl_bits(m1, S1, m1, S1).abs() < 1e-12).all())
    if p == 1:
        torch.testing.assert_close(mvn_kl_bits(m1, S1, m2, S2), gaussian_kl_bits(m1[:, 0], S1[:, 0, 0], m2[:, 0],
                                                                                 S2[:, 0, 0]), rtol=1e-12, atol=0)


# ---- mixtures by the one quadrature, against scipy.integrate.quad ----------------------------------------------

def _pdf(w, m, v):
    return lambda y: sum(wi * math.exp(-0.5 * (y - mi) ** 2 / vi) / math.sqrt(2 * math.pi * vi)
                         for wi, mi, vi in zip(w, m, v))


def _quad(f, m, v, also=()):
    """An integral over p's range (components (m, v)), split at their means and the points `also`
    (q's means), to 1e-13."""
    lo = min(mi - 14 * math.sqrt(vi) for mi, vi in zip(m, v))
    hi = max(mi + 14 * math.sqrt(vi) for mi, vi in zip(m, v))
    points = sorted({*m, *(a for a in also if lo < a < hi)})
    value, err = integrate.quad(f, lo, hi, points=points, limit=1000, epsabs=1e-14, epsrel=1e-13)
    assert err < 1e-10
    return value


def _logpdf(w, m, v):
    """log p(y) in nats, y a float (pure Python, for quad's many calls) or an array."""
    terms = [(math.log(wi) - 0.5 * math.log(2 * math.pi * vi), mi, vi) for wi, mi, vi in zip(w, m, v) if wi > 0]

    def logp(y):
        if isinstance(y, np.ndarray):
            return logsumexp(np.stack([c - 0.5 * (y - mi) ** 2 / vi for c, mi, vi in terms]), axis=0)
        e = [c - 0.5 * (y - mi) ** 2 / vi for c, mi, vi in terms]
        top = max(e)
        return top + math.log(sum(math.exp(x - top) for x in e))

    return logp


def _grid(f, ms, vs, narrowest):
    """An integral over the range the components (ms, vs) reach within 14 standard deviations, by
    the trapezoid rule on equally spaced points a twentieth of `narrowest` apart (spectrally
    accurate for these smooth, vanishing integrands)."""
    sd = np.sqrt(np.asarray(vs))
    lo, hi = float(np.min(ms - 14 * sd)), float(np.max(ms + 14 * sd))
    y = np.linspace(lo, hi, int((hi - lo) / (narrowest / 20)) + 2)
    return float(np.trapezoid(f(y), y))


def _quad_entropy_bits(w, m, v):
    p = _pdf(w, m, v)
    return _quad(lambda y: -p(y) * math.log(p(y)) if p(y) > 0 else 0.0, m, v) / LN2


def _random_mixtures(count, width_ratio, seed):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        J = int(rng.integers(1, 5))
        sd = np.exp(rng.uniform(0, math.log(width_ratio), J)) if width_ratio > 1 else np.ones(J)
        yield rng.dirichlet(np.ones(J)), rng.normal(0, 2, J), sd**2


#: The stated error of the mixture quadrature (oracle/gaussian_bits.py's docstring); measured
#: below 2e-11 bits on these mixtures.
QUADRATURE_BITS = 1e-9


@pytest.mark.parametrize("width_ratio", [1, 10, 100])
def test_mixture_entropy_and_kl_against_quad(width_ratio):
    """Entropy and KL(mixture || mixture) of random mixtures, components' standard deviations
    equal or within a factor 10 or 100: within QUADRATURE_BITS of a trapezoid rule on a grid a
    twentieth of the narrowest component's standard deviation (`_grid`)."""
    worst_h = worst_kl = 0.0
    mixtures = list(_random_mixtures(8, width_ratio, seed=width_ratio))
    for (w, m, v), (qw, qm, qv) in zip(mixtures, mixtures[1:] + mixtures[:1]):
        lp, lq = _logpdf(w, m, v), _logpdf(qw, qm, qv)
        narrowest = math.sqrt(min(v.min(), qv.min()))
        want_h = _grid(lambda y: -np.exp(lp(y)) * lp(y), m, v, narrowest) / LN2
        want_kl = _grid(lambda y: np.exp(lp(y)) * (lp(y) - lq(y)), m, v, narrowest) / LN2
        got_h = float(mixture_entropy_bits(torch.tensor(w), torch.tensor(m), torch.tensor(v)))
        got_kl = float(mixture_kl_bits(*(torch.tensor(a) for a in (w, m, v, qw, qm, qv))))
        worst_h, worst_kl = max(worst_h, abs(got_h - want_h)), max(worst_kl, abs(got_kl - want_kl))
    print(f"width ratio <= {width_ratio}: worst |error| entropy {worst_h:.1e}, KL {worst_kl:.1e} bits "
          f"({GL_NODES} Gauss-Legendre nodes per interval)")
    assert worst_h < QUADRATURE_BITS and worst_kl < QUADRATURE_BITS


def test_one_component_mixture_is_the_gaussian():
    v = torch.tensor([[0.3], [4.0]], dtype=F64)
    torch.testing.assert_close(mixture_entropy_bits(torch.ones(2, 1, dtype=F64), torch.zeros(2, 1, dtype=F64), v),
                               gaussian_entropy_bits(v[:, 0]), rtol=1e-11, atol=0)
    torch.testing.assert_close(
        mixture_kl_bits(torch.ones(1), torch.tensor([0.5]), torch.tensor([2.0]), torch.ones(1), torch.tensor([-1.0]),
                        torch.tensor([0.5])), gaussian_kl_bits(0.5, 2.0, -1.0, 0.5), rtol=1e-12, atol=1e-14)


def test_mixture_kl_against_scipy_quad():
    """KL(mixture || Gaussian) (closed-form cross term) and KL(mixture || mixture) (both by
    quadrature), components' widths within a factor 2, against scipy.integrate.quad."""
    rng = np.random.default_rng(3)
    for _ in range(6):
        w, m, v = (rng.dirichlet(np.ones(3)), rng.normal(0, 1.5, 3), rng.uniform(0.5, 2, 3))
        qw, qm, qv = (rng.dirichlet(np.ones(2)), rng.normal(0, 1.5, 2), rng.uniform(0.5, 2, 2))
        lp, lq = _logpdf(w, m, v), _logpdf(qw, qm, qv)
        want = _quad(lambda y: math.exp(lp(y)) * (lp(y) - lq(y)), m, v, qm) / LN2
        got = mixture_kl_bits(*(torch.tensor(a) for a in (w, m, v, qw, qm, qv)))
        assert float(got) == pytest.approx(want, abs=QUADRATURE_BITS)
        g = stats.norm(0.3, 1.2)
        want_g = _quad(lambda y: math.exp(lp(y)) * (lp(y) - g.logpdf(y)), m, v, [0.3]) / LN2
        got_g = mixture_kl_bits(*(torch.tensor(a) for a in (w, m, v)), torch.ones(1, dtype=F64),
                                torch.tensor([0.3], dtype=F64), torch.tensor([1.44], dtype=F64))
        assert float(got_g) == pytest.approx(want_g, abs=QUADRATURE_BITS)


def test_mixture_nll_and_batching():
    w = torch.tensor([[0.2, 0.8], [1.0, 0.0]], dtype=F64)
    m = torch.tensor([[0.0, 3.0], [1.0, 5.0]], dtype=F64)
    v = torch.tensor([[1.0, 0.5], [2.0, 1.0]], dtype=F64)
    y = torch.tensor([0.7, -0.3], dtype=F64)
    want = [-math.log(_pdf(w[b].tolist(), m[b].tolist(), v[b].tolist())(float(y[b]))) / LN2 for b in range(2)]
    np.testing.assert_allclose(mixture_nll_bits(y, w, m, v).numpy(), want, rtol=1e-13)
    batched = mixture_entropy_bits(w, m, v)
    for b in range(2):
        assert float(batched[b]) == pytest.approx(float(mixture_entropy_bits(w[b], m[b], v[b])), rel=1e-14)


# ---- bad inputs ------------------------------------------------------------------------------------

@pytest.mark.parametrize("call,match", [
    (lambda: gaussian_kl_bits(0, 0.0, 0, 1), r"var1 must be positive \(a variance > 0\); found 0.0"),
    (lambda: gaussian_nll_bits(0, 0, -1), r"var must be positive"),
    (lambda: gaussian_entropy_bits(float("nan")), "var must be finite"),
    (lambda: gaussian_nll_bits("a", 0, 1), "y must be a number or a tensor of numbers"),
    (lambda: mvn_entropy_bits(torch.ones(2, 3)), r"cov must be square in its last two dimensions"),
    (lambda: mvn_entropy_bits(-torch.eye(2)), r"cov must be positive definite \(a covariance; its Cholesky"),
    (lambda: mvn_nll_bits(torch.zeros(2), torch.zeros(2), torch.tensor([[1.0, 0.5], [0.0, 1.0]])),
     r"cov must be symmetric \(a covariance\)"),
    (lambda: mvn_kl_bits(torch.zeros(2), torch.eye(2), torch.zeros(3), torch.eye(3)),
     "must agree in their dimension p"),
    (lambda: mixture_entropy_bits(torch.tensor([0.5, 0.6], dtype=F64), torch.zeros(2), torch.ones(2)),
     r"weights must sum to 1 over the last dimension \(within 1e-06\); a row sums to 1.1"),
    (lambda: mixture_entropy_bits(torch.tensor([0.5, 0.5001]), torch.zeros(2), torch.ones(2)),
     r"weights must sum to 1 over the last dimension \(within 0.0001\)"),
    (lambda: mixture_entropy_bits(torch.tensor([1.2, -0.2]), torch.zeros(2), torch.ones(2)),
     r"weights must each lie in \[0, 1\]"),
    (lambda: mixture_entropy_bits(torch.ones(1), torch.zeros(1), torch.zeros(1)), "variances must be positive"),
    (lambda: mixture_entropy_bits(torch.ones(1), torch.zeros(1), torch.ones(1), nodes=0),
     r"nodes must be a positive integer \(Gauss-Legendre nodes per interval\), got 0"),
    (lambda: mixture_entropy_bits(torch.tensor([0.5, 0.5]), torch.zeros(3), torch.ones(2)), "must broadcast together"),
    (lambda: mixture_kl_bits(torch.ones(1), torch.zeros(1), torch.ones(1), torch.tensor([0.7]), torch.zeros(1),
                             torch.ones(1)), "q_weights must sum to 1"),
    (lambda: mixture_nll_bits(0.0, torch.ones(0), torch.zeros(0), torch.ones(0)), r"at least one component"),
])
def test_bad_inputs_raise_one_line(call, match):
    with pytest.raises(ValueError, match=match) as err:
        call()
    assert "\n" not in str(err.value)
