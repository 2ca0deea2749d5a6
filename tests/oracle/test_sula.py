"""oracle/sula.py: the two-way Bayes posterior of the SULA prompts (arXiv 2512.23752, Sec. 3)
against enumeration and against Monte Carlo draws of its generative model."""

from __future__ import annotations

import pytest
import torch

from bayesbench.oracle.sula import sula_posterior, sula_posterior_reference
from bayesbench.tasks import get_task


@pytest.mark.parametrize("alpha", [0.9, 0.6, 0.2])
def test_closed_form_equals_enumeration(alpha):
    labels = torch.randint(0, 2, (9, 7), generator=torch.Generator().manual_seed(0))
    post, pred = sula_posterior(labels, alpha)
    ref_post, ref_pred = sula_posterior_reference(labels, alpha)
    torch.testing.assert_close(post, ref_post, atol=1e-12, rtol=0)
    torch.testing.assert_close(pred, ref_pred, atol=1e-12, rtol=0)


def test_a_hand_value():
    """Two labels 1 and one 0 at alpha = 0.9: odds 9:1 for y = 1."""
    post, pred = sula_posterior(torch.tensor([[1, 0, 1]]), 0.9)
    assert post[0, 3, 1].item() == pytest.approx(0.9, abs=1e-12)
    assert pred[0, 3, 1].item() == pytest.approx(0.9 * 0.9 + 0.1 * 0.1, abs=1e-12)


def test_query_posterior_is_the_frequency_of_the_latent():
    """Monte Carlo: among sampled prompts with the same count difference, y = 1 as often as the
    query's posterior says (within 5 binomial standard errors)."""
    task = get_task("sula", K=4, alpha=0.8)
    batch = task.sample(20000, torch.Generator().manual_seed(1), dtype=torch.float64)
    y = batch.latents["y"]
    diff = (2 * batch.latents["shown"] - 1).sum(1)
    p = batch.posterior[:, 2 * task.K, 1]
    for d in diff.unique().tolist():
        sel = diff == d
        n = int(sel.sum())
        if n < 200:
            continue
        freq, want = y[sel].double().mean().item(), p[sel][0].item()
        assert abs(freq - want) < 5 * (want * (1 - want) / n) ** 0.5 + 1e-9, (d, freq, want)


def test_bad_labels_are_refused():
    with pytest.raises(ValueError, match="labels must be 0 or 1"):
        sula_posterior(torch.tensor([[0, 2]]), 0.9)
