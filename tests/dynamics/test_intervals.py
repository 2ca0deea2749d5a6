"""Intervals over seeds: the t-interval by hand, and bounded quantities keep bounded intervals."""

from __future__ import annotations

import math

import pytest

from bayesbench.dynamics.intervals import bootstrap_interval, fisher_z_interval, fmt, ratio_interval, t_interval


def test_t_interval_by_hand_and_too_few_values():
    got = t_interval([1.0, 2.0, 3.0])
    assert got["mean"] == 2.0 and got["ci_high"] - 2.0 == pytest.approx(4.302653 * 1.0 / math.sqrt(3), rel=1e-6)
    one = t_interval([5.0, float("nan"), None])
    assert one["mean"] == 5.0 and one["n"] == 1 and math.isnan(one["ci_low"])
    assert fmt(one) == "5.000" and fmt(t_interval([])) == "n/a"


def test_bounded_quantities_keep_their_intervals_in_range():
    near_one = [0.99, 0.93, 0.999, 0.71, 0.98]  # entropy ratios: cannot exceed 1
    assert t_interval(near_one)["ci_high"] > 1  # what a t-interval would claim
    boot = bootstrap_interval(near_one)
    assert 0.71 <= boot["ci_low"] <= boot["mean"] <= boot["ci_high"] <= 0.999
    corr = [-0.97, -0.5, -0.99, -0.9]  # correlations: cannot go below -1
    assert t_interval(corr)["ci_low"] < -1
    z = fisher_z_interval(corr)
    assert -1 < z["ci_low"] <= z["mean"] <= z["ci_high"] < 1
    assert z["mean"] == pytest.approx(math.tanh(sum(math.atanh(r) for r in corr) / 4))
    assert fisher_z_interval([1.0, 1.0])["ci_high"] <= 1.0
    r = ratio_interval([2.0, 2.0, 8.0])
    assert r["mean"] == pytest.approx(32 ** (1 / 3)) and 0 < r["ci_low"] < r["mean"] < r["ci_high"]
