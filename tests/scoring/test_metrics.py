"""Metrics in bits on cases whose answers are known."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from bayesbench.scoring.metrics import (
    entropy_bits,
    entropy_bits_from_logits,
    kl_bits,
    per_position,
    positional_mae,
    score,
    summarize,
)


def entropy_error_bits(q, p):
    """|H(q) - H(p)| in bits at every position (the per-sequence entropy error before averaging)."""
    return (entropy_bits(q) - entropy_bits(p)).abs()


def test_entropy_of_known_distributions():
    p = torch.tensor([[0.25] * 4 + [0.0] * 4, [1.0] + [0.0] * 7, [0.125] * 8, [0.5, 0.5] + [0.0] * 6])
    torch.testing.assert_close(entropy_bits(p), torch.tensor([2.0, 0.0, 3.0, 1.0], dtype=torch.float64))
    logits = torch.log(torch.tensor([0.5, 0.25, 0.25]))
    assert entropy_bits_from_logits(logits).item() == pytest.approx(1.5)


def test_kl_of_known_distributions():
    p = torch.tensor([0.5, 0.5, 0.0])
    q = torch.tensor([0.25, 0.25, 0.5])
    assert kl_bits(p, q).item() == pytest.approx(1.0)  # log2(0.5 / 0.25)
    assert kl_bits(p, p).item() == 0.0
    assert kl_bits(p, log_q=torch.log(q)).item() == pytest.approx(1.0)
    assert kl_bits(q, p).item() == math.inf  # q puts mass where p has none
    want = stats.entropy([0.2, 0.3, 0.5], [0.1, 0.6, 0.3], base=2)
    assert kl_bits(torch.tensor([0.2, 0.3, 0.5]), torch.tensor([0.1, 0.6, 0.3])).item() == pytest.approx(want)
    with pytest.raises(ValueError, match="exactly one of q or log_q"):
        kl_bits(p)


def test_entropy_error_is_absolute_difference():
    q = torch.tensor([[0.5, 0.5], [1.0, 0.0]])
    p = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
    torch.testing.assert_close(entropy_error_bits(q, p), torch.tensor([1.0, 1.0], dtype=torch.float64))


def test_summarize_equal_counts_matches_the_t_interval_of_sequence_means():
    g = torch.Generator().manual_seed(0)
    values = torch.rand(50, 7, generator=g, dtype=torch.float64)
    s = summarize(values)
    means = values.mean(1).numpy()
    lo, hi = stats.t.interval(0.95, 49, loc=means.mean(), scale=stats.sem(means))
    assert s.mean == pytest.approx(values.mean().item())
    assert (s.ci_low, s.ci_high) == (pytest.approx(lo), pytest.approx(hi))
    assert (s.n_sequences, s.n_positions) == (50, 350)


def test_summarize_respects_the_mask_and_weights_positions():
    values = torch.tensor([[1.0, 100.0, 3.0], [5.0, 7.0, 100.0]])
    mask = torch.tensor([[True, False, True], [True, True, False]])
    s = summarize(values, mask)
    assert s.mean == pytest.approx((1 + 3 + 5 + 7) / 4)  # mean over scored (n, t) pairs
    assert s.n_positions == 4 and s.n_sequences == 2
    assert s.ci_low < s.mean < s.ci_high


def test_summarize_interval_covers_the_truth_about_95_percent_of_the_time():
    g = torch.Generator().manual_seed(1)
    hits = 0
    for _ in range(400):
        counts = torch.randint(1, 6, (30,), generator=g)
        mask = torch.arange(5).unsqueeze(0) < counts.unsqueeze(1)
        values = torch.randn(30, 5, generator=g, dtype=torch.float64) + 2.0
        s = summarize(values, mask)
        hits += s.ci_low <= 2.0 <= s.ci_high
    assert 0.90 <= hits / 400 <= 0.99


def test_summarize_rejects_bad_input():
    with pytest.raises(ValueError, match="mask selects no position"):
        summarize(torch.ones(2, 2), torch.zeros(2, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="values contain NaN at scored positions"):
        summarize(torch.tensor([[float("nan"), 1.0]]))
    with pytest.raises(ValueError, match=r"mask must have the shape of values \[1, 2\]"):
        summarize(torch.ones(1, 2), torch.ones(2, 1, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"values must have shape \[N, L\]"):
        summarize(torch.ones(3))
    # NaN where the mask is False is ignored
    assert summarize(torch.tensor([[float("nan"), 1.0]]), torch.tensor([[False, True]])).mean == 1.0


def test_per_position_is_nan_where_nothing_is_scored():
    values = torch.tensor([[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]])
    mask = torch.tensor([[True, False, True], [True, False, False]])
    curve = per_position(values, mask)
    assert curve[0].item() == 2.0 and math.isnan(curve[1].item()) and curve[2].item() == 3.0


def test_score_of_the_exact_posterior_is_zero_and_of_uniform_is_known():
    p = torch.tensor([[[1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]]]).expand(4, 2, 4)
    mask = torch.ones(4, 2, dtype=torch.bool)
    exact = score(p, mask, q=p)
    assert exact.entropy_mae.mean == 0.0 and exact.kl.mean == 0.0
    uniform_logits = torch.zeros(4, 2, 4)
    s = score(p, mask, logits=uniform_logits)
    assert s.entropy_mae.mean == pytest.approx((2.0 + 1.0) / 2)  # |2-0| and |2-1|
    assert s.kl.mean == pytest.approx((2.0 + 1.0) / 2)  # log2(4/1) and log2(0.5/0.25)
    np.testing.assert_allclose(s.entropy_mae_curve.numpy(), [2.0, 1.0])
    np.testing.assert_allclose(s.bayes_entropy_curve.numpy(), [0.0, 1.0])
    np.testing.assert_allclose(s.model_entropy_curve.numpy(), [2.0, 2.0])
    with pytest.raises(ValueError, match="must have the shape of p"):
        score(p, mask, logits=torch.zeros(4, 2, 3))


def test_score_from_log_probs_equals_logits_and_the_nonfinite_rule():
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(3 * torch.randn(5, 4, 3, generator=g, dtype=torch.float64), -1)
    logits = torch.randn(5, 4, 3, generator=g, dtype=torch.float64)
    mask = torch.rand(5, 4, generator=g) > 0.3
    mask[2, 1] = True
    a, b = score(p, mask, logits=logits), score(p, mask, log_q=torch.log_softmax(logits, -1))
    assert a.entropy_mae == b.entropy_mae and a.kl == b.kl
    torch.testing.assert_close(a.entropy_error, (entropy_bits_from_logits(logits) - entropy_bits(p)).abs())
    torch.testing.assert_close(b.entropy_error, a.entropy_error)
    with pytest.raises(ValueError, match="exactly one of q, logits or log_q"):
        score(p, mask, logits=logits, log_q=logits)
    bad = logits.clone()
    bad[2, 1] = float("nan")  # a scored position
    with pytest.raises(ValueError, match="NaN"):
        score(p, mask, logits=bad)
    diverged = score(p, mask, logits=bad, nonfinite="nan")
    assert math.isnan(diverged.entropy_mae.mean) and math.isnan(diverged.kl.ci_high)
    assert (diverged.entropy_mae.n_sequences, diverged.entropy_mae.n_positions) == (
        int(mask.any(1).sum()), int(mask.sum()))
    inf = torch.tensor([[float("inf"), 1.0], [2.0, 3.0]])
    assert summarize(inf).mean == math.inf  # "raise" only refuses NaN
    assert math.isnan(summarize(inf, nonfinite="nan").mean)
    assert summarize(inf, torch.tensor([[False, True], [True, True]]), nonfinite="nan").mean == 2.0
    with pytest.raises(ValueError, match="nonfinite must be one of"):
        summarize(inf, nonfinite="skip")


def _positional_numpy(h_q: np.ndarray, h_p: np.ndarray, mask: np.ndarray) -> float:
    """mean_t |mean_n h_q - mean_n h_p| over positions scored in any sequence, in plain NumPy."""
    diffs = []
    for t in range(h_q.shape[1]):
        rows = mask[:, t]
        if rows.any():
            diffs.append(abs(h_q[rows, t].mean() - h_p[rows, t].mean()))
    return float(np.mean(diffs))


@pytest.mark.parametrize("shape,ragged", [((7, 5), False), ((33, 1), False), ((40, 9), True), ((3, 13), True)])
def test_positional_mae_against_numpy_and_its_jackknife(shape, ragged):
    g = torch.Generator().manual_seed(sum(shape))
    N, L = shape
    p = torch.softmax(2 * torch.randn(N, L, 6, generator=g, dtype=torch.float64), -1)
    logits = torch.randn(N, L, 6, generator=g, dtype=torch.float64)
    mask = torch.rand(N, L, generator=g) > 0.4 if ragged else torch.ones(N, L, dtype=torch.bool)
    mask[0, 0] = True
    s = score(p, mask, logits=logits)
    h_q, h_p = entropy_bits_from_logits(logits).numpy(), entropy_bits(p).numpy()
    m = mask.numpy()
    want = _positional_numpy(h_q, h_p, m)
    assert s.entropy_mae_positional.mean == pytest.approx(want, rel=1e-12)
    # jackknife: the statistic recomputed with each scored sequence left out, in a plain loop
    keep = [n for n in range(N) if m[n].any()]
    loo = []
    for n in keep:
        others = [i for i in keep if i != n]
        loo.append(_positional_numpy(h_q[others], h_p[others], m[others]))
    loo = np.array(loo)
    k = len(keep)
    se = math.sqrt((k - 1) / k * ((loo - loo.mean()) ** 2).sum())
    half = stats.t.ppf(0.975, k - 1) * se
    assert s.entropy_mae_positional.half_width == pytest.approx(half, rel=1e-9)
    assert s.entropy_mae_positional.n_sequences == k and s.entropy_mae_positional.n_positions == int(m.sum())


def test_positional_mae_never_exceeds_the_per_sequence_mae():
    """mean_t |mean_n d| <= mean_t mean_n |d| = mean_{n,t} |d| when every position is scored in
    every sequence; equality iff the sign of d is constant at each position."""
    g = torch.Generator().manual_seed(7)
    for trial in range(20):
        N, L, C = 50, 1 + trial % 6, 2 + trial % 5
        p = torch.softmax(3 * torch.randn(N, L, C, generator=g, dtype=torch.float64), -1)
        logits = (trial % 4) * torch.randn(N, L, C, generator=g, dtype=torch.float64)
        mask = torch.ones(N, L, dtype=torch.bool)
        s = score(p, mask, logits=logits)
        assert s.entropy_mae_positional.mean <= s.entropy_mae.mean + 1e-12
    # a predictor that ignores the prefix (constant entropy at each position) on a curve that
    # varies across sequences: positional is far smaller than per-sequence
    h_p = torch.tensor([[0.0, 2.0], [2.0, 0.0]], dtype=torch.float64).repeat(10, 1)
    h_q = torch.ones_like(h_p)
    assert positional_mae(h_q, h_p).mean == 0.0 and summarize((h_q - h_p).abs()).mean == 1.0
    # uniform q entropy >= every H(p): the two are equal
    p = torch.softmax(torch.randn(30, 4, 5, generator=g, dtype=torch.float64), -1)
    u = score(p, torch.ones(30, 4, dtype=torch.bool), logits=torch.zeros(30, 4, 5, dtype=torch.float64))
    assert u.entropy_mae_positional.mean == pytest.approx(u.entropy_mae.mean, rel=1e-12)


def test_positional_mae_bad_input_and_nonfinite():
    h = torch.zeros(4, 3)
    with pytest.raises(ValueError, match="same shape"):
        positional_mae(h, torch.zeros(4, 2))
    with pytest.raises(ValueError, match="selects no position"):
        positional_mae(h, h, torch.zeros(4, 3, dtype=torch.bool))
    bad = h.clone()
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        positional_mae(bad, h)
    assert math.isnan(positional_mae(bad, h, nonfinite="nan").mean)
    one = positional_mae(torch.ones(1, 3), h[:1])
    assert one.mean == 1.0 and math.isnan(one.ci_low)  # one sequence: no interval


# ---- bad or unusual inputs of the Python API (each fails before its fix)

def _case(n=6, L=3, C=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(n, L, C, generator=g, dtype=torch.float64), -1)
    logits = torch.randn(n, L, C, generator=g, dtype=torch.float64)
    return p, torch.ones(n, L, dtype=torch.bool), logits


def test_score_refuses_a_p_that_is_not_a_distribution():
    p, mask, logits = _case()
    with pytest.raises(ValueError, match=r"p \(the exact posterior\) at the scored positions"):
        score(p * 2, mask, logits=logits)
    with pytest.raises(ValueError, match="must be non-negative"):
        score(p - 0.5, mask, logits=logits)


def test_a_minus_inf_logit_is_a_zero_probability_and_plus_inf_is_refused():
    p, mask, logits = _case()
    p = p.clone()
    p[..., 0] = 0.0
    p = p / p.sum(-1, keepdim=True)
    cut = logits.clone()
    cut[..., 0] = -math.inf  # the model gives class 0 probability 0, where the posterior has none
    s = score(p, mask, logits=cut)
    ref = score(p, mask, q=torch.softmax(cut, -1))
    assert math.isfinite(s.entropy_mae.mean) and math.isfinite(s.kl.mean)
    assert s.entropy_mae.mean == pytest.approx(ref.entropy_mae.mean) and s.kl.mean == pytest.approx(ref.kl.mean)
    bad = logits.clone()
    bad[0, 0, 1] = math.inf
    with pytest.raises(ValueError, match=r"logits must be finite or -inf"):
        score(p, mask, logits=bad)


def test_half_precision_predictives_are_scored_at_their_own_precision():
    p, mask, logits = _case()
    q = torch.softmax(logits, -1)
    for dtype in (torch.float16, torch.bfloat16):
        s = score(p, mask, q=q.to(dtype))  # before: refused by float64's tolerance
        assert s.kl.mean == pytest.approx(score(p, mask, q=q).kl.mean, abs=0.05)


def test_a_predictive_that_is_not_a_tensor_is_one_clear_error():
    p, mask, logits = _case()
    with pytest.raises(ValueError, match="q must be a torch.Tensor, got list"):
        score(p, mask, q=torch.softmax(logits, -1).tolist())


def test_intervals_of_the_non_negative_metrics_stay_at_or_above_zero():
    p, mask, _ = _case(n=3)
    near = torch.softmax(torch.log(p) + 1e-3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1),
                                                            dtype=torch.float64), -1)
    near[0] = p[0]  # one exact sequence: the spread dwarfs the tiny mean
    s = score(p, mask, q=near)
    for summary in (s.entropy_mae, s.kl, s.entropy_mae_positional):
        assert 0.0 <= summary.ci_low <= summary.mean <= summary.ci_high
