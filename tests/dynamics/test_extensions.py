"""The profile's two extensions on inputs with known answers: relevant-key ranks on the
bijection with repeated keys, and per-head specialisation timing."""

from __future__ import annotations

import pytest
import torch

from bayesbench.dynamics.profile.heads import head_summary, head_timing
from bayesbench.dynamics.profile.relevance import (
    RELEVANCE_NAMES,
    applies,
    relevance_statistics,
    relevance_summary,
    relevant_keys,
    sign_test,
)
from bayesbench.dynamics.store import Measurement
from bayesbench.tasks import get_task


def _task():
    return get_task("bijection", V=4, variant="code", L=3)


def test_relevant_keys_are_the_values_after_earlier_occurrences():
    task = _task()
    # keys 1, 2, 1 then the query 1; values 4 + pi(key)
    tokens = torch.tensor([1, 7, 2, 5, 1, 7, 1])
    rel = relevant_keys(task, tokens)
    expected = torch.zeros(7, 7, dtype=torch.bool)
    expected[4, 1] = True  # the second 1 reads the value after the first
    expected[6, 1] = expected[6, 5] = True  # the query reads either
    assert torch.equal(rel, expected)
    assert applies(task) and not applies(get_task("bijection", V=4)) and not applies(get_task("sticky", V=4, L=8))
    with pytest.raises(ValueError, match="keys drawn with replacement"):
        relevant_keys(get_task("bijection", V=4), tokens)


def test_relevance_statistics_by_hand():
    task = _task()
    tokens = torch.tensor([1, 7, 2, 5, 1, 7, 1])
    rel = relevant_keys(task, tokens).view(1, 7, 7)  # [B, T, T]
    keep = torch.ones(7, 7).tril().bool()
    adv = torch.where(keep, torch.rand(7, 7, generator=torch.Generator().manual_seed(0)) * 0.1, 0.0)
    alpha = torch.where(keep, torch.full((7, 7), 0.01), 0.0)
    adv[4, 1], alpha[4, 3] = 1.0, 0.9  # row 4: A points at the relevant key, alpha elsewhere
    adv[6, 5], alpha[6, 5] = 1.0, 0.9  # row 6: both at a relevant key
    alpha = alpha / alpha.sum(-1, keepdim=True)
    got = relevance_statistics(adv.view(1, 1, 7, 7), alpha.view(1, 1, 7, 7), rel)  # H = 1
    v = {n: float(got[i, 0]) for i, n in enumerate(RELEVANCE_NAMES)}
    assert v["relevant_top1_adv"] == 1.0 and v["relevant_top1_alpha"] == 0.5
    assert v["relevant_top1_chance"] == pytest.approx((1 / 5 + 2 / 7) / 2)
    assert v["relevant_adv_rank"] == 0.0
    # row 4 under alpha: key 3 is above the relevant key 1 (the others tie with it): 1 of 4 others
    assert v["relevant_alpha_rank"] == pytest.approx((1 / 4 + 0) / 2)
    assert v["relevant_alpha_mass"] == pytest.approx(float((alpha[4, 1] + alpha[6, 1] + alpha[6, 5]) / 2))


def _records():
    """2 seeds, one layer, two heads: head 1 of seed 0 (head 0 of seed 1) ends destructive and
    gets there by step 20; the other head stays harmless. Entropy drops by step 10 in both."""
    rows = []
    for seed, top in ((0, 1), (1, 0)):
        for step in (0, 10, 20, 30, 40):
            rows.append(Measurement(seed, step, -1, -1, "entropy_mae", 0.5))
            for head in (0, 1):
                damage = (0.9 * min(step, 20) / 20 + 0.1 * max(0, step - 20) / 20) if head == top else 0.0
                rows.append(Measurement(seed, step, 0, head, "entropy_mae_head_zeroed", 0.5 + damage))
                ent = 2.0 - (0.9 * min(step, 10) / 10 + 0.1 * max(0, step - 10) / 30)
                rows.append(Measurement(seed, step, 0, head, "attn_entropy", ent))
    return rows


def test_head_timing_ranks_heads_by_final_damage():
    timing = head_timing(_records())
    assert timing[(0, 0, 1)]["damage"] == pytest.approx(1.0) and timing[(0, 0, 0)]["damage"] == 0.0
    assert timing[(0, 0, 1)]["t90_damage"] == pytest.approx(20.0)
    assert timing[(0, 0, 1)]["t90_entropy"] == pytest.approx(10.0)
    assert timing[(0, 0, 0)]["t90_damage"] is None  # no damage to make progress on
    got = head_summary(_records())
    top = got["by_rank"]["L0 rank 0"]
    assert top["heads"] == {0: 1, 1: 0} and top["damage"]["mean"] == pytest.approx(1.0)
    assert got["leads"]["L0: damage_after_entropy (rank 0)"]["mean"] == pytest.approx(10.0)
    assert head_summary([]) == {}


def test_relevance_summary_follows_the_retrieval_head_and_counts_censored_leads():
    rows = []
    for seed in range(6):
        for step in range(0, 200, 10):
            for head in (0, 1):
                adv = 0.9 if step >= 50 else 0.1  # the advantage points at the relevant key from step 50
                alpha = (0.9 if step >= 120 else 0.1) if head == seed % 2 else 0.05  # one head follows at 120
                if seed == 5:
                    alpha = 0.1 if head == 1 else 0.05  # this seed's attention never gets there
                vals = {"relevant_top1_adv": adv, "relevant_top1_alpha": alpha, "relevant_top1_chance": 0.14,
                        "relevant_alpha_mass": alpha, "relevant_adv_rank": 0.1, "relevant_alpha_rank": 0.5}
                rows += [Measurement(seed, step, 1, head, n, v) for n, v in vals.items()]
    got = relevance_summary(rows)[1]
    assert [got["per_seed"][s]["head"] for s in range(5)] == [0, 1, 0, 1, 0]
    assert got["per_seed"][0]["t_adv"] == 50.0 and got["per_seed"][0]["t_alpha"] == 120.0  # centred window of 5
    assert got["lead"]["mean"] == pytest.approx(70.0) and got["lead"]["n"] == 5
    assert (got["adv_first_seeds"], got["alpha_first_seeds"], got["alpha_never_seeds"]) == (6, 0, 1)
    assert got["sign_test_p"] == pytest.approx(2 / 64)
    assert sign_test(3, 3) == pytest.approx(1.0) and sign_test(0, 0) == 1.0
