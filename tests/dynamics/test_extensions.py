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


def _ramp(step: int, at: int) -> float:
    """0.9 of the way by `at`, the rest by step 100."""
    return 0.9 * min(step, at) / at + 0.1 * min(max(0, step - at), 100 - at) / (100 - at)


def _records():
    """2 seeds, one layer, two heads, checkpoints every 10 steps to 100: head 1 of seed 0 (head 0
    of seed 1) ends destructive and gets 90% there by step 20; the other head stays harmless. The
    probe batch's attention entropy drops 90% by step 10 in both."""
    rows = []
    for seed, top in ((0, 1), (1, 0)):
        for step in range(0, 101, 10):
            rows.append(Measurement(seed, step, -1, -1, "entropy_mae", 0.5))
            for head in (0, 1):
                damage = _ramp(step, 20) if head == top else 0.0
                rows.append(Measurement(seed, step, 0, head, "entropy_mae_head_zeroed", 0.5 + damage))
                rows.append(Measurement(seed, step, 0, head, "map_entropy", 2.0 - _ramp(step, 10)))
                rows.append(Measurement(seed, step, 0, head, "attn_entropy", 3.0))  # training-batch probes: not used
    return rows


def test_head_timing_ranks_heads_by_final_damage():
    timing = head_timing(_records())
    assert timing[(0, 0, 1)]["damage"] == pytest.approx(1.0) and timing[(0, 0, 0)]["damage"] == 0.0
    # t90 against the mean of the last 3 checkpoints, read on a running mean of 3: within an interval
    assert 20.0 <= timing[(0, 0, 1)]["t90_damage"] <= 30.0
    assert 10.0 <= timing[(0, 0, 1)]["t90_entropy"] <= 20.0  # the probe batch's maps, on the same checkpoints
    assert timing[(0, 0, 0)]["t90_damage"] is None  # no damage to make progress on
    got = head_summary(_records())
    top = got["by_rank"]["L0 rank 0"]
    assert top["heads"] == {0: 1, 1: 0} and top["damage"]["mean"] == pytest.approx(1.0)
    assert 5.0 <= got["leads"]["L0: damage_after_entropy (rank 0)"]["mean"] <= 15.0
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
    assert not got["control"]  # no label-route control recorded


def _label_route(tokens: torch.Tensor, targets: torch.Tensor, V: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantage, alpha) [1, 1, T, T] of one head whose values carry their token (v_j = e_(token_j))
    and whose loss gradient only asks to raise the target's token (u_i = -e_(V + target_i)): the
    label route and nothing else. b_ij = u_i . v_j, A_ij = E_alpha[b] - b_ij, alpha uniform."""
    T = tokens.shape[-1]
    keep = torch.ones(T, T).tril().bool()
    vocab = 2 * V
    v = torch.nn.functional.one_hot(tokens, vocab).double()  # [T, vocab]
    u = -torch.nn.functional.one_hot((targets + V).clamp(min=0), vocab).double() * (targets >= 0).unsqueeze(-1)
    b = torch.where(keep, u @ v.T, 0.0)
    alpha = torch.where(keep, 1.0, 0.0)
    alpha = alpha / alpha.sum(-1, keepdim=True)
    adv = torch.where(keep, (alpha * b).sum(-1, keepdim=True) - b, 0.0)
    return adv.view(1, 1, T, T), alpha.view(1, 1, T, T)


def test_the_label_route_alone_makes_the_relevant_share_and_the_control_removes_it():
    """Issue 32: in a bijection the relevant keys hold the target token, so an advantage built from
    copying the label alone ranks them first; against permuted targets the same route ranks the
    permuted label's positions first just as often, so the excess over the control is 0."""
    from bayesbench.dynamics.profile.relevance import control_statistics, label_keys, label_targets

    task = get_task("bijection", V=8, variant="code", L=12)
    batch = task.sample(64, torch.Generator().manual_seed(0))
    tokens = batch.tokens
    true, permuted = label_targets(task, tokens), label_targets(task, tokens, permute=True)
    assert torch.equal(label_keys(task, tokens, true), relevant_keys(task, tokens))  # relevant = holds the label
    scored = batch.targets >= 0
    assert torch.equal(true[scored & (true >= 0)], batch.targets[scored & (true >= 0)])  # the true targets
    shares, controls, chance = [], [], []
    for b in range(tokens.shape[0]):
        adv, alpha = _label_route(tokens[b], true[b], task.V)
        got = relevance_statistics(adv, alpha, relevant_keys(task, tokens[b]).unsqueeze(0))
        adv_c, _ = _label_route(tokens[b], permuted[b], task.V)
        ctrl = control_statistics(adv_c, alpha, label_keys(task, tokens[b], permuted[b]).unsqueeze(0))
        if torch.isfinite(got[0, 0]) and torch.isfinite(ctrl[0, 0]):
            shares.append(float(got[0, 0]))
            controls.append(float(ctrl[0, 0]))
            chance.append(float(got[2, 0]))
    assert sum(shares) / len(shares) == pytest.approx(1.0)  # the label route puts every top-1 at a relevant key
    assert sum(chance) / len(chance) < 0.3  # far above |R| / n: the old chance level
    assert sum(controls) / len(controls) == pytest.approx(1.0)  # the same route finds the permuted label
    excess = [a - c for a, c in zip(shares, controls)]
    assert abs(sum(excess) / len(excess)) < 1e-12
