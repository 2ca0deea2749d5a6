"""Probe and evaluation sets drawn per seed (issue 44, point 6; `bayesbench/dynamics/sets.py`):
each seed's own sets from an evaluation seed derived from it (never a training seed), the same
seed the same sets; each member scored and measured on its own; "shared" as before."""

from __future__ import annotations

import math

import pytest
import torch

from bayesbench.dynamics.geometry.measure import measure
from bayesbench.dynamics.sets import calibration, member_set_seed, member_sets, scored_rows, stack_sets
from bayesbench.models import get_model
from bayesbench.scoring.evaluate import eval_set, evaluate_members
from bayesbench.tasks import BijectionTask, get_task
from bayesbench.training.seeds import TRAIN_SEED_DOMAIN, data_seed

TINY = {"n_layer": 2, "n_head": 2, "d_model": 16, "d_ffn": 32}


def test_two_seeds_get_different_probe_batches_and_the_same_seed_the_same_one():
    task = get_task("sticky")
    a0, a1 = member_sets(task, 4, "profile-probe", [0, 1])
    b0, b3 = member_sets(task, 4, "profile-probe", [0, 3])
    assert not torch.equal(a0.tokens, a1.tokens)  # two seeds: two samples of the task
    assert torch.equal(a0.tokens, b0.tokens) and torch.equal(a0.posterior, b0.posterior)  # one seed: one set
    assert not torch.equal(b3.tokens, a1.tokens)
    # the purpose is part of the derivation: a seed's probe batch is not its held-out law batch
    assert not torch.equal(member_sets(task, 4, "profile-heldout-law", [0])[0].tokens, a0.tokens)
    # an evaluation seed: in no training stream's domain (data_seed and the replicas' streams are below it)
    seeds = [member_set_seed(task, p, s) for p in ("profile-probe", "profile-eval", "geometry") for s in range(16)]
    assert len(set(seeds)) == len(seeds) and min(seeds) >= TRAIN_SEED_DOMAIN > max(data_seed(s) for s in range(16))
    shared = member_sets(task, 4, "profile-probe", [0, 1, 2], "shared")
    assert shared[0] is shared[1] is shared[2] and torch.equal(shared[0].tokens, eval_set(task, 4).tokens)
    with pytest.raises(ValueError, match="sets must be one of"):
        member_sets(task, 4, "profile-probe", [0], "mixed")


def test_each_member_is_scored_on_its_own_set_and_shared_sets_score_as_before():
    task = BijectionTask(V=5)
    model = get_model("transformer", task, seeds=[0, 1], **TINY)
    own = member_sets(task, 6, "profile-eval", [0, 1])
    got = calibration(model, own)
    for e, b in enumerate(own):
        alone = evaluate_members(model, b)[e]  # the member on its set, as the shared path scores it
        assert math.isclose(got[0, e], alone.entropy_mae.mean, rel_tol=1e-9)
        assert math.isclose(got[1, e], alone.kl.mean, rel_tol=1e-9)
    shared = calibration(model, [own[0], own[0]])
    before = evaluate_members(model, own[0])
    assert torch.allclose(shared, torch.tensor([[s.entropy_mae.mean for s in before], [s.kl.mean for s in before]],
                                               dtype=torch.float64), rtol=1e-9)
    s = stack_sets(own)
    assert s.tokens.shape == (2, 6, task.seq_len) and torch.equal(s.tokens[1], own[1].tokens)
    with pytest.raises(ValueError, match="one set per member"):
        calibration(model, own[:1])


def test_a_continuous_member_is_scored_on_its_own_set_against_its_density():
    """linreg (a Gaussian head): each member's entropy error and KL on its own set are the ones
    `evaluate_members` gives that member alone on that set, against the predictive density."""
    task = get_task("linreg", d=2, n=4)
    model = get_model("transformer", task, seeds=[0, 1], **TINY)
    own = member_sets(task, 6, "profile-eval", [0, 1])
    got = calibration(model, own, task=task)
    for e, b in enumerate(own):
        alone = evaluate_members(model, b, task)[e]
        assert math.isclose(got[0, e], alone.entropy_mae.mean, rel_tol=1e-9)
        assert math.isclose(got[1, e], alone.kl.mean, rel_tol=1e-9)


def test_scored_rows_average_over_each_members_own_positions():
    """Unequal scored counts are padded, and scaled so that a mean over rows is the member's own mean."""
    probs = torch.rand(2, 3, 4, 5, generator=torch.Generator().manual_seed(0))
    mask = torch.zeros(2, 3, 4, dtype=torch.bool)
    mask[0, :, 1:] = True  # 9 positions
    mask[1, 0, 2:] = True  # 2 positions
    rows = scored_rows(probs, mask)
    assert rows.shape == (2, 9, 5)
    for e in range(2):
        assert torch.allclose(rows[e].pow(2).sum(-1).mean(), probs[e][mask[e]].pow(2).sum(-1).mean())
    even = torch.ones(2, 3, 4, dtype=torch.bool)
    assert torch.equal(scored_rows(probs, even), probs.reshape(2, 12, 5))


def test_geometry_measures_each_member_on_its_own_sequences():
    task = BijectionTask(V=4)
    model = get_model("transformer", task, seeds=[0, 1], **{**TINY, "n_layer": 1, "n_head": 1})
    own = member_sets(task, 4, "geometry", [0, 1])
    g = measure(model, own, task)
    alone = [measure(model, b, task) for b in own]  # every member on member e's set: member e's must agree
    for e in range(2):
        assert torch.allclose(g.intact_mae[:, e], alone[e].intact_mae[:, e])
        assert torch.allclose(g.attn_entropy[0][e], alone[e].attn_entropy[0][e])
        assert math.isclose(g.value_var[0][e][0], alone[e].value_var[0][e][0], rel_tol=1e-9)
    same = measure(model, [own[0], own[0]], task)  # one batch object for both: the shared path, as before
    assert torch.equal(same.intact_mae, alone[0].intact_mae)


def test_the_belief_probe_fits_each_member_on_its_own_sequences():
    from bayesbench.dynamics.belief_probe.measure import belief_targets, member_targets, probe, residual_streams

    task = get_task("mess3")
    model = get_model("transformer", task, seeds=[0, 1], **TINY)
    own = member_sets(task, 12, "belief-probe", [0, 1])
    positions, beliefs = member_targets(task, own)
    res = probe(residual_streams(model, own), positions, beliefs, [0, 1])
    for e, b in enumerate(own):
        alone = probe(residual_streams(model, b), *belief_targets(task, b), [0, 1])  # every member on set e
        assert all(math.isclose(res.r2[s][e], alone.r2[s][e], rel_tol=1e-9, abs_tol=1e-12) for s in res.streams)
