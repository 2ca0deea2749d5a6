"""Sticky and in-context Markov predictives against direct integration and Monte Carlo."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from bayesbench.oracle import markov_predictive, sticky_predictive


def sticky_by_integration(seq, V, a, b):
    """P(x_{t+1} = x_t | x_1..t) by integrating rho against its posterior numerically."""
    out = []
    for t in range(len(seq)):
        stays = sum(seq[s] == seq[s - 1] for s in range(1, t + 1))
        moves = t - stays
        like = lambda r: r**stays * ((1 - r) / (V - 1)) ** moves * stats.beta.pdf(r, a, b)  # noqa: E731
        num = integrate.quad(lambda r: r * like(r), 0, 1, epsabs=0, epsrel=1e-11, limit=200)[0]
        den = integrate.quad(like, 0, 1, epsabs=0, epsrel=1e-11, limit=200)[0]
        out.append(num / den)
    return np.array(out)


@pytest.mark.parametrize("a,b", [(1.0, 1.0), (2.0, 5.0), (0.7, 1.3)])
def test_sticky_matches_integration_over_rho(a, b):
    V = 4
    seq = torch.tensor([[0, 0, 1, 1, 1, 3, 3, 0, 2, 2, 2, 2]])
    pred = sticky_predictive(seq, V, a, b, dtype=torch.float64)[0]
    want_stay = sticky_by_integration(seq[0].tolist(), V, a, b)
    got_stay = pred.gather(1, seq[0].unsqueeze(1)).squeeze(1).numpy()
    np.testing.assert_allclose(got_stay, want_stay, rtol=1e-8)
    others = pred.clone()
    others.scatter_(1, seq[0].unsqueeze(1), float("nan"))
    np.testing.assert_allclose(np.nansum(others.numpy(), 1), 1 - want_stay, rtol=1e-8)
    # every non-current symbol gets the same share
    off = others.numpy()
    np.testing.assert_allclose(np.nanmax(off, 1), np.nanmin(off, 1), rtol=1e-12)


def test_markov_two_symbols_matches_beta_integration():
    alpha, V = 0.5, 2
    seq = torch.tensor([[0, 0, 1, 0, 1, 1, 1, 0]])
    pred = markov_predictive(seq, V, alpha, dtype=torch.float64)[0]
    s = seq[0].tolist()
    for t in range(len(s)):
        i = s[t]
        n = [0, 0]
        for u in range(t):
            if s[u] == i:
                n[s[u + 1]] += 1
        like = lambda r: r ** n[0] * (1 - r) ** n[1] * stats.beta.pdf(r, alpha, alpha)  # noqa: E731
        p0 = integrate.quad(lambda r: r * like(r), 0, 1, epsrel=1e-11)[0] / integrate.quad(like, 0, 1, epsrel=1e-11)[0]
        assert pred[t, 0].item() == pytest.approx(p0, rel=1e-7)


def test_markov_matches_monte_carlo_over_transition_matrices():
    """Importance sampling with the prior as proposal: 400k matrices, tolerance 5 standard errors."""
    V, alpha = 3, 1.0
    seq = [0, 1, 1, 2, 0, 1, 2, 2, 1]
    g = torch.Generator().manual_seed(0)
    from bayesbench.tasks._random import dirichlet

    T = dirichlet(alpha, (400_000, V, V), g, dtype=torch.float64)
    logw = sum(torch.log(T[:, seq[u], seq[u + 1]]) for u in range(len(seq) - 1))
    w = torch.exp(logw - logw.max())
    w = w / w.sum()
    mc = (w[:, None] * T[:, seq[-1], :]).sum(0)
    se = torch.sqrt((w[:, None] ** 2 * (T[:, seq[-1], :] - mc) ** 2).sum(0))
    got = markov_predictive(torch.tensor([seq]), V, alpha, dtype=torch.float64)[0, -1]
    assert ((got - mc).abs() < 5 * se + 1e-4).all(), (got, mc, se)


def test_markov_first_position_is_uniform_and_rows_sum_to_one():
    seq = torch.randint(0, 6, (5, 30), generator=torch.Generator().manual_seed(1))
    pred = markov_predictive(seq, 6, 0.3, dtype=torch.float64)
    torch.testing.assert_close(pred[:, 0], torch.full((5, 6), 1 / 6, dtype=torch.float64))
    torch.testing.assert_close(pred.sum(-1), torch.ones(5, 30, dtype=torch.float64))


@pytest.mark.parametrize(
    "fn,kwargs,message",
    [
        (sticky_predictive, {"V": 1}, r"V must be an integer >= 2"),
        (sticky_predictive, {"V": 4, "a": 0.0}, r"a must be a positive finite number"),
        (sticky_predictive, {"V": 4, "b": float("nan")}, r"b must be a positive finite number"),
        (markov_predictive, {"V": 4, "alpha": -1.0}, r"alpha must be a positive finite number"),
        (markov_predictive, {"V": 3}, r"seq must lie in \[0, 2\]; found 3"),
    ],
)
def test_bad_input_raises_a_clear_error(fn, kwargs, message):
    seq = torch.tensor([[0, 1, 2, 3]])
    with pytest.raises(ValueError, match=message):
        fn(seq, **kwargs)


def test_integer_output_dtype_is_rejected():
    seq = torch.tensor([[0, 1, 2, 3]])
    with pytest.raises(ValueError, match="dtype must be torch.float32 or torch.float64, got torch.int64"):
        sticky_predictive(seq, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="dtype must be torch.float32 or torch.float64"):
        markov_predictive(seq, 4, dtype=torch.float16)


def test_float_sequence_is_rejected():
    with pytest.raises(ValueError, match="seq must be an integer tensor"):
        sticky_predictive(torch.zeros(2, 3), 4)


def test_sticky_has_no_compiled_op_auto_is_silent_and_native_refuses(recwarn):
    seq = torch.tensor([[0, 0, 1, 1, 1]])
    want = sticky_predictive(seq, 3, backend="reference")
    torch.testing.assert_close(sticky_predictive(seq, 3, backend="auto"), want)
    assert not [w for w in recwarn if "bayesbench" in str(w.message)]  # by design, not a degraded mode
    with pytest.raises(RuntimeError, match="backend='native' for sticky_predictive is unavailable"):
        sticky_predictive(seq, 3, backend="native")
    with pytest.raises(ValueError, match="backend must be one of"):
        sticky_predictive(seq, 3, backend="fast")
