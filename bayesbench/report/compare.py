"""Two runs' learning curves side by side, and the step from which they differ (`bayesbench compare`).

At every step both runs measured (their common range; a step one run did not measure is read
off its curve linearly in log(step)), the two runs' seeds are compared by Welch's t-test
(independent seeds, unequal variances; seeds are the independent unit, not steps or
sequences). The question "from which step on do they differ?" is answered by a fixed-sequence
test: the steps are tested in a fixed order, from the last backwards, each at level ALPHA, and
testing stops at the first step that is not significant; the answer is the earliest step of that
unbroken run ("significant from step s on": at s and at every later step). Testing in an order
fixed in advance and stopping at the first failure keeps the chance of any false claim at ALPHA
without adjusting the p-values (a Bonferroni or Holm adjustment over ~30 steps would need p <
0.002, out of reach with three seeds a side). Each run needs at least two seeds with a curve;
with fewer, the curves are shown and no step is named.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from ..stats import t_interval, value_at
from ..store.records import RunRecord
from .curve_stats import trained_part

ALPHA = 0.05


@dataclass(frozen=True)
class StepDifference:
    """One step: each run's mean over seeds with a 95% t-interval (clipped at 0), the difference
    A - B and Welch's p-value (NaN: not tested)."""

    step: int
    a: tuple[float, float, float]
    b: tuple[float, float, float]
    difference: float
    p: float


@dataclass(frozen=True)
class Comparison:
    metric: str
    a_seeds: int
    b_seeds: int
    steps: list[StepDifference]
    significant_from: int | None  # the earliest step from which p < ALPHA at every later step (fixed sequence)
    note: str  # what was tested, in words


def _mean_ci(values: list[float]) -> tuple[float, float, float]:
    """Mean over seeds with its 95% t-interval (`bayesbench.stats.t_interval`), the low end
    clipped at 0 (every curve metric is >= 0)."""
    ci = t_interval(values)
    return ci["mean"], max(0.0, ci["ci_low"]) if math.isfinite(ci["ci_low"]) else math.nan, ci["ci_high"]


def significant_from(steps: list[int], p: list[float], alpha: float = ALPHA) -> int | None:
    """The fixed-sequence answer (module docstring): test from the last step backwards at level
    `alpha`, stop at the first p that is not below it (NaN included); the earliest step passed."""
    first = None
    for s, v in zip(reversed(steps), reversed(p)):
        if not v < alpha:
            break
        first = s
    return first


def _curves(records: list[RunRecord], metric: str) -> list[tuple[list[int], list[float]]]:
    return [trained_part(r.learning_curve, metric, r.stop_step) for r in records if r.learning_curve is not None]


def compare(a: list[RunRecord], b: list[RunRecord], metric: str) -> Comparison:
    """Compare the seeds of run A with those of run B on `metric` along their curves."""
    from scipy.stats import ttest_ind

    ca, cb = _curves(a, metric), _curves(b, metric)
    if not ca or not cb:
        raise ValueError("both runs need learning curves (runs stored without curves, or trained with "
                         "--no-curves, have none)")
    lo = max(c[0][0] for c in ca + cb)
    hi = min(c[0][-1] for c in ca + cb)
    grid = sorted({s for steps, _ in ca + cb for s in steps if lo <= s <= hi})
    rows, pvalues = [], []
    testable = len(ca) >= 2 and len(cb) >= 2
    for s in grid:
        va = [value_at(steps, values, s) for steps, values in ca]
        vb = [value_at(steps, values, s) for steps, values in cb]
        p = math.nan
        if testable and all(math.isfinite(v) for v in va + vb):
            p = float(ttest_ind(va, vb, equal_var=False).pvalue)
            p = 1.0 if math.isnan(p) else p  # identical values on both sides: no difference
        pvalues.append(p)
        rows.append((s, _mean_ci(va), _mean_ci(vb), statistics.fmean(va) - statistics.fmean(vb)))
    steps = [StepDifference(s, ma, mb, d, p) for (s, ma, mb, d), p in zip(rows, pvalues)]
    first = significant_from(grid, pvalues) if testable else None
    where = f"the {len(grid)} steps both runs cover ({lo} to {hi})" if len(grid) != 1 else \
        f"the one step both cover ({lo})"
    note = (f"Welch's t-test over seeds ({len(ca)} vs {len(cb)}) at {where}, tested from the last step backwards "
            f"at level {ALPHA}, stopping at the first that is not "
            f"significant (a fixed-sequence test: at most a {ALPHA} chance of any false claim, no adjustment "
            "needed); significant from a step = there and at every later step") if testable else \
        (f"no test: each run needs at least 2 seeds with a curve ({len(ca)} and {len(cb)} here)")
    return Comparison(metric, len(ca), len(cb), steps, first, note)
