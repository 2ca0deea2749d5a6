"""The exact predictive of an in-context order-k Markov chain
(docs/science.md#order-k-in-context-markov-chain; Edelman, Edelman, Goel, Malach and Tsilivis
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
    batched: the counts come from one [L, L] comparison of context ids per sequence and a matrix
    product, O(L^2 V). check=False skips the symbol-range check of `seq` (the task's sampler)."""
    if check:
        check_sequence_inputs("seq", seq, V)
    int_at_least("order", order, 1, "the chain's order k")
    alpha = require_positive("alpha", alpha)
    require_float_dtype("dtype", dtype)
    use_native("markov_k_predictive", backend, seq.device)  # checks backend; 'native' raises: no compiled op
    B, L = seq.shape
    pred = torch.full((B, L, V), 1.0 / V, dtype=torch.float64, device=seq.device)
    k = order
    if L <= k - 1 or B == 0:
        return pred.to(dtype)
    ids = context_ids(seq, V, k)
    # counted transitions: context ending at s (k-1 <= s < t) -> x_{s+1}; predicting at t >= k-1
    s_ok = torch.arange(L - 1, device=seq.device) >= k - 1
    before = torch.ones(L, L - 1, dtype=torch.bool, device=seq.device).tril(-1) & s_ok
    same = (ids[:, :-1].unsqueeze(1) == ids.unsqueeze(2)) & before  # [B, L(t), L-1(s)]
    nxt = torch.nn.functional.one_hot(seq.long()[:, 1:], V).double()  # [B, L-1, V]
    counts = torch.bmm(same.double(), nxt) if L > 1 else torch.zeros((B, L, V), dtype=torch.float64)
    full = (alpha + counts) / (V * alpha + counts.sum(-1, keepdim=True))
    pred[:, k - 1:] = full[:, k - 1:]
    return pred.to(dtype)


def markov_k_predictive_reference(seq: Tensor, V: int, order: int, alpha: float = 1.0,
                                  dtype: torch.dtype = torch.float64) -> Tensor:
    """The same predictive by a loop over time that keeps a count table [B, V^k, V] (float64)."""
    check_sequence_inputs("seq", seq, V)
    int_at_least("order", order, 1, "the chain's order k")
    alpha = require_positive("alpha", alpha)
    B, L = seq.shape
    x = seq.long()
    out = torch.full((B, L, V), 1.0 / V, dtype=torch.float64)
    table = torch.zeros((B, V**order, V), dtype=torch.float64)
    rows = torch.arange(B)
    for t in range(order - 1, L):
        c = torch.zeros(B, dtype=torch.long)
        for i in range(order):
            c += x[:, t - i] * V**i
        n = table[rows, c]
        out[:, t] = (alpha + n) / (V * alpha + n.sum(-1, keepdim=True))
        if t + 1 < L:
            table[rows, c, x[:, t + 1]] += 1.0
    return out.to(dtype)
