"""Two runs' learning curves side by side, and the step from which they differ (`bayesbench compare`).

At every step both runs measured (their common range; a step one run did not measure is read
off its curve linearly in log(step)), the two runs' seeds are compared by Welch's t-test
(independent seeds, unequal variances; seeds are the independent unit, not steps or
sequences). Testing every step is many tests, so the p-values are Holm-adjusted over all the
steps compared, and the answer is the first step from which the adjusted p-value stays below
ALPHA at every later step: "significant from step s on". Each run needs at least two seeds with
a curve; with fewer, the curves are shown and no step is named.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from .curve_stats import trained_part, value_at
from .records import RunRecord

ALPHA = 0.05


@dataclass(frozen=True)
class StepDifference:
    """One step: each run's mean over seeds with a 95% t-interval, the difference A - B, Welch's
    p-value and its Holm adjustment over all compared steps."""

    step: int
    a: tuple[float, float, float]
    b: tuple[float, float, float]
    difference: float
    p: float
    p_holm: float


@dataclass(frozen=True)
class Comparison:
    metric: str
    a_seeds: int
    b_seeds: int
    steps: list[StepDifference]
    significant_from: int | None  # the first step from which p_holm < ALPHA at every later step
    note: str  # what was tested, in words


def _mean_ci(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return (values[0] if values else math.nan, math.nan, math.nan)
    from scipy.stats import t as student_t

    m, sd, n = statistics.fmean(values), statistics.stdev(values), len(values)
    half = float(student_t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    return m, m - half, m + half


def holm(p: list[float]) -> list[float]:
    """Holm's step-down adjustment of p-values (NaN stays NaN and is not counted)."""
    order = sorted((i for i, v in enumerate(p) if not math.isnan(v)), key=lambda i: p[i])
    m, out, running = len(order), [math.nan] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def _curves(records: list[RunRecord], metric: str) -> list[tuple[list[int], list[float]]]:
    return [trained_part(r.learning_curve, metric, r.stop_step) for r in records if r.learning_curve is not None]


def compare(a: list[RunRecord], b: list[RunRecord], metric: str) -> Comparison:
    """Compare the seeds of run A with those of run B on `metric` along their curves."""
    from scipy.stats import ttest_ind

    ca, cb = _curves(a, metric), _curves(b, metric)
    if not ca or not cb:
        raise ValueError("both runs need learning curves (runs stored before curves existed, or trained with "
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
    adjusted = holm(pvalues)
    steps = [StepDifference(s, ma, mb, d, p, q) for (s, ma, mb, d), p, q in zip(rows, pvalues, adjusted)]
    first = None
    for sd in reversed(steps):
        if not sd.p_holm < ALPHA:
            break
        first = sd.step
    tested = sum(not math.isnan(p) for p in pvalues)
    note = (f"Welch's t-test over seeds ({len(ca)} vs {len(cb)}) at each of the {tested} steps both runs cover "
            f"({lo} to {hi}), Holm-adjusted over those {tested} tests; significant from a step = adjusted "
            f"p < {ALPHA} there and at every later step") if testable else \
        (f"no test: each run needs at least 2 seeds with a curve ({len(ca)} and {len(cb)} here)")
    return Comparison(metric, len(ca), len(cb), steps, first if testable else None, note)
