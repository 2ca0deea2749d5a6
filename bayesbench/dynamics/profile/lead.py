"""Which settles first, the frame or the precision? One statistic with an interval over seeds.

Both are put on one scale, from 0 at the first checkpoint to 1 where a quantity is as close to
its end as chance lets it be, and on two axes: training steps, and the learning-rate budget
spent, sum_{s < c} lr(s) / sum_s lr(s).

    frame distance      D2(c) = squared distance of the maps at c to the *late map* (the mean of
                        the last K checkpoints' maps; frames.py)
    precision distance  d(c) = M(c) - M_end, M the entropy MAE or the KL (bits) and M_end the
                        mean of the last K checkpoints (a robust endpoint: the last checkpoint
                        alone is one draw of the calibration's jitter; the run's minimum is a
                        lucky one); D2 = d^2 with d's sign kept
    jitter floor        F2(c) = J2(c) (1 + 1/K) / 2, J2 the mean pairwise squared difference of
                        R + 1 continuations of the previous checkpoint's state with different data
                        orders (profiler.py): what chance alone adds to D2 (one checkpoint against
                        the mean of K, each with the variance J2 / 2)
    systematic part     S(c) = sign * sqrt(max(D2(c) - F2(c), 0)): the distance left once the
                        jitter's share is taken out (`systematic_distance`)
    progress            p(c) = 1 - S(c) / S(first)
    t90                 where p, as a centred running mean over 3 checkpoints (the square root
                        near 0 amplifies the jitter of D2 - F2), reaches 0.9 *and stays* at or above
                        it (interpolated from the checkpoint before), searched over the checkpoints
                        before the last K (inside them the reference contains the map itself);
                        None: never settled
    lead                t90(precision) - t90(frame) per seed: positive when the frame settles first

On a synthetic run with a known t90 and a jitter of a fifth of the drift (tests/dynamics/
test_jitter.py) this recovers the t90 to within a checkpoint interval, where the first version
(TV drift to the final map, the last checkpoint as the endpoint, the first crossing; kept as
`crossing`, `frame_progress` and `precision_progress` for the record) put it inside the last
interval. Without replicas the floor is 0.

Intervals over seeds (bayesbench.stats): the lead a t-interval with its t-test against 0 (seeds
where both settled); the t90s, a step inside the run and a share of its budget, logit-t
intervals on the range a t90 can be read in (from the first checkpoint to the last before the
late ones); seeds where only one settled count in a sign test (its lead is censored, its sign
known).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ...stats import (
    first_reaching,
    interpolated_reach,
    logit_interval,
    running_mean,
    sign_test,
    stays_from,
    t_interval,
)

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


def jitter_floor(jitter_sq: list[float], late: int) -> list[float]:
    """F2 = J2 (1 + 1/K) / 2: the share of the squared distance to the mean of the last K
    checkpoints that independent jitter of pairwise squared difference J2 contributes."""
    return [j * (1 + 1 / late) / 2 for j in jitter_sq]


def systematic_distance(distance_sq: list[float], floor_sq: list[float], sign: list[float] | None = None
                        ) -> list[float]:
    """sign * sqrt(max(D2 - F2, 0)) per checkpoint (NaN where either is not finite)."""
    sign = sign or [1.0] * len(distance_sq)
    return [math.copysign(math.sqrt(max(d - f, 0.0)), g) if math.isfinite(d) and math.isfinite(f) else math.nan
            for d, f, g in zip(distance_sq, floor_sq, sign)]


def progress_of(systematic: list[float]) -> list[float]:
    """1 - S(c) / S(first) (NaN everywhere when S(first) is not above 0: nothing moved beyond jitter)."""
    s0 = systematic[0]
    if not (s0 > 0 and math.isfinite(s0)):
        return [math.nan] * len(systematic)
    return [1 - s / s0 for s in systematic]


def crossing(x: Sequence[float], progress: Sequence[float], level: float = LEVEL) -> float | None:
    """The first x at which progress reaches `level`, interpolated linearly from the checkpoint
    before; None if it never does (or progress is NaN before it does)."""
    if len(x) != len(progress) or not x:
        raise ValueError(f"x and progress must be non-empty and of one length, got {len(x)} and {len(progress)}")
    upto = next((k for k, p in enumerate(progress) if not math.isfinite(p)), len(progress))
    at = first_reaching(x[:upto], progress[:upto], level, rising=True)
    return interpolated_reach(x, progress, level, at)


SMOOTH = 3  # checkpoints in the running mean of a progress curve before its t90 is read


def settled(x: Sequence[float], progress: Sequence[float], level: float = LEVEL, cut: int | None = None,
            smooth: int = SMOOTH) -> float | None:
    """The first x from which the progress curve, as a centred running mean over `smooth` points,
    stays at or above `level` over the points before index `cut` (all: None), interpolated from
    the point before; None if it does not."""
    if len(x) != len(progress) or not x:
        raise ValueError(f"x and progress must be non-empty and of one length, got {len(x)} and {len(progress)}")
    n = len(x) if cut is None else cut
    p = running_mean(progress[:n], smooth) if smooth > 1 else list(progress[:n])
    if any(not math.isfinite(v) for v in progress[:n]):
        p = [math.nan] * n  # a curve without a value somewhere has no t90 to read
    at = stays_from(x[:n], p, level, rising=True)
    return interpolated_reach(x[:n], p, level, at)


def lr_budget(lr_at, steps: list[int], start: int | None = None) -> list[float]:
    """Share of the learning-rate budget sum_{s in [start, steps[-1])} lr_at(s) spent by each
    checkpoint step (steps done); start defaults to steps[0]."""
    start = steps[0] if start is None else start
    prefix = [0.0]
    for s in range(start, steps[-1]):
        prefix.append(prefix[-1] + lr_at(s))
    total = prefix[-1]
    return [prefix[c - start] / total if total > 0 else math.nan for c in steps]


def lead_summary(steps: list[int], budget: list[float], frame: dict[int, list[float]],
                 precision: dict[int, list[float]], cut: int | None = None, stays: bool = True) -> dict:
    """Per seed t90 of the frame and precision progress curves (seed -> values at `steps`) on
    both axes, and the lead; intervals over seeds. `stays`: t90 is where the curve reaches 0.9
    and stays (`settled`, before index `cut`); else the first crossing (`crossing`)."""
    per_seed = {}
    for seed in sorted(precision):
        if seed not in frame:
            continue
        row = {}
        axes: tuple[tuple[str, Sequence[float]], ...] = (("steps", steps), ("budget", budget))
        for axis, x in axes:
            if stays:
                tf, tp = settled(x, frame[seed], cut=cut), settled(x, precision[seed], cut=cut)
            else:
                tf, tp = crossing(x, frame[seed]), crossing(x, precision[seed])
            row[f"t90_frame_{axis}"], row[f"t90_precision_{axis}"] = tf, tp
            row[f"lead_{axis}"] = tp - tf if tf is not None and tp is not None else None
        per_seed[seed] = row
    out = {"per_seed": per_seed, "level": LEVEL}
    # a t90 is read at or before the last checkpoint before the cut: its interval's range ends there
    # (issue 44), not at the run's end, where no t90 can be
    last = (len(steps) if cut is None else cut) - 1
    ranges = {"steps": (steps[0], steps[last]), "budget": (budget[0], budget[last])}
    out["t90_readable_until"] = {"steps": steps[last], "budget": budget[last]}
    for axis in ("steps", "budget"):
        leads = [r[f"lead_{axis}"] for r in per_seed.values() if r[f"lead_{axis}"] is not None]
        out[f"lead_{axis}"] = t_interval(leads, null=0.0)
        lo, hi = ranges[axis]
        for which in ("frame", "precision"):  # a step of the run, a share of its budget: inside that range
            vals = [r[f"t90_{which}_{axis}"] for r in per_seed.values() if r[f"t90_{which}_{axis}"] is not None]
            out[f"t90_{which}_{axis}"] = logit_interval(vals, low=lo, high=hi) if hi > lo else t_interval(vals)
    first = {"frame": 0, "precision": 0}
    for r in per_seed.values():
        tf, tp = r["t90_frame_steps"], r["t90_precision_steps"]
        if tf is not None and (tp is None or tf < tp):
            first["frame"] += 1
        elif tp is not None and (tf is None or tp < tf):
            first["precision"] += 1
    out["frame_first_seeds"], out["precision_first_seeds"] = first["frame"], first["precision"]
    out["frame_never_seeds"] = sum(1 for r in per_seed.values() if r["t90_frame_steps"] is None)
    out["precision_never_seeds"] = sum(1 for r in per_seed.values() if r["t90_precision_steps"] is None)
    out["sign_test_p"] = sign_test(first["frame"], first["precision"])
    out["seeds"] = len(per_seed)
    return out
