"""What the leaderboard reads off the learning curves (docs/leaderboard.md, "Learning curves").

- Steps to a threshold (`bayesbench.stats.stays_from`): the first measured step from which a
  member's curve stays at or below it to its last point (a noisy curve that dips below and comes back up has
  not reached it; the curve is measured at log-spaced steps, so the crossing lies between the
  previous measured step and this one). Over a row's seeds (`Reach`): with every seed
  there, the geometric mean with a 95% t-interval of log(steps) over seeds (it stays positive;
  `bayesbench.stats.log_interval`);
  with only some, the median over all seeds (a seed that never got there counts as later than
  every step) and how many reached it, no interval (one over the seeds that reached it would
  leave out the slow ones).
- Still improving (`still_improving`): over the last fifth of a curve's points (at least
  IMPROVING_POINTS), the least-squares line of value against log(step) falls by more than twice
  its standard error (from the points' scatter about the line: what the trend does not explain,
  evaluation noise and training's jitter) and by more than IMPROVING_REL (5%) of the line's value at
  the window's start. Too few points: None (cannot tell).
- Area under the curve against log(step) (`bayesbench.stats.log_auc`), divided by the log-step range: the
  curve's mean over log(step), a ranking that rewards getting there early, not only the value at
  the last step. Rows of one task are compared over their common step range (`common_range`),
  each curve interpolated linearly in log(step) at its ends, so a longer budget does not count.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from ..stats import log_interval, stays_from
from ..store.records import LearningCurve, trained_part

IMPROVING_POINTS = 4
IMPROVING_REL = 0.05


@dataclass(frozen=True)
class Reach:
    """Steps to a threshold over a row's seeds: per seed the step (None: not reached by the end
    of its curve, `budgets`), and the sequences per step (batch size) to turn steps into sequences."""

    threshold: float
    per_seed: list[int | None]
    budgets: list[int]
    batch_size: int | None

    @property
    def reached(self) -> int:
        return sum(s is not None for s in self.per_seed)

    @property
    def n(self) -> int:
        return len(self.per_seed)

    def median(self) -> float | None:
        """Median over all seeds, a seed that never reached it counting as later than any step;
        None when that median is one of them."""
        order = sorted(self.per_seed, key=lambda s: math.inf if s is None else s)
        mid = (self.n - 1) / 2
        lo, hi = order[math.floor(mid)], order[math.ceil(mid)]
        return None if lo is None or hi is None else (lo + hi) / 2

    def geometric(self, level: float = 0.95) -> tuple[float, float, float] | None:
        """(geometric mean, low, high) over seeds when every seed reached it (low = high = NaN
        with one seed); None otherwise."""
        if self.reached < self.n or self.n == 0:
            return None
        ci = log_interval(self.per_seed, level)
        return ci["mean"], ci["ci_low"], ci["ci_high"]


def reach(curves: list[LearningCurve | None], metric: str, threshold: float, stops: list[int | None],
          batch_size: int | None) -> Reach | None:
    """Steps to `threshold` on `metric` of each seed's curve (None when a seed has no curve)."""
    present = [c for c in curves if c is not None]
    if not curves or len(present) != len(curves):
        return None
    per_seed, budgets = [], []
    for c, stop in zip(present, stops):
        steps, values = trained_part(c, metric, stop)
        per_seed.append(stays_from(steps, values, threshold))
        budgets.append(steps[-1] if steps else 0)
    return Reach(threshold, per_seed, budgets, batch_size)


def still_improving(steps: list[int], values: list[float]) -> bool | None:
    """Whether the curve still falls over its last fifth (module docstring); None: cannot tell
    (too few points, or non-finite values)."""
    n = max(IMPROVING_POINTS, math.ceil(len(steps) / 5))
    if len(steps) < n or n < 3:
        return None
    x = [math.log(s) for s in steps[-n:]]
    y = values[-n:]
    if not all(math.isfinite(v) for v in y):
        return None
    xm, ym = statistics.fmean(x), statistics.fmean(y)
    sxx = sum((a - xm) ** 2 for a in x)
    if sxx == 0:
        return None
    slope = sum((a - xm) * (b - ym) for a, b in zip(x, y)) / sxx
    resid = [b - (ym + slope * (a - xm)) for a, b in zip(x, y)]
    scatter = math.sqrt(sum(r * r for r in resid) / (n - 2))
    span = x[-1] - x[0]
    drop, se = -slope * span, scatter / math.sqrt(sxx) * span
    start = ym + slope * (x[0] - xm)
    return drop > 2 * se and drop > IMPROVING_REL * abs(start)


def common_range(curves: list[tuple[list[int], list[float]]]) -> tuple[int, int] | None:
    """The step range every curve covers: (largest first step, smallest last step), or None."""
    curves = [c for c in curves if c[0]]
    if not curves:
        return None
    lo, hi = max(c[0][0] for c in curves), min(c[0][-1] for c in curves)
    return (lo, hi) if hi > lo else None
