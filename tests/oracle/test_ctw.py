"""Context-tree weighting (oracle/ctw.py) against the exact mixture written as an explicit sum
over every context tree of depth <= 2 on a binary alphabet, and its batched path against the
plain float64 reference on awkward shapes."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from bayesbench import ops
from bayesbench.checks import SettingError
from bayesbench.oracle.ctw import ctw_predictive, ctw_predictive_reference
from bayesbench.oracle.markov_k import markov_k_predictive


def trees(depth: int, q: float) -> list[tuple[float, list[tuple[int, ...]]]]:
    """Every binary context tree of depth <= 2 as (prior probability, its leaves), written out.
    A leaf is its context, most recent symbol first: (0, 1) is "x_t = 0, x_{t-1} = 1"."""
    p = 1 - q
    if depth == 0:
        return [(1.0, [()])]
    if depth == 1:
        return [(q, [()]), (p, [(0,), (1,)])]
    assert depth == 2
    return [
        (q, [()]),
        (p * q * q, [(0,), (1,)]),
        (p * p * q, [(0, 0), (0, 1), (1,)]),
        (p * q * p, [(0,), (1, 0), (1, 1)]),
        (p * p * p, [(0, 0), (0, 1), (1, 0), (1, 1)]),
    ]


def dirichlet_marginal(counts: list[int], alpha: float) -> float:
    """P(a sequence with these symbol counts) under theta ~ Dirichlet(alpha), theta integrated out."""
    V, n = len(counts), sum(counts)
    log = math.lgamma(V * alpha) - math.lgamma(V * alpha + n)
    log += sum(math.lgamma(alpha + c) - math.lgamma(alpha) for c in counts)
    return math.exp(log)


def mixture(x: list[int], depth: int, alpha: float, q: float) -> float:
    """sum over trees of prior(tree) * prod over its leaves of the Dirichlet marginal of the
    symbols x_s (s >= depth) whose preceding symbols reach that leaf."""
    total = 0.0
    for prior, leaves in trees(depth, q):
        counts = {leaf: [0, 0] for leaf in leaves}
        for s in range(depth, len(x)):
            context = tuple(x[s - 1 - i] for i in range(depth))
            leaf = next(lf for lf in leaves if context[: len(lf)] == lf)
            counts[leaf][x[s]] += 1
        like = 1.0
        for c in counts.values():
            like *= dirichlet_marginal(c, alpha)
        total += prior * like
    return total


def brute_force_predictive(x: list[int], depth: int, alpha: float, q: float) -> torch.Tensor:
    L = len(x)
    out = torch.full((L, 2), 0.5, dtype=torch.float64)
    for t in range(max(depth, 1) - 1, L):
        joint = torch.tensor([mixture(x[: t + 1] + [j], depth, alpha, q) for j in (0, 1)], dtype=torch.float64)
        out[t] = joint / joint.sum()
    return out


@pytest.mark.parametrize("depth", [0, 1, 2])
@pytest.mark.parametrize("alpha,q", [(0.5, 0.5), (1.0, 0.2), (0.3, 0.9)])
@pytest.mark.parametrize("L", [1, 2, 9])
def test_ctw_is_the_mixture_over_every_tree(depth, alpha, q, L):
    g = torch.Generator().manual_seed(7 * L + depth)
    seqs = torch.randint(0, 2, (3, L), generator=g)
    seqs[0] = 0  # a run of one symbol
    fast = ctw_predictive(seqs, 2, depth, alpha, q, dtype=torch.float64)
    plain = ctw_predictive_reference(seqs, 2, depth, alpha, q)
    for b in range(3):
        want = brute_force_predictive(seqs[b].tolist(), depth, alpha, q)
        torch.testing.assert_close(fast[b], want, atol=1e-12, rtol=1e-10)
        torch.testing.assert_close(plain[b], want, atol=1e-12, rtol=1e-10)


# 'reference': the batched PyTorch path; 'native': the compiled op (csrc/ctw.h), where built
BACKENDS = ["reference"] + (["native"] if ops.available("ctw_predictive") else [])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("V,depth,L,q", [(2, 0, 1, 0.5), (3, 0, 6, 0.5), (2, 3, 12, 0.5), (3, 2, 10, 0.3),
                                         (4, 1, 5, 0.7), (2, 2, 2, 0.5), (2, 1, 1, 0.5), (3, 2, 8, 1.0),
                                         (2, 4, 2, 0.5)])
def test_batched_path_equals_the_plain_reference(V, depth, L, q, backend, device):
    seqs = torch.randint(0, V, (5, L), generator=torch.Generator().manual_seed(V * 100 + depth * 10 + L))
    want = ctw_predictive_reference(seqs, V, depth, 0.5, q)
    if backend == "native" and device.type == "cuda" and not ops.has_cuda():
        backend = "auto"  # no CUDA kernel in this build: the PyTorch path (tested as 'reference')
    got = ctw_predictive(seqs.to(device), V, depth, 0.5, q, dtype=torch.float64, backend=backend).cpu()
    torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-10)
    assert ctw_predictive(seqs, V, depth, 0.5, q, backend=backend).dtype == torch.float32


def test_a_tree_that_always_splits_is_the_order_k_chain():
    """leaf_prob = 0: the only tree is the full one, whose mixture is the order-D chain's predictive."""
    seqs = torch.randint(0, 3, (4, 30), generator=torch.Generator().manual_seed(3))
    for depth in (1, 2):
        torch.testing.assert_close(ctw_predictive(seqs, 3, depth, 0.7, 0.0, dtype=torch.float64),
                                   markov_k_predictive(seqs, 3, depth, 0.7, dtype=torch.float64), atol=1e-12, rtol=0)


def test_every_binary_sequence_gets_a_distribution_over_its_continuations():
    """Summed over all 2^L sequences, the mixture's probabilities of x_D..x_{L-1} sum to 1 for each
    initial context (the explicit sum is itself a distribution)."""
    for depth in (0, 1, 2):
        L = depth + 4
        for head in itertools.product((0, 1), repeat=depth):
            total = sum(mixture(list(head) + list(tail), depth, 0.5, 0.5)
                        for tail in itertools.product((0, 1), repeat=L - depth))
            assert total == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("kwargs,match", [
    ({"depth": -1}, "depth must be an integer >= 0"),
    ({"V": 1}, "V must be an integer >= 2"),
    ({"alpha": 0.0}, "alpha must be"),
    ({"leaf_prob": 1.5}, r"leaf_prob must be a number in \[0, 1\]"),
])
def test_bad_settings_are_refused_in_one_line(kwargs, match):
    args = {"V": 2, "depth": 1, "alpha": 0.5, "leaf_prob": 0.5, **kwargs}
    seqs = torch.zeros((1, 4), dtype=torch.long)
    with pytest.raises(ValueError, match=match):
        ctw_predictive(seqs, args["V"], args["depth"], args["alpha"], args["leaf_prob"])
    if "V" not in kwargs:
        with pytest.raises(SettingError, match=match):
            ctw_predictive_reference(seqs, args["V"], args["depth"], args["alpha"], args["leaf_prob"])
