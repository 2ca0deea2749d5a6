"""The exact predictive of an in-context order-k Markov chain
(docs/science.md#order-k-and-variable-order-markov-chains; Edelman, Edelman, Goel, Malach and Tsilivis
2024, "The Evolution of Statistical Induction Heads: In-Context Learning Markov Chains",
arXiv 2402.11004).

Each sequence draws, for every context c of k symbols over V, a next-symbol distribution
T_c ~ Dirichlet(alpha); the first k symbols are uniform. Position t (t >= k - 1) predicts x_{t+1}
from its context c_t = (x_{t-k+1}, ..., x_t):

    p(j | x_{..t}) = (alpha + N_{c_t, j}) / (V alpha + N_{c_t}),

N_{c, j} counting the transitions c -> j among x_0..x_t. Positions t < k - 1 predict a symbol of
the uniform initial context: 1/V. Order 1 is the `markov` tunnel's predictive
(`oracle.markov_predictive`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..checks import int_at_least
from .backend import use_native
from .validate import check_sequence_inputs, require_float_dtype, require_positive


def context_ids(seq: Tensor, V: int, order: int) -> Tensor:
    """[B, L] long: sum_{i<k} x_{t-i} V^i, the id of the k symbols ending at t (meaningless for t < k - 1)."""
    B, L = seq.shape
    x = seq.long()
    ids = torch.zeros_like(x)
    for i in range(order):
        shifted = torch.zeros_like(x)
        shifted[:, i:] = x[:, : L - i]
        ids = ids + shifted * V**i
    return ids


def markov_k_predictive(seq: Tensor, V: int, order: int, alpha: float = 1.0, *, backend: str = "auto",
                        dtype: torch.dtype = torch.float32, check: bool = True) -> Tensor:
    """Predictive [B, L, V] of an order-`order` chain with Dirichlet(alpha) rows (module docstring),
    batched: a loop over time keeps every sequence's count table [V^k, V] (flat, read and written
    with index_select / index_add_), O(L V) per sequence. check=False skips the symbol-range check
    of `seq` (the task's sampler)."""
    if check:
        check_sequence_inputs("seq", seq, V)
    int_at_least("order", order, 1, "the chain's order k")
    alpha = require_positive("alpha", alpha)
    require_float_dtype("dtype", dtype)
    use_native("markov_k_predictive", backend, seq.device)  # checks backend; 'native' raises: no compiled op
    B, L = seq.shape
    k, dev = order, seq.device
    pred = torch.full((B, L, V), 1.0 / V, dtype=torch.float64, device=dev)
    if L <= k - 1 or B == 0:
        return pred.to(dtype)
    x = seq.long()
    rows = torch.arange(B, device=dev) * V**k  # each sequence's first row in the flat table
    ids = context_ids(seq, V, k) + rows.unsqueeze(1)  # [B, L]
    table = torch.zeros(B * V**k * V, dtype=torch.float64, device=dev)
    ones = torch.ones(B, dtype=torch.float64, device=dev)
    for t in range(k - 1, L):
        n = table.view(-1, V).index_select(0, ids[:, t])
        pred[:, t] = (alpha + n) / (V * alpha + n.sum(-1, keepdim=True))
        if t + 1 < L:
            table.index_add_(0, ids[:, t] * V + x[:, t + 1], ones)
    return pred.to(dtype)


def markov_k_predictive_reference(seq: Tensor, V: int, order: int, alpha: float = 1.0,
                                  dtype: torch.dtype = torch.float64) -> Tensor:
    """The same predictive by plain Python counting per sequence (a dictionary of transitions
    keyed by the k preceding symbols), in float64: the independent reference."""
    check_sequence_inputs("seq", seq, V)
    int_at_least("order", order, 1, "the chain's order k")
    alpha = require_positive("alpha", alpha)
    B, L = seq.shape
    out = torch.full((B, L, V), 1.0 / V, dtype=torch.float64)
    for b in range(B):
        x = [int(v) for v in seq[b].tolist()]
        seen: dict[tuple[int, ...], list[int]] = {}
        for t in range(order - 1, L):
            context = tuple(x[t - order + 1 : t + 1])
            n = seen.setdefault(context, [0] * V)
            out[b, t] = torch.tensor([(alpha + n[j]) / (V * alpha + sum(n)) for j in range(V)], dtype=torch.float64)
            if t + 1 < L:
                n[x[t + 1]] += 1
    return out.to(dtype)
