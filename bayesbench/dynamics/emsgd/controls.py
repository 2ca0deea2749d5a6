"""EM-like against matched controls: how far each schedule gets, and how much sooner.

The EM-like schedule's 10x learning rate on W_V could be faster because of its two timescales
(Paper II, arXiv 2512.22473, section 7.2: values as the fast "M-step") or simply because some
learning rate is larger. The controls (`toy.CONTROLS`) train the same data, seeds and initial
weights with 10x on W_O, 10x on W_Q and W_K, or every learning rate at 3x and 10x. Two measures:

- **Gap progress.** Per seed e the gap runs from chance, ln C (uniform prediction over C
  classes), to the exact filtering floor F_e of that seed's data. `steps_to_gap` gives the first
  update at which the training loss is below ln C - p (ln C - F_e), for p = 25%, 50%, 90%
  (n_steps where never: right-censored); `gap_share` how much of the gap the final loss covers.
- **Paired speed-up at a gap fraction.** Per seed, steps of the control over steps of EM-like,
  both at the same p; the geometric mean over the seeds where both reached it, with the
  t-interval of the mean log ratio and its test against 1 (`bayesbench.stats.ratio_interval`).
  Seeds where only EM-like reached p are counted apart (their ratio is only bounded below).

The steps-to-final-loss speed-up (`speedup.speedup`, per-seed and the authors' pooled rule) is
computed against every control as well (study.py).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ...stats import ratio_interval, t_interval
from .speedup import steps_to_reach

FRACTIONS = (0.25, 0.5, 0.9)


def gap_thresholds(floors: Tensor, n_classes: int, fraction: float) -> Tensor:
    """ln C - fraction * (ln C - floor_e) per seed: [E]."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
    chance = math.log(n_classes)
    if (floors >= chance).any():
        raise ValueError(f"every floor must be below chance ln {n_classes} = {chance:.4f}, got {floors.tolist()}")
    return chance - fraction * (chance - floors.double())


def steps_to_gap(losses: Tensor, floors: Tensor, n_classes: int, fractions=FRACTIONS) -> Tensor:
    """losses [E, n_steps + 1] -> [len(fractions), E]: first update with the loss below each
    gap threshold (n_steps where never reached)."""
    n_steps = losses.shape[1] - 1
    return torch.stack([steps_to_reach(losses.double(), gap_thresholds(floors, n_classes, p), n_steps)
                        for p in fractions])


def gap_share(final: Tensor, floors: Tensor, n_classes: int) -> Tensor:
    """(ln C - final_e) / (ln C - floor_e): the share of the gap covered per seed [E]."""
    chance = math.log(n_classes)
    return (chance - final.double()) / (chance - floors.double())


def paired_speedup(fast: Tensor, slow: Tensor, n_steps: int) -> dict:
    """Per-seed ratio slow / fast of the steps to one threshold ([E] each, n_steps = never).

    Returns the geometric mean and its interval over the seeds where both reached it ("n"),
    how many seeds only `fast` reached ("only_fast", ratio > n_steps / fast there), only `slow`
    ("only_slow") and neither ("neither")."""
    both = (fast < n_steps) & (slow < n_steps)
    ratios = (slow[both].double() / fast[both].double().clamp(min=1)).tolist()
    out = ratio_interval(ratios, null=1.0)
    out.update({"only_fast": int(((fast < n_steps) & (slow >= n_steps)).sum()),
                "only_slow": int(((slow < n_steps) & (fast >= n_steps)).sum()),
                "neither": int(((fast >= n_steps) & (slow >= n_steps)).sum())})
    return out


def gap_table(losses: Tensor, names: list[str], floors: Tensor, n_classes: int, fractions=FRACTIONS) -> dict:
    """Per schedule: steps to each gap fraction per seed, how many seeds reached it, the median
    steps, and the final gap share (mean with a t-interval over seeds: a share that passes 1 past
    the floor is a schedule fitting its training data, so it has no upper bound).
    losses [S, E, n_steps + 1]."""
    n_steps = losses.shape[-1] - 1
    out = {}
    for j, name in enumerate(names):
        steps = steps_to_gap(losses[j], floors, n_classes, fractions)
        out[name] = {"fractions": list(fractions), "steps": steps.tolist(),
                     "reached": [int((s < n_steps).sum()) for s in steps],
                     "median_steps": [float(s.double().median()) for s in steps],
                     "final_gap_share": t_interval(gap_share(losses[j, :, -1], floors, n_classes).tolist())}
    return out


def best_on_validation(validation: Tensor, names: list[str], candidates: tuple[str, ...]) -> str | None:
    """The candidate schedule whose validation loss at its best recorded step, averaged over seeds,
    is lowest (validation [S, E, R]; None if no candidate ran): chosen on a split that is never
    reported."""
    present = [c for c in candidates if c in names]
    if not present:
        return None
    return min(present, key=lambda c: float(validation[names.index(c)].double().min(1).values.mean()))


GRID_FAMILIES = ("value_faster", "equal")  # W_V's rate above the others' / every rate equal


