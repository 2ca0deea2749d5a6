"""The Chinese restaurant process's predictive over a capped vocabulary (oracle/crp.py) against
an enumeration of every seating the labels allow, each weighted by the CRP's exchangeable
partition probability: the overflow label's mass is checked, not assumed."""

from __future__ import annotations

import math

import pytest
import torch

from bayesbench.oracle.crp import crp_predictive, crp_predictive_reference
from bayesbench.tasks import get_task


def set_partitions(items: list[int]):
    """Every partition of `items` into non-empty blocks."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in set_partitions(rest):
        yield [[first], *part]
        for i in range(len(part)):
            yield [*part[:i], [first, *part[i]], *part[i + 1:]]


def labels_probability(x: list[int], V: int, theta: float) -> float:
    """P(x_0..x_{n-1} as labels): 0 unless the labels below V - 1 open in order 0, 1, ...; else a
    sum over the partitions of the overflow positions into tables of theta^K Gamma(theta) /
    Gamma(theta + n) prod over tables (size - 1)! (the probability of one seating; Pitman 2006, Ch. 3)."""
    seen = 0
    for v in x:
        if v > seen or (v == V - 1 and seen < V - 1):
            return 0.0
        if v == seen and v < V - 1:
            seen += 1
    n = len(x)
    fixed = [x.count(k) for k in range(V - 1) if x.count(k) > 0]
    overflow = [t for t, v in enumerate(x) if v == V - 1]
    total = 0.0
    for part in set_partitions(overflow):
        sizes = fixed + [len(b) for b in part]
        log = len(sizes) * math.log(theta) + math.lgamma(theta) - math.lgamma(theta + n)
        log += sum(math.lgamma(s) for s in sizes)
        total += math.exp(log)
    return total


@pytest.mark.parametrize("V,theta,L", [(2, 1.0, 1), (2, 0.5, 6), (3, 2.0, 7), (4, 1.0, 7), (8, 0.7, 5)])
def test_predictive_is_the_ratio_of_label_probabilities(V, theta, L):
    batch = get_task("crp", V=V, L=max(L, 2), theta=theta).sample(6, torch.Generator().manual_seed(V + L))
    seqs = batch.tokens[:, :L]
    got = crp_predictive(seqs, V, theta, dtype=torch.float64)
    torch.testing.assert_close(crp_predictive_reference(seqs, V, theta), got, atol=1e-14, rtol=0)
    for b in range(6):
        x = seqs[b].tolist()
        for t in range(L):
            joint = torch.tensor([labels_probability(x[: t + 1] + [j], V, theta) for j in range(V)],
                                 dtype=torch.float64)
            torch.testing.assert_close(got[b, t], joint / labels_probability(x[: t + 1], V, theta), atol=1e-12,
                                       rtol=1e-10)


def test_a_sequence_that_fills_the_cap_gives_the_overflow_the_new_tables_mass():
    x = torch.tensor([[0, 1, 1, 1, 0]])  # V = 2: every table after the first is labelled 1
    p = crp_predictive(x, 2, 1.5, dtype=torch.float64)[0, -1]
    torch.testing.assert_close(p, torch.tensor([2 / 6.5, (3 + 1.5) / 6.5], dtype=torch.float64))


@pytest.mark.parametrize("kwargs,match", [({"V": 1}, "V must be an integer >= 2"),
                                          ({"theta": 0.0}, "theta must be a positive finite number")])
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        get_task("crp", **kwargs)


def test_labels_out_of_opening_order_are_refused():
    with pytest.raises(ValueError, match="sequence 1 has label 2 at position 1 after labels up to 0"):
        crp_predictive(torch.tensor([[0, 1, 0], [0, 2, 1]]), 4)
    with pytest.raises(ValueError, match="sequence 0 has label 1 at position 0"):
        crp_predictive(torch.tensor([[1, 0]]), 4)
