"""Frame vs precision on a common axis: progress, t90, the lead with a known answer, the
learning-rate budget, map velocity and the velocity freeze criterion."""

from __future__ import annotations

import math

import pytest
import torch

from bayesbench.dynamics.profile.frames import freeze_step, tv_consecutive, tv_to_final
from bayesbench.dynamics.profile.lead import (
    crossing,
    frame_progress,
    lead_summary,
    lr_budget,
    precision_progress,
)
from bayesbench.training.config import TrainConfig


def test_progress_and_interpolated_crossing():
    assert frame_progress([0.4, 0.2, 0.04, 0.0]) == pytest.approx([0.0, 0.5, 0.9, 1.0])
    assert precision_progress([1.0, 0.5, 0.2, 0.0]) == pytest.approx([0.0, 0.5, 0.8, 1.0])
    assert math.isnan(precision_progress([1.0, 1.2])[0])  # no gain: no progress curve
    assert crossing([0, 100, 200], [0.0, 0.5, 1.0]) == pytest.approx(180.0)  # 0.9 between 0.5 and 1.0
    assert crossing([0, 100], [0.95, 1.0]) == 0.0
    assert crossing([0, 100], [0.0, 0.8]) is None


def _shifts() -> list[int]:
    return [-2, 0, 1, 2, -1, 3]


def _ramp(s: float, t90: float, end: float = 1000) -> float:
    """Piecewise-linear progress: 0.9 at t90, 1 at the end."""
    return 0.9 * s / t90 if s <= t90 else 0.9 + 0.1 * (s - t90) / (end - t90)


def test_lead_on_curves_with_a_known_lead():
    """Frame reaches 90% at step 300 + noise, precision at 500: lead +200 in every seed."""
    steps = list(range(0, 1001, 50))
    drift, mae = {}, {}
    for seed, x in enumerate(_shifts()):
        shift = 50.0 * x  # the same shift for both curves, t90 on a checkpoint
        f90, p90 = 300 + shift, 500 + shift
        drift[seed] = [0.3 * (1 - _ramp(s, f90)) for s in steps]
        mae[seed] = [1.0 - 0.9 * _ramp(s, p90) for s in steps]
    budget = lr_budget(lambda s: 1.0, steps)  # constant lr: the budget is the share of the steps
    frame = {s: frame_progress(v) for s, v in drift.items()}
    precision = {s: precision_progress(v) for s, v in mae.items()}
    got = lead_summary(steps, budget, frame, precision, stays=False)
    lead = got["lead_steps"]
    assert lead["n"] == 6 and lead["mean"] == pytest.approx(200) and lead["ci_high"] - lead["ci_low"] < 1e-6
    assert lead["p"] == 0.0  # every seed's lead is exactly 200: no spread
    assert [r["t90_frame_steps"] for r in got["per_seed"].values()] == pytest.approx(
        [300 + 50.0 * x for x in _shifts()])
    assert got["lead_budget"]["mean"] == pytest.approx(lead["mean"] / 1000, abs=1e-9)
    assert got["frame_first_seeds"] == 6 and got["sign_test_p"] == pytest.approx(2 / 64)
    # the same read where the running mean of 3 reaches 0.9 and stays (the profile's rule): both curves
    # bend at their t90s, so the running mean moves each by less than half a checkpoint interval
    smooth = lead_summary(steps, budget, frame, precision)
    assert smooth["lead_steps"]["mean"] == pytest.approx(200, abs=25)
    swapped = lead_summary(steps, budget, precision, frame, stays=False)
    assert swapped["lead_steps"]["ci_high"] < 0 and swapped["frame_first_seeds"] == 0


def test_lr_budget_of_a_cosine_schedule():
    cfg = TrainConfig(steps=800, schedule="cosine", lr=2e-3, warmup_steps=8)
    b = lr_budget(cfg.lr_at, [0, 400, 720, 800])
    assert b[0] == 0 and b[-1] == pytest.approx(1.0)
    lrs = [cfg.lr_at(s) for s in range(800)]
    assert b[2] == pytest.approx(sum(lrs[:720]) / sum(lrs))
    assert 1 - b[2] < 0.03  # the last 10% of a cosine run spends under 3% of the budget
    assert lr_budget(TrainConfig(steps=100).lr_at, [0, 25, 100]) == pytest.approx([0, 0.25, 1])


