"""Exact posterior of the bijection-elimination tunnel (SPEC.md 3.1).

pi is a uniformly random bijection of {0..V-1}. At position k, after the pairs
(keys[j], values[j]) for j < k, the posterior over pi(keys[k]) is a point mass on the known value
if keys[k] appeared before, and otherwise uniform over the values not yet observed (given the
revealed pairs, the rest of pi is a uniform bijection between unseen keys and unseen values).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .backend import use_native
from .validate import check_bijection_inputs


def bijection_posterior(
    keys: Tensor, values: Tensor, V: int, *, backend: str = "auto", dtype: torch.dtype = torch.float32
) -> Tensor:
    """Posterior over pi(keys[b, k]) given the pairs before k, for every position.

    Args:
        keys: [B, L] integer keys in 0..V-1 (may repeat).
        values: [B, L] integer values pi(keys) in 0..V-1, consistent with one bijection per row.
            values[b, k] is never used for the posterior at k itself, only for later positions.
        V: size of the domain.
        backend: "auto", "reference" or "native".
        dtype: float32 or float64 result.

    Returns:
        [B, L, V] posteriors; each row sums to 1.
    """
    check_bijection_inputs(keys, values, V)
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
    if use_native("bijection_posterior", backend, keys.device):
        from . import native

        return native.bijection_posterior(keys, values, V, dtype)
    return bijection_posterior_reference(keys, values, V, dtype)


def bijection_posterior_reference(keys: Tensor, values: Tensor, V: int,
                                  dtype: torch.dtype = torch.float32) -> Tensor:
    """Vectorised PyTorch reference (no validation): O(B L^2 + B L V) memory."""
    B, L = keys.shape
    k, v = keys.long(), values.long()
    before = torch.ones(L, L, dtype=torch.bool, device=keys.device).tril(-1)  # j < k
    # seen_pair[b, k, j]: an earlier position j holds the same key as position k.
    seen_pair = (k.unsqueeze(2) == k.unsqueeze(1)) & before
    value_onehot = torch.nn.functional.one_hot(v, V).to(dtype)  # [B, L, V]
    known = torch.bmm(seen_pair.to(dtype), value_onehot).clamp_(max=1.0)  # point mass if seen
    used = (value_onehot.cumsum(1) - value_onehot) > 0  # values revealed before k
    free = (~used).to(dtype)
    uniform = free / free.sum(-1, keepdim=True).clamp(min=1.0)
    is_known = seen_pair.any(-1, keepdim=True)
    return torch.where(is_known, known, uniform)
