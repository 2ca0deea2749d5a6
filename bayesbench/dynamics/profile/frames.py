"""Frame-precision dissociation: attention maps freeze early while calibration keeps improving.

Paper II (arXiv 2512.22473, section 6) reads attention as the "frame" (which keys a query uses)
and the values as the "precision" (what is read from them); it predicts that the frame
stabilises early while the posterior keeps sharpening. Measured here on checkpoints c of one
training run, per layer and member:

    drift(c)   mean over probe sequences, heads and queries i of the total-variation distance
               0.5 * sum_j |alpha^c_ij - alpha^final_ij| between the map at c and the final map
    freeze     the first checkpoint step at which drift <= fraction * drift(first checkpoint)
               (fraction 0.1 by default: the map has covered 90% of its way to the final one)
    gained     entropy MAE (bits) at the freeze step minus the final entropy MAE: how much
               calibration still improves after the layer's map has frozen
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


def freeze_step(steps: list[int], drift: list[float], fraction: float = 0.1) -> int | None:
    """First step whose drift is <= fraction * drift at steps[0]; None when drift[0] is 0 or NaN."""
    if len(steps) != len(drift) or not steps:
        raise ValueError(f"steps and drift must be non-empty and of one length, got {len(steps)} and {len(drift)}")
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    first = drift[0]
    if not (first > 0 and math.isfinite(first)):
        return None
    for s, d in zip(steps, drift):
        if d <= fraction * first:
            return s
    return None


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


def checkpoint_steps(total: int, count: int, start: int = 0) -> list[int]:
    """`count` checkpoint steps from `start` to `start + total`, spaced quadratically (dense early,
    where the maps move): start + round(total * (k / (count - 1))^2), duplicates removed."""
    if total < 1 or count < 2:
        raise ValueError(f"checkpoints need total >= 1 and count >= 2, got total={total}, count={count}")
    return sorted({start + round(total * (k / (count - 1)) ** 2) for k in range(count)})