def test_velocity_and_a_freeze_criterion_that_need_not_fire():
    g = torch.Generator().manual_seed(0)
    m0, mf = (torch.softmax(torch.randn(3, 5, 5, generator=g), -1) for _ in range(2))
    w = torch.tensor([0.0, 0.6, 0.9, 0.95, 0.97, 1.0])
    maps = torch.stack([(1 - x) * m0 + x * mf for x in w])
    tv0 = 0.5 * (m0 - mf).abs().sum(-1).mean(-1)
    torch.testing.assert_close(tv_consecutive(maps), (w[1:] - w[:-1]).view(-1, 1) * tv0)
    assert tv_to_final(maps)[-1].abs().max() == 0  # drift to the final map is 0 there: always "frozen"
    steps = [0, 10, 20, 30, 40, 50]
    v = (w[1:] - w[:-1]).tolist()  # per 10 steps: 0.6, 0.3, 0.05, 0.02, 0.03
    assert freeze_step(steps, v, 0.1) == 20  # from step 20 on every interval is <= 10% of the peak 0.6
    assert freeze_step(steps, [0.6, 0.3, 0.05, 0.02, 0.2], 0.1) is None  # moving again at the end
    assert freeze_step(steps, [0.0] * 5) is None
    with pytest.raises(ValueError, match="C - 1 velocities"):
        freeze_step(steps, v[:-1])


def test_t90_intervals_stay_in_the_runs_steps_and_budget():
    """Probe case 122: with 2 seeds the t-interval of t90 ran past the run (18 [11, 25] of 20 steps;
    a budget share 0.903 [0.535, 1.271]); the t90s are bounded, so their interval must be too."""
    steps = list(range(0, 21))
    drift = {0: [0.3 * (1 - _ramp(s, 12.0)) for s in steps], 1: [0.3 * (1 - _ramp(s, 19.5)) for s in steps]}
    mae = {seed: [1.0 - 0.9 * _ramp(s, 19.0) for s in steps] for seed in (0, 1)}
    got = lead_summary(steps, lr_budget(lambda s: 1.0, steps), {s: frame_progress(v) for s, v in drift.items()},
                       {s: precision_progress(v) for s, v in mae.items()}, stays=False)
    t90s = [r["t90_frame_steps"] for r in got["per_seed"].values()]
    assert max(t90s) - min(t90s) > 5  # far apart: a t-interval with 1 degree of freedom leaves [0, 20]
    frame, budget = got["t90_frame_steps"], got["t90_frame_budget"]
    assert 0 <= frame["ci_low"] <= frame["mean"] <= frame["ci_high"] <= 20 and frame["method"] == "logit-t"
    assert 0.0 <= budget["ci_low"] <= budget["ci_high"] <= 1.0
    assert got["lead_steps"]["n"] == 2  # the lead, a difference, keeps its t-interval


# -- the freeze (issue 44): counts at a bound, no p-value without spread, nothing dropped

def test_a_share_with_every_seed_at_its_bound_gets_counts_and_no_t_p_value():
    """Eight seeds with nothing left: the logit-t interval of the first version said
    "0.001 [0.001, 0.001]" with p = 0; the counts say 8 of 8 below with the sign test's p, and a
    verdict built on a zero-width interval has no p-value."""
    from bayesbench.dynamics.profile.summary import freeze_counts
    from bayesbench.dynamics.profile.verdicts import test as profile_test
    from bayesbench.stats import logit_interval, sign_test

    old = logit_interval([0.0] * 8, null=0.1)
    assert old["ci_low"] == old["ci_high"] and old["p"] == 0.0  # the degenerate reading
    c = freeze_counts([0.0] * 8, 0.1)
    assert (c["below"], c["above"], c["unreadable"]) == (8, 0, 0) and c["at_bound"]
    assert c["sign_test_p"] == sign_test(8, 0) == pytest.approx(2 / 2 ** 8)
    v = profile_test("primary", "claim", old, "control", side=-1, null=0.1)
    assert math.isnan(v["p"]) and "every seed at" in v["number"]


def test_a_share_outside_its_range_is_counted_never_dropped():
    """The constant-rate sticky chain's layer 0: 6 of 8 seeds never settled (above 0.1), the logit
    mean of clipped seeds pulled the headline under the threshold; counted, it cannot."""
    from bayesbench.dynamics.profile.summary import freeze_counts

    c = freeze_counts([-0.05, 0.0, 0.3, 0.5, 0.4, 0.35, math.nan, 1.2], 0.1)
    assert (c["below"], c["above"], c["unreadable"], c["clipped"]) == (2, 5, 1, 2)
    assert c["sign_test_p"] > 0.05 and c["seeds"] == 8
    assert 0.0 <= c["mean"]["ci_low"] <= c["mean"]["mean"] <= c["mean"]["ci_high"] <= 1.0


def test_t90_intervals_end_where_a_t90_can_be_read():
    """A t90 is read before the late checkpoints: its logit interval's upper end is the last
    checkpoint before them, not the run's end."""
    steps = list(range(0, 101, 10))
    budget = [s / 100 for s in steps]
    frame = {s: [min(1.0, x / (60 + s)) for x in steps] for s in range(4)}
    out = lead_summary(steps, budget, frame, frame, cut=len(steps) - 3)
    assert out["t90_readable_until"] == {"steps": 70, "budget": 0.7}
    assert out["t90_frame_steps"]["ci_high"] <= 70
