"""Exact posterior of the bijection-elimination tunnel (docs/science.md#bijection-elimination; Paper I, Sec. 3.1).

pi is a uniformly random bijection of {0..V-1}. At position k, after the pairs
(keys[j], values[j]) for j < k, the posterior over pi(keys[k]) is a point mass on the known value
if keys[k] appeared before, and otherwise uniform over the values not yet observed (given the
revealed pairs, the rest of pi is a uniform bijection between unseen keys and unseen values).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .. import ops
from .backend import use_native
from .validate import check_bijection_inputs, require_float_dtype


def bijection_posterior(
    keys: Tensor, values: Tensor, V: int, *, backend: str = "auto", dtype: torch.dtype = torch.float32,
    check: bool = True,
) -> Tensor:
    """Posterior over pi(keys[b, k]) given the pairs before k, for every position.

    Args:
        keys: [B, L] integer keys in 0..V-1 (may repeat).
        values: [B, L] integer values pi(keys) in 0..V-1, consistent with one bijection per row.
            values[b, k] is never used for the posterior at k itself, only for later positions.
        V: size of the domain.
        backend: "auto", "reference" or "native".
        dtype: float32 or float64 result.
        check: validate the inputs (`validate.check_bijection_inputs`, which reads back to the
            host). False only where the inputs are correct by construction: the task's own sampler.

    Returns:
        [B, L, V] posteriors; each row sums to 1.
    """
    if check:
        check_bijection_inputs(keys, values, V)
    require_float_dtype("dtype", dtype)
    if use_native("bijection_posterior", backend, keys.device):
        return ops.bijection_posterior(keys, values, V, dtype)
    return bijection_posterior_reference(keys, values, V, dtype)


def bijection_posterior_reference(keys: Tensor, values: Tensor, V: int,
                                  dtype: torch.dtype = torch.float32) -> Tensor:
    """Vectorised PyTorch reference (no validation): O(B L) bookkeeping, one [B, L, V] pass."""
    B, L = keys.shape
    k, v = keys.long(), values.long()
    pos = torch.arange(L, device=keys.device)
    never = torch.full((B, V), L, dtype=torch.long, device=keys.device)
    # First position of each key (its pair fixes pi(key)) and of each value (then it is used).
    first_key = never.scatter_reduce(1, k, pos.expand(B, L), reduce="amin")
    first_val = never.scatter_reduce(1, v, pos.expand(B, L), reduce="amin")
    first_of_k = first_key.gather(1, k)
    is_known = first_of_k < pos
    known_value = v.gather(1, first_of_k.clamp(max=L - 1))
    new_value = first_val.gather(1, v) == pos  # value v[b, j] appears for the first time at j
    n_free = V - (new_value.cumsum(1) - new_value.long())  # values still unrevealed before k
    symbols = torch.arange(V, device=keys.device)
    free = first_val.unsqueeze(1) >= pos.view(1, L, 1)  # [B, L, V]
    uniform = free.to(dtype).div_(n_free.clamp(min=1).unsqueeze(-1).to(dtype))
    point = (symbols == known_value.unsqueeze(-1)).to(dtype)
    return torch.where(is_known.unsqueeze(-1), point, uniform)
