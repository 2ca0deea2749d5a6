"""The order-k chain's predictive (oracle/markov_k.py): the batched path against the loop over
time, order 1 against the `markov` oracle, and a posterior mean by Monte Carlo over the rows."""

from __future__ import annotations

import pytest
import torch

from bayesbench.oracle import markov_predictive
from bayesbench.oracle.markov_k import markov_k_predictive, markov_k_predictive_reference
from bayesbench.tasks._random import dirichlet


@pytest.mark.parametrize("V,k,L", [(2, 1, 1), (2, 1, 2), (2, 2, 1), (2, 2, 2), (3, 2, 25), (2, 3, 30), (4, 2, 3)])
def test_batched_path_equals_the_loop(V, k, L, device):
    seqs = torch.randint(0, V, (6, L), generator=torch.Generator().manual_seed(V + 10 * k + 100 * L))
    want = markov_k_predictive_reference(seqs, V, k, 0.7)
    got = markov_k_predictive(seqs.to(device), V, k, 0.7, dtype=torch.float64).cpu()
    torch.testing.assert_close(got, want, atol=1e-14, rtol=0)


def test_order_one_is_the_markov_oracle():
    seqs = torch.randint(0, 4, (8, 40), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(markov_k_predictive(seqs, 4, 1, 0.5, dtype=torch.float64),
                               markov_predictive(seqs, 4, 0.5, dtype=torch.float64), atol=0, rtol=0)


def test_predictive_is_the_posterior_mean_of_the_row_by_monte_carlo():
    """Draw order-2 binary chains' rows from the prior, weight by the likelihood of a fixed
    sequence, and compare the weighted mean row of the last context with the closed form."""
    x = [0, 1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 0]
    V, k, alpha, n = 2, 2, 0.8, 100_000
    g = torch.Generator().manual_seed(1)
    rows = dirichlet(alpha, (n, V**k, V), g, dtype=torch.float64)
    logw = torch.zeros(n, dtype=torch.float64)
    for s in range(k, len(x)):
        c = x[s - 1] + V * x[s - 2]
        logw += torch.log(rows[:, c, x[s]])
    w = torch.softmax(logw, 0)
    last = x[-1] + V * x[-2]
    mc = (w.unsqueeze(1) * rows[:, last]).sum(0)
    got = markov_k_predictive(torch.tensor([x]), V, k, alpha, dtype=torch.float64)[0, -1]
    ess = 1 / float((w**2).sum())
    assert (mc - got).abs().max() < 5 * 0.5 / ess**0.5


def test_bad_order_is_refused():
    with pytest.raises(ValueError, match="order must be a positive integer"):
        markov_k_predictive(torch.zeros((1, 3), dtype=torch.long), 2, 0)
