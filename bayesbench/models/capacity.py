"""Capacity matching: pick widths so that a model has (within 1%) a target number of parameters.

Every architecture's count grows with a coarse width (d_model: the hidden or residual width) in
steps too big for 1% at small sizes (~2/d_model relative per unit), so each `match_<arch>` fits
the coarse width by bisection (`fit_width`) and then a fine knob (LSTM/GRU: the embedding width;
Mamba: d_inner; linear attention: d_ffn; toy attention: d_head) by a second bisection
(`match_widths`). Counts come from building the model on the meta device (`meta_params`), so
they are exact by construction.
"""

from __future__ import annotations

from typing import Callable

import torch

from ..checks import positive_int
from .base import EnsembleModel


def meta_params(build: Callable[[], EnsembleModel]) -> int:
    """Parameters of one member of the model `build()` makes, built on the meta device (no memory, no init)."""
    with torch.device("meta"):
        return build().num_params()


def fit_width(count: Callable[[int], int], target: int, *, step: int = 1) -> int:
    """The multiple of `step` (>= step) whose count is closest to target, for count increasing."""
    lo, hi = step, step
    if count(lo) >= target:
        return lo
    while count(hi) < target:
        lo, hi = hi, hi * 2
    while hi - lo > step:  # invariant: count(lo) < target <= count(hi)
        mid = (lo + hi) // (2 * step) * step
        lo, hi = (mid, hi) if count(mid) < target else (lo, mid)
    return lo if target - count(lo) <= count(hi) - target else hi


def match_widths(count: Callable[[int, int], int], target: int, *, default_fine: Callable[[int], int],
                 coarse_step: int = 1, fine_step: int = 1, tolerance: float = 0.01,
                 what: str = "model") -> tuple[int, int]:
    """(coarse, fine) widths whose count is within `tolerance` of target.

    The coarse width is fitted with the fine one at its default (e.g. d_embed = d_model); for it
    and its two neighbours the candidates are the default fine width and the fitted one. Among
    those within tolerance the one whose fine width is nearest its default wins (the most
    standard shape; then the smaller gap); if none is, a ValueError names the closest.
    """
    positive_int("target", target)
    if not 0 < tolerance < 1:
        raise ValueError(f"tolerance must be in (0, 1), got {tolerance!r}")
    def fitted_fine(c: int) -> int:
        """The fine width closest to target at coarse width c."""
        return fit_width(lambda f: count(c, f), target, step=fine_step)

    coarse = fit_width(lambda c: count(c, default_fine(c)), target, step=coarse_step)
    candidates = []
    for c in (coarse - coarse_step, coarse, coarse + coarse_step):
        if c >= coarse_step:
            for f in (default_fine(c), fitted_fine(c)):
                candidates.append((abs(count(c, f) - target) / target, c, f))
    ok = [cand for cand in candidates if cand[0] <= tolerance]
    if ok:
        _, c, f = min(ok, key=lambda cand: (abs(cand[2] - default_fine(cand[1])), cand[0]))
        return c, f
    _, c, f = min(candidates)
    raise ValueError(f"no {what} within {tolerance:.0%} of {target} parameters "
                     f"(closest: {count(c, f)} at widths {c}, {f}; try another n_layer)")
