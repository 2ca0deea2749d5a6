"""How much sooner one schedule reaches another's final loss, with an interval over seeds.

Paper II (arXiv 2512.22473, section 7.2): speed-up = n_steps / (first step at which the EM-like
run's loss falls below SGD's final loss). `losses[e, i]` is seed e's loss after i updates
(i = 0..n_steps), so SGD's final loss is `losses[e, n_steps]` and a run that never gets there
counts n_steps (the authors' rule).

Two thresholds:
- per seed (the definition above): each seed's EM run against its own SGD final loss;
- pooled (what the authors' script does): every seed against the mean SGD final loss over seeds.
Either way the speed-up is n_steps / mean_e(steps_e). Its 95% interval over seeds (the unit of
replication): per seed, n_steps over the t-interval of the mean steps (a monotone map, so it
covers as the t-interval does), with the t-test of mean steps = n_steps (no speed-up) as its p;
pooled, the threshold moves with the seeds drawn, so a BCa bootstrap (`bayesbench.stats.bca_interval`,
which under-covers: about 0.91 at 16 normal seeds and 0.85 at 16 lognormal ones for a mean,
tests/test_stats.py `test_the_quoted_bootstrap_coverages`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor


def steps_to_reach(losses: Tensor, threshold: Tensor, n_steps: int) -> Tensor:
    """First i < n_steps with losses[e, i] < threshold[e], else n_steps: [E] (long)."""
    below = losses[:, :n_steps] < threshold.view(-1, 1)
    first = torch.where(below.any(1), below.float().argmax(1), torch.tensor(n_steps))
    return first.long()


@dataclass(frozen=True)
class SpeedUp:
    """n_steps / mean steps, its 95% interval, and the per-seed steps behind it."""

    value: float
    ci_low: float
    ci_high: float
    mean_steps: float
    steps: list[int]
    reached: int  # seeds whose EM run reached the threshold within n_steps
    threshold: str  # "per-seed" or "pooled"
    method: str = "t"  # "t": n_steps over the t-interval of the mean steps; "bca": a BCa bootstrap
    p: float = float("nan")  # per seed: the t-test of mean steps = n_steps

    def as_dict(self) -> dict:
        return asdict(self)


def speedup_text(s: SpeedUp | dict, *, detail: bool = True) -> str:
    """The speed-up in words: "2.45x [2.26, 2.67] (...)", or "not reached" when no seed's fast run
    reached the threshold (the ratio would be n_steps / n_steps = 1.00x, a number that is not one)."""
    d = s.as_dict() if isinstance(s, SpeedUp) else s
    if d["reached"] == 0:
        return f"not reached (0 of {len(d['steps'])} seeds within {max(d['steps'])} updates)"
    out = f"{d['value']:.2f}x [{d['ci_low']:.2f}, {d['ci_high']:.2f}]"
    if detail:
        return f"{out} (mean {d['mean_steps']:.0f} steps; {d['reached']} seeds reached it)"
    return f"{out} ({d['reached']} reached)"


def _ratio(n_steps: int, mean_steps: Tensor) -> Tensor:
    return n_steps / mean_steps.clamp(min=1e-12)


def speedup(fast: Tensor, slow: Tensor, n_steps: int, *, pooled: bool = False, resamples: int = 9999,
            seed: int = 0) -> SpeedUp:
    """Speed-up of `fast` over `slow` (loss curves [E, n_steps + 1], one row per seed)."""
    from ...stats import bca_interval, t_interval

    if fast.shape != slow.shape or fast.dim() != 2 or fast.shape[1] != n_steps + 1:
        raise ValueError(f"fast and slow must both be [seeds, n_steps + 1] = [E, {n_steps + 1}], "
                         f"got {tuple(fast.shape)} and {tuple(slow.shape)}")
    E = fast.shape[0]
    if E < 2:
        raise ValueError(f"a speed-up interval needs at least 2 seeds, got {E}")
    final = slow[:, n_steps]

    def steps_of(rows: Tensor) -> Tensor:
        thr = final[rows].mean().expand(len(rows)) if pooled else final[rows]
        return steps_to_reach(fast[rows], thr, n_steps).double()

    steps = steps_of(torch.arange(E))
    value = float(_ratio(n_steps, steps.mean()))
    if pooled:  # the threshold moves with the seeds drawn
        ci = bca_interval(list(range(E)), lambda idx: float(_ratio(n_steps, steps_of(torch.as_tensor(idx)).mean())),
                          resamples=resamples, seed=seed)
        lo, hi, method, p = ci["ci_low"], ci["ci_high"], "bca", float("nan")
    else:
        ci = t_interval(steps.tolist(), null=float(n_steps))
        lo = n_steps / ci["ci_high"] if ci["ci_high"] > 0 else float("inf")
        hi = n_steps / ci["ci_low"] if ci["ci_low"] > 0 else float("inf")
        method, p = "t", ci["p"]
    return SpeedUp(value, lo, hi, float(steps.mean()), [int(s) for s in steps], int((steps < n_steps).sum()),
                   "pooled" if pooled else "per-seed", method, p)
