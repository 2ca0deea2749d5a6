"""Training to a criterion: when a member's learning curve says it may stop.

`TrainConfig.until` is a threshold in bits (stop once the curve metric is at or below it) or
"plateau" (stop once the curve has stopped improving); `TrainConfig.steps` stays the budget.
Both read only the member's own curve points (`curves.curve_steps`), so member e of an ensemble
stops where a solo run of its seed would.

Plateau, exactly: at a curve point of step s, the member has plateaued when the best value of
its curve among the points in (s / PLATEAU_FACTOR, s] is not below the best value before them by
more than PLATEAU_REL of that best value, that window holds at least PLATEAU_POINTS points with
at least one point before it, and s is at least PLATEAU_MIN_FRACTION of the budget (a model
that has not started to learn is flat too). With the default log-spaced cadence (8 points per
decade) the window is the last factor of 3 in steps, about 4 points: "no 1% improvement since
step s / 3", from a tenth of the budget on.
"""

from __future__ import annotations

import math

PLATEAU = "plateau"
PLATEAU_FACTOR = 3.0
PLATEAU_REL = 0.01
PLATEAU_POINTS = 3
PLATEAU_MIN_FRACTION = 0.1


def parse_until(value) -> float | str | None:
    """None, "plateau", or a threshold in bits (a positive number, or its text): checked."""
    if value is None or value == PLATEAU:
        return value
    if isinstance(value, bool):
        raise ValueError(f"until must be a threshold in bits (a positive number) or 'plateau', got {value!r}")
    try:
        threshold = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"until must be a threshold in bits (a positive number) or 'plateau', got {value!r}") from None
    if not (threshold > 0 and math.isfinite(threshold)):
        raise ValueError(f"until must be a threshold in bits (a positive number) or 'plateau', got {value!r}")
    return threshold


def _plateaued(steps: list[int], values: list[float], budget: int) -> bool:
    """Whether the curve ending at its last point has plateaued there."""
    s = steps[-1]
    if s < PLATEAU_MIN_FRACTION * budget:
        return False
    recent = [v for t, v in zip(steps, values) if t > s / PLATEAU_FACTOR]
    before = [v for t, v in zip(steps, values) if t <= s / PLATEAU_FACTOR]
    if len(recent) < PLATEAU_POINTS or not before:
        return False
    if any(math.isnan(v) for v in values):
        return False  # a diverged member is stopped by the guard, not here
    best_before, best_recent = min(before), min(recent)
    return best_recent > best_before - PLATEAU_REL * abs(best_before)


def stop_reason(until, metric: str, steps: list[int], values: list[float], budget: int) -> tuple[str, str] | None:
    """(kind, sentence) when a member whose curve of `metric` ends with these points should stop
    at its last point (`budget`: the run's steps), else None. kind: "threshold" or "plateau"."""
    if until is None or not steps:
        return None
    s, v = steps[-1], values[-1]
    if until == PLATEAU:
        if _plateaued(steps, values, budget):
            best = min(values)
            return PLATEAU, (f"plateau: {metric} improved by less than {PLATEAU_REL:.0%} over steps "
                             f"({s / PLATEAU_FACTOR:.0f}, {s}] (best {best:.4g} bits)")
        return None
    if v <= until:
        return "threshold", f"threshold: {metric} {v:.4g} <= {until:g} bits at step {s}"
    return None
