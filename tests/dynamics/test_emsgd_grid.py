"""The 2-D grid of rates of `bayesbench emsgd` (issue 44, point 4): W_V's rate x the others', each
family (W_V faster, equal rates) tuned on the validation split alone, the tuned points compared at
matched fractions of the gap; and the deep variant's verdict while most seeds are censored."""

from __future__ import annotations

import math

import pytest
import torch

from bayesbench.dynamics.emsgd.controls import grid_families, tuned_grid, validation_scores
from bayesbench.dynamics.emsgd.toy import ALL_SCHEDULES, GRID, grid_name, grid_points, grid_rates
from bayesbench.dynamics.emsgd.verdicts import deep_verdicts


def test_the_grid_reuses_the_named_schedules_and_sorts_points_into_families():
    points = grid_points()
    assert grid_name(1, 1) == "sgd" and grid_name(10, 1) == "em" and grid_name(3, 3) == "sgd3"
    assert grid_name(10, 10) == "sgd10" and grid_name(30, 0.3) == "v30-o0.3" and grid_name(30, 30) == "sgd30"
    assert len(points) == 4 * 4 + 2 and set(GRID) <= set(ALL_SCHEDULES)  # 16 grid points, 2 more equal rates
    for name, (v, o) in points.items():
        assert ALL_SCHEDULES[name] == pytest.approx(grid_rates(v, o))
    fam = grid_families(list(points))
    assert len(fam["value_faster"]) == 10 and "em" in fam["value_faster"]
    assert fam["equal"] == ["sgd", "sgd3", "sgd10", "sgd0.3", "sgd30"]
    assert not set(fam["value_faster"]) & {"v1-o3", "v1-o10", "v3-o10"}  # W_V slower: neither family


def _curves(names: list[str], fast: dict[str, int], E: int = 6, n_steps: int = 100) -> torch.Tensor:
    """Training losses [S, E, n_steps + 1] falling from ln 8 to 1.5 linearly, reaching the floor
    at fast[name] steps (+/- a seed's jitter)."""
    out = torch.empty(len(names), E, n_steps + 1)
    for j, n in enumerate(names):
        for e in range(E):
            t = torch.arange(n_steps + 1).double() / (fast[n] + e % 3 - 1)
            out[j, e] = (math.log(8) - (math.log(8) - 1.5) * t.clamp(max=1.0)).float()
    return out


def test_the_grid_selects_on_validation_where_training_and_validation_disagree():
    """On the training curves v30-o10 and sgd30 are the fastest of their families; on the
    validation split they are the worst (a fast rate that memorises). The selection must follow
    validation: em and sgd3, whatever the training curves say; and the comparison then reads the
    training steps of the points chosen there."""
    names = ["sgd", "em", "sgd3", "v30-o10", "sgd30"]
    fast = {"sgd": 80, "em": 40, "sgd3": 50, "v30-o10": 10, "sgd30": 8}
    losses = _curves(names, fast)
    E, R = losses.shape[1], 11
    val = {"sgd": 2.05, "em": 2.00, "sgd3": 2.01, "v30-o10": 2.30, "sgd30": math.nan}  # sgd30 diverged
    validation = torch.stack([torch.full((E, R), v) for v in val.values()])
    validation[:, :, 0] = math.log(8)
    test = validation + 0.01
    floors = torch.full((E,), 1.6, dtype=torch.float64)
    assert tuned_grid(losses, validation, test, names, floors, 8) == {}  # not the whole grid: no tuned families
    got = tuned_grid(losses, validation, test, names, floors, 8, complete=False)
    train_best = {f: min(ns, key=lambda n: fast[n]) for f, ns in got["families"].items()}
    assert train_best == {"value_faster": "v30-o10", "equal": "sgd30"}  # what training would pick
    assert got["chosen"] == {"value_faster": "em", "equal": "sgd3"}  # what validation picks
    assert got["scores"]["equal"]["sgd30"] == math.inf  # a diverged point has no score
    half = got["speedup"]["50%"]
    assert half["n"] == E and 1.1 < half["mean"] < 1.4  # sgd3 / em steps: 50 / 40 = 1.25
    assert got["test_difference"]["mean"] == pytest.approx(2.00 - 2.01, abs=1e-6)
    assert validation_scores(validation, names, ["em"]) == {"em": pytest.approx(2.0)}
    assert got["ties"] == {"value_faster": [], "equal": []} and got["robust_to_ties"]  # clear winners, no ties
    # sgd within the seeds' noise of sgd3: tied; the comparison is then also made against sgd (80 steps: slower
    # still, so the same side) and, were the tie faster than the W_V-faster point, the sides would differ
    noisy = validation.clone()
    noisy[0] = 2.012 + 0.02 * torch.tensor([1.0, -1.0, 0.5, -0.5, 0.2, -0.2]).view(-1, 1)
    noisy[0, :, 0] = math.log(8)
    tied = tuned_grid(losses, noisy, test, names, floors, 8, complete=False)
    assert tied["ties"]["equal"] == ["sgd"] and set(tied["against_ties"]["equal"]) == {"sgd"}
    assert tied["against_ties"]["equal"]["sgd"]["mean"] > 1.5 and tied["robust_to_ties"]
    fast_tie = dict(fast, sgd=20)
    flipped = tuned_grid(_curves(names, fast_tie), noisy, test, names, floors, 8, complete=False)
    assert flipped["against_ties"]["equal"]["sgd"]["mean"] < 1 and not flipped["robust_to_ties"]
    assert tuned_grid(losses, validation, test, ["sgd"], floors, 8, complete=False) == {}  # one family absent


def test_the_deep_variant_cannot_tell_while_most_seeds_are_censored():
    censored = {"value": 1.03, "ci_low": 1.0, "ci_high": 1.09, "reached": 2, "steps": [300] * 14 + [280, 290],
                "p": 0.01}
    (v,) = deep_verdicts({"speedup_per_seed": censored})
    assert v["verdict"] == "cannot tell" and "only 2 of 16 seeds" in v["number"]
    reached = dict(censored, reached=12, value=1.5, ci_low=1.3, ci_high=1.8, p=1e-4)
    assert deep_verdicts({"speedup_per_seed": reached})[0]["verdict"] == "held"


def test_a_run_without_the_grid_keeps_its_family_size_and_grid_expands_on_the_command_line():
    from bayesbench.dynamics.emsgd.study import check_schedules, run_study

    assert set(grid_points()) <= set(check_schedules(["sgd", "em", "grid"]))
    summary = run_study("paper", [42, 2024], steps=6, length=20, schedules=["sgd", "em"])
    primary = [v for v in summary["verdicts"] if v["family"] == "primary"]
    assert len(primary) == 4 and summary["grid"] == {}
    untestable = [v for v in primary if "grid" in v["control"]]
    assert len(untestable) == 2 and all(v["verdict"] == "cannot tell" and v["p_adj"] == 1.0 for v in untestable)
    assert primary[0]["adjustment"] == "Holm over the 3 primary tests (2 untestable, counted as p = 1)"