def grid_families(names: list[str]) -> dict[str, list[str]]:
    """The grid points among `names` (toy.grid_points), by family: "value_faster" (W_V's rate
    above the others': the EM-like idea) and "equal" (one rate on every matrix: plain SGD).
    Points with W_V slower belong to neither."""
    from .toy import grid_points

    points = grid_points()
    present = [n for n in points if n in names]
    return {"value_faster": [n for n in present if points[n][0] > points[n][1]],
            "equal": [n for n in present if points[n][0] == points[n][1]]}


def validation_scores(validation: Tensor, names: list[str], candidates: list[str]) -> dict[str, float]:
    """Each candidate's tuning score on the validation split: its lowest validation loss over
    the recorded steps, averaged over seeds (validation [S, E, R]; NaN or inf counts as no score:
    +inf, never chosen)."""
    out = {}
    for c in candidates:
        v = float(validation[names.index(c)].double().min(1).values.mean())
        out[c] = v if math.isfinite(v) else math.inf
    return out


def tuned_grid(losses: Tensor, validation: Tensor, test: Tensor, names: list[str], floors: Tensor,
               n_classes: int, fractions=FRACTIONS, *, complete: bool = True) -> dict:
    """The 2-D grid's comparison (docs/em_vs_sgd.md): each family's point chosen on the
    validation split alone (`validation_scores`: lowest validation loss), then, on the training
    split, the paired speed-up of the chosen W_V-faster point over the chosen equal-rate point at
    each fraction of the gap (equal-rate steps / W_V-faster steps per seed: above 1, the two
    timescales are faster), and on the test split the difference of their test losses at each
    one's validation-chosen step. Empty when the grid was not trained: unless `complete` is
    False, every grid point must be among `names` (a family tuned over fewer points than the
    grid names is not the family named in advance).

    The selection never reads the training or test losses: choosing the fastest point on the
    training curves it then reports on would favour the family with more points (a maximum over
    10 noisy points against one over 5)."""
    from .toy import grid_points

    fam = grid_families(names)
    if not fam["value_faster"] or not fam["equal"] or (complete and not set(grid_points()) <= set(names)):
        return {}
    n_steps = losses.shape[-1] - 1
    scores = {f: validation_scores(validation, names, fam[f]) for f in GRID_FAMILIES}
    chosen = {f: min(scores[f], key=lambda n: scores[f][n]) for f in GRID_FAMILIES}
    fast, slow = (steps_to_gap(losses[names.index(chosen[f])], floors, n_classes, fractions) for f in GRID_FAMILIES)
    stopped = {}
    for f in GRID_FAMILIES:
        j = names.index(chosen[f])
        at = validation[j].argmin(1)
        stopped[f] = test[j].gather(1, at.view(-1, 1)).squeeze(1).double()
    half = list(fractions).index(0.5) if 0.5 in fractions else 0
    ties = tied_points(validation, names, fam, chosen)
    # the comparison at 50% against every point the validation split cannot tell from the chosen one
    against_ties = {"equal": {n: paired_speedup(fast[half], steps_to_gap(losses[names.index(n)], floors, n_classes,
                                                                        fractions)[half], n_steps)
                              for n in ties["equal"]},
                    "value_faster": {n: paired_speedup(steps_to_gap(losses[names.index(n)], floors, n_classes,
                                                                    fractions)[half], slow[half], n_steps)
                                     for n in ties["value_faster"]}}
    main = paired_speedup(fast[half], slow[half], n_steps)
    sides = {_side(d) for d in [main, *against_ties["equal"].values(), *against_ties["value_faster"].values()]}
    return {"families": fam, "scores": scores, "chosen": chosen, "ties": ties, "against_ties": against_ties,
            "robust_to_ties": len(sides) == 1 and 0 not in sides,
            "criterion": "lowest validation loss (mean over seeds)",
            "speedup": {f"{p:.0%}": paired_speedup(fast[k], slow[k], n_steps) for k, p in enumerate(fractions)},
            "test_difference": t_interval((stopped["value_faster"] - stopped["equal"]).tolist(), null=0.0)}


def _side(d: dict) -> int:
    """+1 / -1: a paired speed-up above / below 1 at p < 0.05 (unadjusted); 0: cannot tell."""
    if not (d.get("p", math.nan) < 0.05):
        return 0
    return 1 if d["mean"] > 1 else -1


def tied_points(validation: Tensor, names: list[str], families: dict[str, list[str]],
                chosen: dict[str, str]) -> dict[str, list[str]]:
    """Per family, the other points the validation split cannot tell from the chosen one: the
    per-seed difference of their scores (lowest validation loss) from the chosen point's has a
    95% t-interval that does not lie above 0. A choice among tied points is the criterion's
    noise, so the comparison is also reported against each of them (`tuned_grid`)."""
    def per_seed(n: str) -> Tensor:
        return validation[names.index(n)].double().min(1).values

    out: dict[str, list[str]] = {}
    for f, members in families.items():
        best = per_seed(chosen[f])
        out[f] = []
        for n in members:
            if n == chosen[f] or not bool(torch.isfinite(per_seed(n)).all()):  # a diverged point is no tie
                continue
            d = t_interval((per_seed(n) - best).tolist(), null=0.0)
            if not (d["ci_low"] > 0):
                out[f].append(n)
    return out
