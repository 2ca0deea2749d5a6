"""Belief states of a fixed edge-emitting HMM (docs/science.md#belief-state-processes).

A process over X tokens and S hidden states is given by its labelled transition matrices
T^(x)[i, j] = p(x_{t+1} = x, s_{t+1} = j | s_t = i) (an edge-emitting, "Mealy" HMM: Shai et
al. 2024, "Transformers represent belief state geometry in their residual stream", arXiv
2405.15943; the computational-mechanics convention of Crutchfield's epsilon-machines).
Their sum T = sum_x T^(x) is row-stochastic. An observer starts from the stationary
distribution pi = pi T and updates its belief (the "mixed state") after each token:

    eta' = eta T^(x) / (eta T^(x) 1),

and predicts the next token with p(x | eta) = eta T^(x) 1. `belief_filter` runs this in
float64 for a batch of sequences; `path_sum_predictive` computes the same predictive as a ratio
of unnormalised path sums pi T^(x_0) ... T^(x_t) 1 (every hidden path summed, written as matrix
products) with no belief normalised along the way: the independent computation the tunnels'
`brute_force_posterior` uses.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..checks import SettingError
from .validate import ROW_SUM_ATOL, require_integer, require_range, require_shape, require_tensor


def check_process(matrices, name: str = "matrices") -> Tensor:
    """The labelled transition matrices as a float64 tensor [X, S, S], or a SettingError naming
    `name` and the rule: a nested list or tensor of shape [X, S, S] with X >= 2 tokens and
    S >= 1 states, finite non-negative entries, whose sum over tokens is row-stochastic
    (every row of sum_x T^(x) sums to 1 within 1e-6)."""
    try:
        t = torch.as_tensor(matrices, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise SettingError(f"{name} must be a nested list of numbers T[x][i][j] (the labelled transition "
                           f"matrices, shape [tokens, states, states]), got {matrices!r}", (name,)) from None
    if t.dim() != 3 or t.shape[1] != t.shape[2] or t.shape[0] < 2 or t.shape[1] < 1:
        raise SettingError(f"{name} must have shape [X, S, S] with X >= 2 tokens (T[x][i][j] = p(token x, next "
                           f"state j | state i)), got shape {list(t.shape)}", (name,))
    if not bool(torch.isfinite(t).all()) or bool((t < 0).any()):
        raise SettingError(f"{name} must hold finite non-negative probabilities, found {float(t.min()):g}", (name,))
    sums = t.sum(0).sum(-1)
    bad = (sums - 1).abs() > ROW_SUM_ATOL[torch.float64]
    if bool(bad.any()):
        i = int(bad.nonzero()[0, 0])
        raise SettingError(f"{name} must sum over tokens to a stochastic matrix (each row of sum_x T[x] sums to 1): "
                           f"row {i} sums to {float(sums[i]):.8g}", (name,))
    return t


def stationary_distribution(matrices: Tensor) -> Tensor:
    """pi = pi T with T = sum_x T^(x) (float64 [S]); the least-squares solution of the stacked
    system [T' - I; 1'] pi = [0; 1], unique for an irreducible process."""
    t = matrices.double().sum(0)
    S = t.shape[0]
    a = torch.cat([t.T - torch.eye(S, dtype=torch.float64), torch.ones((1, S), dtype=torch.float64)])
    b = torch.zeros((S + 1, 1), dtype=torch.float64)
    b[-1] = 1.0
    pi = torch.linalg.lstsq(a, b).solution.squeeze(-1).clamp(min=0)
    return pi / pi.sum()


def _check_tokens(matrices: Tensor, tokens: Tensor) -> None:
    require_tensor("tokens", tokens)
    require_integer("tokens", tokens)
    require_shape("tokens", tokens, (None, None), "[B, L] token ids")
    require_range("tokens", tokens, 0, matrices.shape[0])


def belief_filter(matrices: Tensor, tokens: Tensor, init: Tensor | None = None, *, check: bool = True
                  ) -> tuple[Tensor, Tensor]:
    """(beliefs [B, L, S], predictive [B, L, X]), both float64: beliefs[b, t] is the distribution
    of the hidden state after tokens 0..t, predictive[b, t] = p(x_{t+1} | x_0..x_t).

    matrices: [X, S, S] labelled transition matrices (`check_process`); init: the belief before
    the first token (default: the stationary distribution). A sequence the process cannot emit
    is a ValueError naming it and its position (check=False skips this host read: the task's own
    sampler draws from the process itself)."""
    t = matrices.double().to(tokens.device)
    if check:
        _check_tokens(t, tokens)
    X, S, _ = t.shape
    B, L = tokens.shape
    eta = (stationary_distribution(t.cpu()) if init is None else init.double().cpu()).to(tokens.device)
    eta = eta.expand(B, S)
    emit = t.sum(-1)  # [X, S]: p(x | s) = T^(x) 1
    beliefs = torch.empty((B, L, S), dtype=torch.float64, device=tokens.device)
    step = t[tokens.long()]  # [B, L, S, S]: T^(x_t) for every position
    for i in range(L):  # the recursion is sequential in time, batched over sequences
        joint = torch.bmm(eta.unsqueeze(1), step[:, i]).squeeze(1)
        norm = joint.sum(-1, keepdim=True)
        if check and bool((norm <= 0).any()):
            b = int((norm.squeeze(-1) <= 0).nonzero()[0, 0])
            raise ValueError(f"tokens: sequence {b} has probability 0 under the process at position {i} "
                             f"(token {int(tokens[b, i])})")
        eta = joint / norm.clamp(min=torch.finfo(torch.float64).tiny)
        beliefs[:, i] = eta
    return beliefs, beliefs @ emit.T


def path_sum_predictive(matrices: Tensor, tokens: Tensor, init: Tensor | None = None) -> Tensor:
    """p(x_{t+1} | x_0..x_t) [B, L, X] as a ratio of path sums: the probability of a word is
    pi T^(x_0) ... T^(x_t) 1, the sum over every hidden path, and nothing is normalised on the way
    (rescaled by a power of two per step, which cancels in the ratio). Float64."""
    t = matrices.double().to(tokens.device)
    _check_tokens(t, tokens)
    X, S, _ = t.shape
    B, L = tokens.shape
    v = (stationary_distribution(t.cpu()) if init is None else init.double().cpu()).to(tokens.device).expand(B, S)
    out = torch.empty((B, L, X), dtype=torch.float64, device=tokens.device)
    ones = torch.ones(S, dtype=torch.float64, device=tokens.device)
    for i in range(L):
        v = torch.bmm(v.unsqueeze(1), t[tokens[:, i].long()]).squeeze(1)
        # the word's probability and each one-token extension's, rescaled by the same 2^k
        scale = torch.ldexp(torch.ones_like(v[:, :1]), -torch.frexp(v.sum(-1, keepdim=True)).exponent)
        v = v * scale
        word = v @ ones
        ext = torch.einsum("bs,xst,t->bx", v, t, ones)
        out[:, i] = ext / word.unsqueeze(-1)
    return out

