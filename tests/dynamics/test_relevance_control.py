"""The label-route control of relevance.py on the same queries (issue 44, point 5): the permuted
label sits at an earlier, non-relevant value position of the very query it controls; the excess is
read before attention found the key, for a head chosen on the other half of the checks; and a
synthetic advantage with a Bayes-relevance part beyond the label route is detected, one without it
is not."""

from __future__ import annotations

import math

import pytest
import torch

from bayesbench.dynamics.profile.relevance import (
    CONTROL_NAMES,
    RELEVANCE_NAMES,
    label_keys,
    label_targets,
    paired_statistics,
    relevance_statistics,
    relevance_summary,
    relevant_keys,
    value_permutation,
)
from bayesbench.dynamics.profile.verdicts import profile_verdicts
from bayesbench.dynamics.store import Measurement
from bayesbench.tasks import get_task


def _batch(n: int = 48, seed: int = 0):
    task = get_task("bijection", V=8, variant="code", L=12)
    return task, task.sample(n, torch.Generator().manual_seed(seed)).tokens


def test_the_permuted_label_sits_earlier_at_a_non_relevant_position_of_the_same_query():
    task, tokens = _batch()
    sigma = value_permutation(task, tokens)
    assert torch.equal(sigma.sort(-1).values, torch.arange(task.V).expand_as(sigma))  # a permutation per sequence
    true, permuted = label_targets(task, tokens), label_targets(task, tokens, permute=True)
    relevant = relevant_keys(task, tokens)
    labels = label_keys(task, tokens, permuted)
    queries = relevant.any(-1)  # repeated-key queries
    assert not (labels & relevant).any()  # never at a relevant position
    paired = queries & labels.any(-1)
    # every repeated-key query but those whose value was its sequence's first has its permuted label in context
    first_value = tokens[:, 1:2].expand_as(tokens) - task.V
    assert not (queries & (true != first_value) & ~paired).any()  # c_k -> c_(k-1): seen before c_k
    assert paired.sum() > 0.6 * queries.sum()
    # consistent within a sequence: the same true class always goes to the same permuted class
    for b in range(tokens.shape[0]):
        m = true[b] >= 0
        for c in true[b][m].unique().tolist():
            assert set(permuted[b][m & (true[b] == c)].tolist()) == {int(sigma[b, c])}


def _advantages(task, tokens, relevance: float, gen: torch.Generator, heads: int = 2):
    """(advantage, control advantage) [B, H, T, T]: a label route of size 1 (the target's positions
    raised, as copying the label asks), `relevance` more at the relevant keys in the true
    advantage only (the Bayes-relevance part), and N(0, 1) noise in each."""
    B, T = tokens.shape
    true, permuted = label_targets(task, tokens), label_targets(task, tokens, permute=True)
    route = label_keys(task, tokens, true).double()  # = the relevant keys in a bijection
    route_c = label_keys(task, tokens, permuted).double()
    noise = torch.randn(2, B, heads, T, T, generator=gen, dtype=torch.float64)
    adv = (route + relevance * relevant_keys(task, tokens).double()).unsqueeze(1) + noise[0]
    return adv, route_c.unsqueeze(1) + noise[1]


def _alpha(task, tokens, found: bool, heads: int = 2) -> torch.Tensor:
    """[B, H, T, T] uniform causal attention; head 0 on the relevant keys once `found`."""
    B, T = tokens.shape
    keep = torch.ones(T, T, dtype=torch.float64).tril()
    a = keep.expand(B, heads, T, T).clone()
    if found:
        a[:, 0] = a[:, 0] + 50.0 * relevant_keys(task, tokens).double()
    return a / a.sum(-1, keepdim=True)


def test_paired_statistics_read_both_shares_on_the_same_queries():
    task, tokens = _batch()
    gen = torch.Generator().manual_seed(1)
    adv, ctrl = _advantages(task, tokens, 0.0, gen)
    alpha = _alpha(task, tokens, False)
    got = paired_statistics(adv, ctrl, alpha, task, tokens)  # [5, H]
    assert got.shape == (len(CONTROL_NAMES), 2)
    # the label route alone, no noise: both shares 1 on the same queries, the excess exactly 0
    route = label_keys(task, tokens, label_targets(task, tokens)).double().unsqueeze(1).expand_as(adv)
    route_c = label_keys(task, tokens, label_targets(task, tokens, permute=True)).double().unsqueeze(1).expand_as(adv)
    clean = paired_statistics(route, route_c, alpha, task, tokens)
    assert clean[0].tolist() == pytest.approx([1.0, 1.0]) and clean[3].tolist() == pytest.approx([1.0, 1.0])
    # the paired relevant share is the relevant share restricted to the paired queries
    relevant = relevant_keys(task, tokens)
    labels = label_keys(task, tokens, label_targets(task, tokens, permute=True))
    mask = relevant & (relevant.any(-1) & labels.any(-1)).unsqueeze(-1)
    assert torch.allclose(got[3], relevance_statistics(adv, alpha, mask)[0])


def _records(relevance: float, seeds: int = 8) -> list[Measurement]:
    """A profile's relevance records from synthetic advantages: attention (head 0) finds the key
    at step 100; the advantage's Bayes-relevance part is `relevance` throughout."""
    task, _ = _batch()
    rows = []
    for seed in range(seeds):
        gen = torch.Generator().manual_seed(100 + seed)
        for step in range(0, 200, 10):
            tokens = task.sample(24, gen).tokens
            adv, ctrl = _advantages(task, tokens, relevance, gen)
            alpha = _alpha(task, tokens, step >= 100)
            rel = relevance_statistics(adv, alpha, relevant_keys(task, tokens))
            pair = paired_statistics(adv, ctrl, alpha, task, tokens)
            for names, values in ((RELEVANCE_NAMES, rel), (CONTROL_NAMES, pair)):
                for k, name in enumerate(names):
                    rows += [Measurement(seed, step, 1, h, name, float(values[k, h])) for h in range(2)]
    return rows


@pytest.mark.parametrize("relevance", [0.0, 1.5])
def test_a_relevance_part_beyond_the_label_route_is_detected_and_none_is_not(relevance):
    got = relevance_summary(_records(relevance))[1]
    assert got["control"] and got["untestable_seeds"] == 0
    for s, v in got["per_seed"].items():
        assert v["head"] == 0  # the retrieval head, chosen on the selection half
        assert v["t_alpha_selection"] is not None and 80 <= v["t_alpha_selection"] <= 120
        assert v["window_checks"] >= 4 and v["window_checks"] <= 6  # evaluation checks before t_alpha only
    verdict = next(v for v in profile_verdicts({"relevance": {1: got}}) if "beyond the label route" in v["claim"]
                   and v["family"] == "primary")
    if relevance:
        assert got["excess_before_alpha"]["mean"] > 0.1 and verdict["verdict"] == "held"
    else:
        assert abs(got["excess_before_alpha"]["mean"]) < 0.05 and verdict["verdict"] == "cannot tell"


def test_without_the_same_query_control_the_verdict_is_untestable_and_still_counted():
    rows = [r for r in _records(1.5, seeds=3) if r.name in RELEVANCE_NAMES]
    got = relevance_summary(rows)[1]
    assert not got["control"] and got["untestable_seeds"] == 3 and math.isnan(got["excess_before_alpha"]["mean"])
    verdicts = profile_verdicts({"relevance": {1: got}})
    primary = [v for v in verdicts if v["family"] == "primary"]
    assert len(primary) == 1 and primary[0]["verdict"] == "cannot tell" and primary[0]["p_adj"] == 1.0
