"""Closed-form posterior predictives of the counting tunnels
(docs/science.md#sticky-chain-and-in-context-markov-chain; Paper II, Sec. 7.2).

Sticky chain: the next symbol repeats the current one with probability rho ~ Beta(a, b), else is
uniform over the other V-1 symbols; P(stay | history) = (a + n_stay) / (a + b + n_transitions).
In-context Markov chain: each row of T ~ Dirichlet(alpha);
p(j | i, history) = (alpha + N_ij) / (V alpha + N_i).
Position t's predictive is for the symbol at t+1, given symbols 0..t.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .. import ops
from .backend import use_native
from .validate import check_sequence_inputs, require_float_dtype, require_positive


def sticky_predictive(seq: Tensor, V: int, a: float = 1.0, b: float = 1.0, *,
                      backend: str = "auto", dtype: torch.dtype = torch.float32, check: bool = True) -> Tensor:
    """Posterior predictive [B, L, V] of the next symbol of a sticky chain with rho ~ Beta(a, b).
    check=False skips the symbol-range check of `seq` (a host read): for the task's own sampler."""
    if check:
        check_sequence_inputs("seq", seq, V)
    a, b = require_positive("a", a), require_positive("b", b)
    require_float_dtype("dtype", dtype)
    use_native("sticky_predictive", backend, seq.device)  # checks backend; 'native' raises: no compiled op
    return sticky_predictive_reference(seq, V, a, b, dtype)


def sticky_predictive_reference(seq: Tensor, V: int, a: float, b: float,
                                dtype: torch.dtype = torch.float32) -> Tensor:
    B, L = seq.shape
    x = seq.long()
    stays = torch.zeros((B, L), dtype=torch.float64, device=seq.device)
    if L > 1:
        stays[:, 1:] = (x[:, 1:] == x[:, :-1]).double().cumsum(1)
    transitions = torch.arange(L, dtype=torch.float64, device=seq.device)  # t transitions seen at t
    p_stay = (a + stays) / (a + b + transitions)  # float64 on [B, L]; the [B, L, V] output in dtype
    out = ((1.0 - p_stay) / (V - 1)).to(dtype).unsqueeze(-1).expand(B, L, V).clone()
    out.scatter_(2, x.unsqueeze(-1), p_stay.to(dtype).unsqueeze(-1))
    return out


def markov_predictive(seq: Tensor, V: int, alpha: float = 1.0, *, backend: str = "auto",
                      dtype: torch.dtype = torch.float32, check: bool = True) -> Tensor:
    """Posterior predictive [B, L, V] of the next symbol of a chain with Dirichlet(alpha) rows.
    check=False skips the symbol-range check of `seq` (a host read): for the task's own sampler."""
    if check:
        check_sequence_inputs("seq", seq, V)
    alpha = require_positive("alpha", alpha)
    require_float_dtype("dtype", dtype)
    if use_native("markov_predictive", backend, seq.device):
        return ops.markov_predictive(seq, V, alpha, dtype)
    return markov_predictive_reference(seq, V, alpha, dtype)


def markov_predictive_reference(seq: Tensor, V: int, alpha: float,
                                dtype: torch.dtype = torch.float32) -> Tensor:
    B, L = seq.shape
    x = seq.long()
    counts = torch.zeros((B, L, V), dtype=torch.float64, device=seq.device)
    if L > 1:
        # pair_before[b, t, s]: transition s -> s+1 (s < t) leaves the symbol now at t.
        pair_before = (x[:, :-1].unsqueeze(1) == x.unsqueeze(2)) & torch.ones(
            L, L - 1, dtype=torch.bool, device=seq.device).tril(-1)
        nxt = torch.nn.functional.one_hot(x[:, 1:], V).double()  # [B, L-1, V]
        counts = torch.bmm(pair_before.double(), nxt)
    pred = (alpha + counts) / (V * alpha + counts.sum(-1, keepdim=True))
    return pred.to(dtype)
