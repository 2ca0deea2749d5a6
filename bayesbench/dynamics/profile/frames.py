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

and, to read them against chance, in squared Euclidean distance between rows,
||a_i - b_i||^2 = sum_j (a_ij - b_ij)^2 averaged over the rows, where independent jitter adds
its variance instead of mixing with the systematic part as it does in TV:

    drift_sq(c)  to the *late map*, the mean of the last K checkpoints' maps (an average of
                 distributions is one): its own jitter averaged down
    jitter_sq(c) the mean pairwise squared distance between the maps at c of R + 1 continuations
                 of the state at the previous checkpoint with different data orders (the run's own
                 and R replicas; profiler.py): twice the variance chance alone gives a map over
                 that interval (`pairwise_sq`; `pairwise_tv` the same in TV, for the record)
    step_sq(c)   the squared distance between the maps at c - 1 and c
    map_entropy  mean over probe sequences and queries i >= 1 of the attention entropy (bits)

The drift to the final map is 0 at the last checkpoint by construction and, once the maps only
jitter, about the jitter everywhere before it: a criterion "drift <= 10% of drift(first)" can
then only fire inside the last interval, whatever the run did (a constant-rate sticky run put
the frame's t90 at 779-787 of 800 steps that way). lead.py therefore takes the drift to the late
map with the jitter's share removed (E drift_sq = systematic^2 + jitter_sq (1 + 1/K) / 2), and
the movement over an interval against the replicas' jitter over the same interval
(`movement_ratio` = step_sq / jitter_sq: about 1 or below when the map only jitters; the same
learning rate moves both, so it holds per unit of learning rate too). A map can drift steadily by
less than its jitter per interval and still travel far over many: the per-interval ratio cannot
see that, the drift to the late map can, so the freeze is read off the drift (summary.py).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def tv_to_final(maps: Tensor) -> Tensor:
    """maps [C, ..., T, T] (checkpoints first, each row a distribution over keys) -> [C, ...]:
    the TV distance of each row to the same row of the last checkpoint, averaged over the rows."""
    if maps.dim() < 3:
        raise ValueError(f"maps must have shape [C, ..., T, T], got {tuple(maps.shape)}")
    final = maps[-1:]
    return 0.5 * (maps - final).abs().sum(-1).mean(-1)


def tv_to_late(maps: Tensor, k: int) -> Tensor:
    """maps [C, ..., T, T] -> [C, ...]: the TV distance of each row to the same row of the mean of
    the last k checkpoints' maps, averaged over the rows."""
    if maps.dim() < 3 or not 1 <= k <= maps.shape[0]:
        raise ValueError(f"need maps [C, ..., T, T] and 1 <= k <= C, got {tuple(maps.shape)} and k={k}")
    late = maps[-k:].mean(0, keepdim=True)
    return 0.5 * (maps - late).abs().sum(-1).mean(-1)


def sq_to_late(maps: Tensor, k: int) -> Tensor:
    """maps [C, ..., T, T] -> [C, ...]: the squared distance of each row to the same row of the
    mean of the last k checkpoints' maps, averaged over the rows."""
    if maps.dim() < 3 or not 1 <= k <= maps.shape[0]:
        raise ValueError(f"need maps [C, ..., T, T] and 1 <= k <= C, got {tuple(maps.shape)} and k={k}")
    late = maps[-k:].mean(0, keepdim=True)
    return (maps - late).pow(2).sum(-1).mean(-1)


def sq_consecutive(maps: Tensor) -> Tensor:
    """maps [C, ..., T, T] -> [C - 1, ...]: the squared distance of each row from checkpoint c to
    c + 1, averaged over the rows."""
    if maps.dim() < 3 or maps.shape[0] < 2:
        raise ValueError(f"maps must have shape [C >= 2, ..., T, T], got {tuple(maps.shape)}")
    return (maps[1:] - maps[:-1]).pow(2).sum(-1).mean(-1)


def pairwise_sq(maps: Tensor) -> Tensor:
    """maps [R, ..., T, T] (R >= 2 continuations) -> [...]: the mean over the pairs of the squared
    distance between their rows, averaged over the rows."""
    if maps.dim() < 3 or maps.shape[0] < 2:
        raise ValueError(f"maps must have shape [R >= 2, ..., T, T], got {tuple(maps.shape)}")
    R = maps.shape[0]
    return torch.stack([(maps[a] - maps[b]).pow(2).sum(-1).mean(-1) for a in range(R) for b in range(a + 1, R)]).mean(0)


def drift_floor_sq(own: Tensor, own_late: Tensor, reps: Tensor, reps_late: Tensor) -> Tensor:
    """The chance part of the squared drift to the late map at one checkpoint c, for any jitter
    process: own / reps [R, ...] the maps at c of the run and of R continuations of the state at
    the checkpoint before c with other data orders, run on through the late window; own_late /
    reps_late [R, ...] their late maps (means of their last K checkpoints' maps). Each continuation
    r gives a drift vector D_r = X_r(c) - late_r; E ||D||^2 = ||E D||^2 + tr Var D, and half the
    mean pairwise squared distance of the D_r estimates tr Var D ([...]: summed over the last
    dim, averaged over the one before it, as `sq_to_late`).

    Independent jitter of pairwise squared difference J2 gives J2 (1 + 1/K) / 2 (lead.jitter_floor,
    which only holds then); a random walk gives the walk's variance over the gap from c to the
    late window, which one interval's replicas cannot see (tests/dynamics/test_jitter.py)."""
    if own.shape != own_late.shape or reps.shape != reps_late.shape or reps.shape[1:] != own.shape:
        raise ValueError(f"need own, own_late [...] and reps, reps_late [R, ...], got {tuple(own.shape)}, "
                         f"{tuple(own_late.shape)}, {tuple(reps.shape)}, {tuple(reps_late.shape)}")
    drifts = torch.cat([(own - own_late).unsqueeze(0), reps - reps_late])
    return pairwise_sq(drifts) / 2


def pairwise_tv(maps: Tensor) -> Tensor:
    """maps [R, ..., T, T] (R >= 2 continuations) -> [...]: the mean over the R(R-1)/2 pairs of the
    TV distance between their rows, averaged over the rows."""
    if maps.dim() < 3 or maps.shape[0] < 2:
        raise ValueError(f"maps must have shape [R >= 2, ..., T, T], got {tuple(maps.shape)}")
    R = maps.shape[0]
    pairs = [0.5 * (maps[a] - maps[b]).abs().sum(-1).mean(-1) for a in range(R) for b in range(a + 1, R)]
    return torch.stack(pairs).mean(0)


def map_entropy(maps: Tensor) -> Tensor:
    """maps [L, E, B, H, T, T] -> [L, E, H]: attention entropy in bits, mean over the sequences
    and the queries that see more than one key (i >= 1)."""
    h = -torch.special.xlogy(maps, maps).sum(-1) / math.log(2)  # [L, E, B, H, T]
    return h[..., 1:].mean((2, 4))


def movement_ratio(moved: list[float], jitter: list[float]) -> list[float]:
    """Squared distance moved over each interval / the replicas' jitter_sq over it (NaN without a
    jitter): above 1 the map moved more than two continuations of one state differ by chance."""
    return [m / j if j > 0 and math.isfinite(j) and math.isfinite(m) else math.nan for m, j in zip(moved, jitter)]


def interpolate(steps: list[int], at: dict[int, float]) -> list[float]:
    """Values known at some steps (`at`) at every step of `steps`: linear in the step between
    known ones, the nearest known one beyond them (NaN when none is known)."""
    known = sorted((s, v) for s, v in at.items() if math.isfinite(v))
    if not known:
        return [math.nan] * len(steps)
    out = []
    for s in steps:
        if s <= known[0][0]:
            out.append(known[0][1])
        elif s >= known[-1][0]:
            out.append(known[-1][1])
        else:
            k = next(i for i in range(1, len(known)) if known[i][0] >= s)
            (a, va), (b, vb) = known[k - 1], known[k]
            out.append(va + (vb - va) * (s - a) / (b - a))
    return out


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
