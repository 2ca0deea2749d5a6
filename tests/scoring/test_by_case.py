"""The error split by case (scoring/by_case.py) on inputs whose answers are known."""

from __future__ import annotations

import math

import pytest
import torch

from bayesbench.oracle import bijection_posterior
from bayesbench.scoring.by_case import (
    case_masks,
    case_means,
    case_metrics,
    case_scores,
    pairs_used,
    prefix_posterior,
)
from bayesbench.scoring.evaluate import eval_set
from bayesbench.scoring.metrics import entropy_bits
from bayesbench.tasks import get_task
from bayesbench.tasks.case_masks import bijection_key_structure

CODE = dict(V=8, variant="code", L=7)


def value_log_q(batch, per_pair: torch.Tensor) -> torch.Tensor:
    """Log-probabilities [N, T, V]: `per_pair` [N, L(+1), V] at the prediction positions (keys
    and query), uniform elsewhere."""
    N, T, V = batch.posterior.shape
    q = torch.full((N, T, V), 1.0 / V, dtype=torch.float64)
    K = per_pair.shape[1]
    pos = [2 * k for k in range(K)]
    q[:, pos] = per_pair.double()
    return torch.log(q.clamp(min=1e-300))


def test_key_structure_of_a_written_out_sequence():
    keys = torch.tensor([[3, 1, 3, 3, 2, 1]])
    repeated, free, lag = bijection_key_structure(keys, V=5)
    assert repeated.tolist() == [[False, False, True, True, False, True]]
    assert free.tolist() == [[5, 4, 3, 3, 3, 2]]  # V minus the distinct keys before each pair
    assert lag.tolist() == [[0, 0, 2, 1, 0, 4]]  # pairs back to the last earlier occurrence


def test_cases_match_the_posterior_they_name():
    task = get_task("bijection", **CODE)
    batch = eval_set(task, 512)
    masks = case_masks(task, batch, detail=("free", "lag"))
    h = entropy_bits(batch.posterior)
    assert set(masks) >= {"repeated", "new", "query"}
    assert torch.equal(masks["repeated"] | masks["new"] | masks["query"], batch.mask)  # a partition
    assert not (masks["repeated"] & masks["new"]).any()
    assert (h[masks["repeated"]] == 0).all() and (h[masks["query"]] == 0).all()  # point masses
    for k in range(2, 9):
        m = masks.get(f"new:free={k}")
        if m is not None:  # uniform over the k values not yet seen
            torch.testing.assert_close(h[m], torch.full_like(h[m], math.log2(k)))
    lags = sum(masks[f"repeated:lag={d}"].long() for d in range(1, 7) if f"repeated:lag={d}" in masks)
    assert torch.equal(lags.bool(), masks["repeated"])
    # keys never repeat in the paper variant: no repeated case, and the last pair is forced (one value left)
    paper = get_task("bijection", V=6, variant="paper")
    pb = paper.sample(64, torch.Generator().manual_seed(0))
    pm = case_masks(paper, pb, detail=("free",))
    assert "repeated" not in pm and "query" not in pm and int(pm["new:free=1"].sum()) == 64


def test_case_scores_of_a_retrieval_only_model_are_known_in_closed_form():
    task = get_task("bijection", **CODE)
    batch = eval_set(task, 1024)
    keys, values = batch.latents["keys"], batch.latents["values"]
    post = bijection_posterior(keys, values, 8, dtype=torch.float64)
    repeated = bijection_key_structure(keys, 8)[0]
    # exact on repeated keys (and the query), uniform over all 8 values on new keys
    per_pair = torch.where(repeated.unsqueeze(-1), post, torch.full_like(post, 1 / 8))
    log_q = value_log_q(batch, per_pair)
    scores = case_scores(task, batch, log_q)
    new = case_masks(task, batch)["new"]
    want_new = float((3.0 - entropy_bits(batch.posterior)[new]).mean())  # KL(uniform-over-free || uniform-8)
    assert scores["repeated"].kl.mean == pytest.approx(0.0, abs=1e-9)
    assert scores["query"].kl.mean == pytest.approx(0.0, abs=1e-9)
    assert scores["new"].kl.mean == pytest.approx(want_new, rel=1e-6)  # the eval set holds float32 posteriors
    assert scores["new"].entropy_mae.mean == pytest.approx(want_new, rel=1e-6)
    assert scores["new"].model_entropy == pytest.approx(3.0)
    assert scores["new"].n_positions == int(new.sum()) and scores["new"].n_sequences == 1024
    flat = case_metrics(task, batch, log_q)
    assert flat["kl:new"] == scores["new"].kl.mean and flat["positions:new"] == int(new.sum())
    assert set(flat) >= {"kl:repeated", "entropy_mae:repeated", "entropy_mae_positional:new"}


def test_case_means_on_the_device_equal_the_summaries():
    task = get_task("bijection", **CODE)
    batch = eval_set(task, 256)
    gen = torch.Generator().manual_seed(1)
    log_q = torch.log_softmax(torch.randn((2, *batch.posterior.shape), generator=gen, dtype=torch.float64), -1)
    masks = case_masks(task, batch)
    means = case_means(masks, batch.posterior, log_q)
    for e in range(2):
        scores = case_scores(task, batch, log_q[e])
        for name in masks:
            assert float(means[f"kl:{name}"][e]) == pytest.approx(scores[name].kl.mean, rel=1e-9)
            assert float(means[f"entropy_mae:{name}"][e]) == pytest.approx(scores[name].entropy_mae.mean, rel=1e-9)


def test_prefix_posterior_sees_only_the_first_pairs():
    keys = torch.tensor([[0, 1, 0, 2]])
    values = torch.tensor([[2, 0, 2, 1]])
    V = 3
    torch.testing.assert_close(prefix_posterior(keys, values, V, 0), torch.full((1, 4, V), 1 / 3, dtype=torch.float64))
    p1 = prefix_posterior(keys, values, V, 1)[0]
    torch.testing.assert_close(p1[2], torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64))  # key 0 seen at pair 0
    torch.testing.assert_close(p1[1], torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64))  # value 2 used
    torch.testing.assert_close(p1[3], torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64))  # pair 1 not seen
    full = bijection_posterior(keys, values, V, dtype=torch.float64)
    torch.testing.assert_close(prefix_posterior(keys, values, V, 3), full)
    with pytest.raises(ValueError, match="m must be an integer >= 0"):
        prefix_posterior(keys, values, V, -1)


def test_pairs_used_recovers_a_truncated_context_model():
    task = get_task("bijection", **CODE)
    batch = eval_set(task, 512)
    keys, values = batch.latents["keys"], batch.latents["values"]
    for m in (0, 2, 7):
        log_q = value_log_q(batch, prefix_posterior(keys, values, 8, m).clamp(min=1e-6))
        used = pairs_used(task, batch, log_q)
        assert used.best == m
        assert used.kl[m].mean < 1e-4 < min(s.mean for k, s in used.kl.items() if k != m)


def test_bad_inputs_are_refused():
    task = get_task("bijection", **CODE)
    batch = eval_set(task, 16)
    with pytest.raises(ValueError, match="bijection task only"):
        case_masks(get_task("sticky", V=4, L=8), batch)
    with pytest.raises(ValueError, match="detail must be among"):
        case_masks(task, batch, detail=("pair",))
    with pytest.raises(ValueError, match="log_q must have the posterior's shape"):
        case_scores(task, batch, torch.zeros(16, 3, 8))
    with pytest.raises(ValueError, match=r"log_q must have shape \[E"):
        case_means(case_masks(task, batch), batch.posterior, torch.zeros(16, 15, 8))
