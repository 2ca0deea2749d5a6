"""Frame and precision over training: the maps' movement, and checkpoints to measure it at.

Paper II (arXiv 2512.22473, section 6) reads attention as the "frame" (which keys a query uses)
and the values as the "precision" (what is read from them); it predicts that the frame
stabilises early while the posterior keeps sharpening. Measured here on checkpoints c of one
training run, per layer and member (lead.py compares the two on a common axis):

    drift(c)     mean over probe sequences, heads and queries i of the total-variation distance
                 0.5 * sum_j |alpha^c_ij - alpha^final_ij| between the map at c and the final map
    velocity(c)  the TV distance between the maps at checkpoints c - 1 and c, per step between them
    freeze       `freeze_step`: the first checkpoint from which the map's velocity stays at most
                 `fraction` of its largest velocity for the rest of the run (None: never froze)

The drift is measured against the final map, so drift(last) = 0 by construction: a criterion
"drift <= 10% of drift(first)" fires by the last checkpoint of every run, moving or not (under
a cosine schedule it fires when the learning rate has run out). The velocity criterion compares
the map with its own past and need not fire.
"""

from __future__ import annotations

import math

from torch import Tensor


def tv_to_final(maps: Tensor) -> Tensor:
    """maps [C, ..., T, T] (checkpoints first, each row a distribution over keys) -> [C, ...]:
    the TV distance of each row to the same row of the last checkpoint, averaged over the rows."""
    if maps.dim() < 3:
        raise ValueError(f"maps must have shape [C, ..., T, T], got {tuple(maps.shape)}")
    final = maps[-1:]
    return 0.5 * (maps - final).abs().sum(-1).mean(-1)


def tv_consecutive(maps: Tensor) -> Tensor:
    """maps [C, ..., T, T] -> [C - 1, ...]: the TV distance of each row from checkpoint c to c + 1,
    averaged over the rows."""
    if maps.dim() < 3 or maps.shape[0] < 2:
        raise ValueError(f"maps must have shape [C >= 2, ..., T, T], got {tuple(maps.shape)}")
    return 0.5 * (maps[1:] - maps[:-1]).abs().sum(-1).mean(-1)


def freeze_step(steps: list[int], velocity: list[float], fraction: float = 0.1) -> int | None:
    """The first checkpoint step c such that the velocity of every interval after c is at most
    `fraction` of the largest velocity; None when the last interval is still faster (or the map
    never moved). steps: the C checkpoint steps; velocity: the C - 1 interval velocities."""
    if len(steps) != len(velocity) + 1 or not velocity:
        raise ValueError(f"need C >= 2 checkpoint steps and C - 1 velocities, got {len(steps)} and {len(velocity)}")
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    v = [x if math.isfinite(x) else math.inf for x in velocity]
    peak = max(v)
    if not (0 < peak < math.inf):
        return None
    frozen = None
    for c in range(len(v) - 1, -1, -1):  # walk back while the intervals stay slow
        if v[c] > fraction * peak:
            break
        frozen = steps[c]
    return frozen


def gain_after(steps: list[int], mae: list[float], step: int | None) -> dict:
    """Entropy MAE at `step`, at the end, the MAE still gained after `step` and its share of the
    whole run's gain (mae[0] - mae[-1])."""
    if len(steps) != len(mae) or not steps:
        raise ValueError(f"steps and mae must be non-empty and of one length, got {len(steps)} and {len(mae)}")
    if step is None:
        return {"mae_at_freeze": math.nan, "mae_final": mae[-1], "gained_after": math.nan, "share_after": math.nan}
    if step not in steps:
        raise ValueError(f"step {step} is not one of the checkpoint steps {steps}")
    at = mae[steps.index(step)]
    total = mae[0] - mae[-1]
    gained = at - mae[-1]
    return {"mae_at_freeze": at, "mae_final": mae[-1], "gained_after": gained,
            "share_after": gained / total if total > 0 else math.nan}


SPACINGS = ("even", "quadratic")


def checkpoint_steps(total: int, count: int, start: int = 0, spacing: str = "quadratic") -> list[int]:
    """`count` checkpoint steps from `start` to `start + total`: "quadratic" start + round(total *
    (k / (count - 1))^2) (dense early, where the maps move) or "even" start + round(total * k /
    (count - 1)) (no quantisation of late events); duplicates removed."""
    if total < 1 or count < 2:
        raise ValueError(f"checkpoints need total >= 1 and count >= 2, got total={total}, count={count}")
    if spacing not in SPACINGS:
        raise ValueError(f"spacing must be one of {SPACINGS}, got {spacing!r}")
    power = 2 if spacing == "quadratic" else 1
    return sorted({start + round(total * (k / (count - 1)) ** power) for k in range(count)})
