"""Bijection posterior: exact enumeration of all bijections, and contradictions rejected."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from bayesbench.oracle import bijection_posterior


def brute_force(keys, values, V):
    """Posterior over pi(keys[k]) given pairs before k, enumerating all V! bijections."""
    L = len(keys)
    out = np.zeros((L, V))
    perms = list(itertools.permutations(range(V)))
    for k in range(L):
        consistent = [p for p in perms if all(p[keys[j]] == values[j] for j in range(k))]
        for p in consistent:
            out[k, p[keys[k]]] += 1
        out[k] /= len(consistent)
    return out


@pytest.mark.parametrize("V,L,replacement", [(4, 4, False), (4, 9, True), (5, 5, False), (5, 11, True), (5, 1, True)])
def test_matches_enumeration_of_all_bijections(V, L, replacement):
    g = torch.Generator().manual_seed(V * 31 + L)
    B = 6
    perm = torch.rand(B, V, generator=g).argsort(-1)
    if replacement:
        keys = torch.randint(0, V, (B, L), generator=g)
    else:
        keys = torch.rand(B, V, generator=g).argsort(-1)[:, :L]
    values = perm.gather(1, keys)
    post = bijection_posterior(keys, values, V, dtype=torch.float64)
    assert post.shape == (B, L, V)
    for b in range(B):
        np.testing.assert_allclose(post[b].numpy(), brute_force(keys[b].tolist(), values[b].tolist(), V), atol=1e-12)


def test_entropy_of_the_paper_variant_is_log2_of_remaining():
    V = 20
    g = torch.Generator().manual_seed(0)
    keys = torch.rand(3, V, generator=g).argsort(-1)
    values = torch.rand(3, V, generator=g).argsort(-1).gather(1, keys)
    post = bijection_posterior(keys, values, V, dtype=torch.float64)
    from bayesbench.scoring.metrics import entropy_bits

    want = torch.log2(torch.arange(V, 0, -1, dtype=torch.float64))
    torch.testing.assert_close(entropy_bits(post), want.expand(3, V))


def test_int32_inputs_and_float32_output():
    keys = torch.tensor([[0, 1, 0]], dtype=torch.int32)
    values = torch.tensor([[2, 0, 2]], dtype=torch.int32)
    post = bijection_posterior(keys, values, 3)
    assert post.dtype == torch.float32
    torch.testing.assert_close(post[0, 2], torch.tensor([0.0, 0.0, 1.0]))
    torch.testing.assert_close(post[0, 1], torch.tensor([0.5, 0.5, 0.0]))


@pytest.mark.parametrize(
    "keys,values,V,message",
    [
        ([[0, 1, 0]], [[2, 0, 1]], 3, r"key 0 has value 2 at position 0 and value 1 at position 2"),
        ([[0, 1, 2]], [[2, 2, 1]], 3, r"keys 0 \(position 0\) and 1 \(position 1\) both have value 2"),
        ([[0, 3]], [[0, 1]], 3, r"keys must lie in \[0, 2\]; found 3"),
        ([[0, 1]], [[0, -1]], 3, r"values must lie in \[0, 2\]; found -1"),
        ([[0, 1]], [[0, 1, 2]], 3, r"values must have shape \[1, 2\]"),
        ([0, 1], [0, 1], 3, r"keys must have shape \[\*, \*\]"),
        ([[0, 1]], [[0, 1]], 0, r"V must be a positive integer"),
    ],
)
def test_bad_input_raises_a_clear_error(keys, values, V, message):
    with pytest.raises(ValueError, match=message):
        bijection_posterior(torch.tensor(keys), torch.tensor(values), V)


def test_float_keys_are_rejected():
    with pytest.raises(ValueError, match="keys must be an integer tensor"):
        bijection_posterior(torch.tensor([[0.0, 1.0]]), torch.tensor([[0, 1]]), 2)


def test_native_backend_error_is_clear_when_unavailable(monkeypatch):
    from bayesbench import ops
    from bayesbench.oracle import backend

    monkeypatch.setattr(ops, "load", lambda: None)  # as if the extension were not built
    with pytest.raises(RuntimeError, match="backend='native' for bijection_posterior is unavailable: "
                       "the compiled extension bayesbench._C is not built"):
        bijection_posterior(torch.tensor([[0]]), torch.tensor([[0]]), 2, backend="native")
    with pytest.warns(RuntimeWarning, match="bayesbench._C is not built"):
        monkeypatch.setattr(backend, "_warned", set())
        post = bijection_posterior(torch.tensor([[0, 1]]), torch.tensor([[1, 0]]), 2, backend="auto")
    torch.testing.assert_close(post, torch.tensor([[[0.5, 0.5], [1.0, 0.0]]]))
