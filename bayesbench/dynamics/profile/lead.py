"""Which settles first, the frame or the precision? One statistic with an interval over seeds.

Both are put on a common scale from 0 (first checkpoint) to 1 (last checkpoint):

    frame progress      1 - drift(c) / drift(first), drift the maps' TV distance to the final maps
    precision progress  (MAE(first) - MAE(c)) / (MAE(first) - MAE(last)): the share of the run's
                        entropy-MAE gain made by checkpoint c

and on two axes: training steps, and the learning-rate budget spent, sum_{s < c} lr(s) /
sum_s lr(s) (under a cosine schedule the last 10% of the steps spend about 2.5% of the budget,
so a map can look "frozen" only because the steps stopped moving it). t90 is the first point at
which a progress curve reaches 0.9, linearly interpolated between the two checkpoints around the
crossing. The lead

    lead = t90(precision) - t90(frame)

is positive when the frame settles first (Paper II's reading) and negative when calibration
does; its interval is a t-interval over seeds of the per-seed leads (`intervals.t_interval`).
The t90s themselves, a step of the run and a share of its budget, get bootstrap intervals over
seeds (`intervals.bootstrap_interval`), which stay inside the values' range.
"""

from __future__ import annotations

import math

from ..intervals import bootstrap_interval, t_interval

LEVEL = 0.9


def frame_progress(drift: list[float]) -> list[float]:
    """1 - drift / drift[0] (NaN everywhere when drift[0] is 0 or not finite)."""
    d0 = drift[0]
    if not (d0 > 0 and math.isfinite(d0)):
        return [math.nan] * len(drift)
    return [1 - d / d0 for d in drift]


def precision_progress(mae: list[float]) -> list[float]:
    """Share of the run's MAE gain made by each checkpoint (NaN everywhere without a gain)."""
    gain = mae[0] - mae[-1]
    if not (gain > 0 and math.isfinite(gain)):
        return [math.nan] * len(mae)
    return [(mae[0] - m) / gain for m in mae]


def crossing(x: list[float], progress: list[float], level: float = LEVEL) -> float | None:
    """The first x at which progress reaches `level`, interpolated linearly from the checkpoint
    before; None if it never does (or progress is NaN)."""
    if len(x) != len(progress) or not x:
        raise ValueError(f"x and progress must be non-empty and of one length, got {len(x)} and {len(progress)}")
    for k, p in enumerate(progress):
        if not math.isfinite(p):
            return None
        if p >= level:
            if k == 0:
                return float(x[0])
            p0 = progress[k - 1]
            return float(x[k - 1] + (level - p0) / (p - p0) * (x[k] - x[k - 1]))
    return None


def lr_budget(lr_at, steps: list[int], start: int | None = None) -> list[float]:
    """Share of the learning-rate budget sum_{s in [start, steps[-1])} lr_at(s) spent by each
    checkpoint step (steps done); start defaults to steps[0]."""
    start = steps[0] if start is None else start
    prefix = [0.0]
    for s in range(start, steps[-1]):
        prefix.append(prefix[-1] + lr_at(s))
    total = prefix[-1]
    return [prefix[c - start] / total if total > 0 else math.nan for c in steps]


def lead_summary(steps: list[int], budget: list[float], drift: dict[int, list[float]],
                 mae: dict[int, list[float]]) -> dict:
    """Per seed t90 of frame and precision on both axes and the lead; intervals over seeds.
    drift, mae: seed -> values at `steps`."""
    per_seed = {}
    for seed in sorted(mae):
        if seed not in drift:
            continue
        fp, pp = frame_progress(drift[seed]), precision_progress(mae[seed])
        row = {}
        for axis, x in (("steps", steps), ("budget", budget)):
            tf, tp = crossing(x, fp), crossing(x, pp)
            row[f"t90_frame_{axis}"], row[f"t90_precision_{axis}"] = tf, tp
            row[f"lead_{axis}"] = tp - tf if tf is not None and tp is not None else None
        per_seed[seed] = row
    out = {"per_seed": per_seed, "level": LEVEL}
    for axis in ("steps", "budget"):
        leads = [r[f"lead_{axis}"] for r in per_seed.values() if r[f"lead_{axis}"] is not None]
        out[f"lead_{axis}"] = t_interval(leads)
        for which in ("frame", "precision"):  # a step of the run, a share of its budget: bounded, so the bootstrap
            out[f"t90_{which}_{axis}"] = bootstrap_interval(
                [r[f"t90_{which}_{axis}"] for r in per_seed.values() if r[f"t90_{which}_{axis}"] is not None])
    out["frame_first_seeds"] = sum(1 for r in per_seed.values() if (r["lead_steps"] or 0) > 0)
    out["seeds"] = len(per_seed)
    return out
