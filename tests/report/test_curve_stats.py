"""What the leaderboard reads off learning curves, on synthetic curves with known answers: steps
to a threshold over seeds (with seeds that never reach it), still improving, the area under the
curve against log(step), and the two-run comparison's first significant step."""

from __future__ import annotations

import math
import random

import pytest
from store.test_learning_curves import _curve
from store.test_records import _record

from bayesbench.report.compare import compare, significant_from
from bayesbench.report.curve_stats import Reach, common_range, reach, still_improving
from bayesbench.stats import log_auc, value_at
from bayesbench.training.curves import curve_steps

STEPS = curve_steps(2000)  # 26 log-spaced points


def test_reach_all_some_and_no_seeds():
    every = Reach(0.1, [100, 1000, 10_000], [2000] * 3, 32)
    geo, lo, hi = every.geometric()
    assert geo == pytest.approx(1000.0)  # geometric mean of 10^2, 10^3, 10^4
    assert lo < 100 and hi > 10_000 and lo > 0  # an interval of log(steps): wide with 3 seeds, never below 0
    assert every.median() == 1000
    some = Reach(0.1, [100, None, 300], [2000] * 3, 32)
    assert some.geometric() is None and some.reached == 2 and some.median() == 300  # the never-seed counts as last
    assert Reach(0.1, [100, None, None], [2000] * 3, 32).median() is None
    assert Reach(0.1, [100, None], [2000] * 2, 32).median() is None
    one = Reach(0.1, [42], [100], 8).geometric()
    assert one[0] == pytest.approx(42) and math.isnan(one[1])


def test_reach_reads_each_curve_up_to_its_stop():
    c = _curve(1.0, steps=(1, 2, 4, 10))  # entropy_mae = 1 / step
    r = reach([c, c], "entropy_mae", 0.3, [None, 2], 8)
    assert r.per_seed == [4, None]  # the second member stopped at step 2 (0.5): it never got there
    assert reach([c, None], "entropy_mae", 0.3, [None, None], 8) is None


def test_still_improving():
    falling = [1.0 / math.sqrt(s) for s in STEPS]
    assert still_improving(STEPS, falling) is True
    flat = [0.5] * len(STEPS)
    assert still_improving(STEPS, flat) is False
    rng = random.Random(0)
    noisy_flat = [0.5 + rng.gauss(0, 0.02) for _ in STEPS]
    assert still_improving(STEPS, noisy_flat) is False  # scatter, no trend
    converged = [0.1 + 0.9 * math.exp(-s / 30) for s in STEPS]  # at 0.1 long before the last fifth
    assert still_improving(STEPS, converged) is False
    tiny = [0.5 - 1e-3 * math.log(s) for s in STEPS]  # falls steadily, by 0.25% over the last fifth: below 5%
    assert still_improving(STEPS, tiny) is False
    late_drop = [1.0 if s < 1000 else 0.4 for s in STEPS]  # a staircase step inside the last fifth
    assert still_improving(STEPS, late_drop) is True
    assert still_improving(STEPS[:3], falling[:3]) is None  # too few points: cannot tell
    assert still_improving(STEPS, [math.nan] * len(STEPS)) is None


def test_log_auc_and_common_range():
    steps = [1, 10, 100]
    assert log_auc(steps, [1.0, 1.0, 1.0], 1, 100) == pytest.approx(1.0)
    # linear in log(step) from 1 to 0: mean 0.5; on [10, 100] from 0.5 to 0: mean 0.25
    assert log_auc(steps, [1.0, 0.5, 0.0], 1, 100) == pytest.approx(0.5)
    assert log_auc(steps, [1.0, 0.5, 0.0], 10, 100) == pytest.approx(0.25)
    assert log_auc(steps, [1.0, 0.5, 0.0], math.sqrt(10), 100) == pytest.approx(0.375)  # from 0.75 to 0: mean 0.375
    assert value_at(steps, [1.0, 0.5, 0.0], math.sqrt(10)) == pytest.approx(0.75)
    assert math.isnan(log_auc(steps, [1.0, 0.5, 0.0], 1, 1000))  # outside the curve
    early = [1.0, 0.1, 0.1]  # gets there by step 10
    late = [1.0, 1.0, 0.1]  # gets there at step 100, the same final value
    assert log_auc(steps, early, 1, 100) < log_auc(steps, late, 1, 100)
    assert common_range([([1, 10, 100], early), ([2, 20, 50], late)]) == (2, 50)
    assert common_range([([1, 2], early), ([5, 9], late)]) is None


def test_significant_from_is_the_unbroken_run_of_significant_steps_at_the_end():
    steps = [1, 2, 4, 8, 16]
    assert significant_from(steps, [0.01, 0.2, 0.04, 0.01, 0.001]) == 4  # step 2 breaks the run
    assert significant_from(steps, [0.01, 0.01, 0.01, 0.01, 0.2]) is None  # not significant at the end
    assert significant_from(steps, [0.01] * 5) == 1
    assert significant_from(steps, [0.01, 0.01, math.nan, 0.01, 0.01]) == 8  # an untested step breaks it too


def _members(run: str, offsets: list[float], after: int, gap: float):
    """Records of seeds whose entropy_mae is 1 / sqrt(step) + offset, plus `gap` from step `after` on."""
    out = []
    for seed, off in enumerate(offsets):
        values = [1 / math.sqrt(s) + off + (gap if s >= after else 0.0) for s in STEPS]
        c = _curve(steps=STEPS)
        c = type(c)(**{**c.__dict__, "values": {"entropy_mae": values}})
        out.append(_record(seed, run_id=run, learning_curve=c))
    return out


def test_compare_names_the_first_step_from_which_runs_differ():
    a = _members("a", [0.0, 0.01, -0.01, 0.005], after=10**9, gap=0.0)
    b = _members("b", [0.002, 0.012, -0.008, 0.004], after=100, gap=0.5)  # 0.5 bits worse from step 100
    result = compare(a, b, "entropy_mae")
    assert result.significant_from == 100
    early = next(sd for sd in result.steps if sd.step == 75)
    assert early.p > 0.05 and early.difference == pytest.approx(0.00125 - 0.0025, abs=1e-12)
    assert "Welch's t-test over seeds (4 vs 4)" in result.note and "fixed-sequence" in result.note
    same = compare(a, _members("c", [0.0, 0.01, -0.01, 0.005], after=10**9, gap=0.0), "entropy_mae")
    assert same.significant_from is None
    alone = compare(a[:1], b[:1], "entropy_mae")
    assert alone.significant_from is None and alone.note.startswith("no test")
    with pytest.raises(ValueError, match="need learning curves"):
        compare([_record(0)], b, "entropy_mae")
