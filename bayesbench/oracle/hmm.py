"""Exact HMM filtering: p(s_t | o_1..t) for a batch of independent HMMs.

The scaled forward algorithm (docs/science.md#hmm-state-tracking; Paper I, Sec. 3.2): alpha_1 = pi0 * E[:, o_1], then
alpha_t = (alpha_{t-1} T) * E[:, o_t], normalised at every step, so any length is stable. The
log-likelihood is the sum of the log normalisers.
"""

from __future__ import annotations

from typing import Literal, overload

import torch
from torch import Tensor

from .. import ops
from .backend import use_native
from .validate import check_hmm_inputs, raise_if_impossible


@overload
def hmm_filter(trans: Tensor, emit: Tensor, obs: Tensor, init: Tensor | None = ..., *, backend: str = ...,
               return_loglik: Literal[False] = ..., check: bool = ...) -> Tensor: ...


@overload
def hmm_filter(trans: Tensor, emit: Tensor, obs: Tensor, init: Tensor | None = ..., *, backend: str = ...,
               return_loglik: Literal[True], check: bool = ...) -> tuple[Tensor, Tensor]: ...


@overload
def hmm_filter(trans: Tensor, emit: Tensor, obs: Tensor, init: Tensor | None = ..., *, backend: str = ...,
               return_loglik: bool, check: bool = ...) -> Tensor | tuple[Tensor, Tensor]: ...


def hmm_filter(
    trans: Tensor,
    emit: Tensor,
    obs: Tensor,
    init: Tensor | None = None,
    *,
    backend: str = "auto",
    return_loglik: bool = False,
    check: bool = True,
) -> Tensor | tuple[Tensor, Tensor]:
    """Filtering posteriors of B independent HMMs.

    Args:
        trans: [B, S, S] row-stochastic transition matrices, T[b, i, j] = p(s_t=j | s_{t-1}=i).
        emit: [B, S, V] row-stochastic emission matrices, E[b, i, o] = p(o | s=i).
        obs: [B, L] integer observations in 0..V-1.
        init: [B, S] initial state distributions, or None for uniform.
        backend: "auto" (compiled op when built for this device, else reference), "reference"
            or "native".
        return_loglik: also return log p(o_1..L) per HMM (natural log, float64).
        check: validate the inputs and refuse impossible observations (both read back to the
            host). False only where they are right by construction: the task's own sampler, whose
            observations are drawn from the HMM itself.

    Returns:
        posteriors [B, L, S] in the dtype of `trans` (and the log-likelihood [B] if asked).

    Raises:
        ValueError: malformed input, or an observation sequence with zero likelihood (naming
            the batch element and step).
    """
    if check:
        check_hmm_inputs(trans, emit, obs, init)
    if use_native("hmm_filter", backend, trans.device):
        post, loglik, dead_step = ops.hmm_filter(trans, emit, obs, init)
    else:
        post, loglik, dead_step = hmm_filter_reference(trans, emit, obs, init)
    if check:
        raise_if_impossible(dead_step)
    return (post, loglik) if return_loglik else post


def hmm_filter_reference(
    trans: Tensor, emit: Tensor, obs: Tensor, init: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """Plain PyTorch forward pass (no validation): (posteriors, loglik, first dead step or -1).

    Dead HMMs (zero likelihood) continue from a uniform belief so no NaN spreads; the caller
    raises on them.
    """
    B, S, _ = trans.shape
    L = obs.shape[1]
    dtype, device = trans.dtype, trans.device
    post = torch.empty((B, L, S), dtype=dtype, device=device)
    loglik = torch.zeros(B, dtype=torch.float64, device=device)
    dead_step = torch.full((B,), -1, dtype=torch.long, device=device)
    if L == 0:
        return post, loglik, dead_step
    # lik[b, t, s] = E[b, s, o_t]: gather once, then the loop only multiplies.
    lik = emit.transpose(1, 2).gather(1, obs.long().unsqueeze(-1).expand(B, L, S))
    prior = init if init is not None else torch.full((B, S), 1.0 / S, dtype=dtype, device=device)
    uniform = torch.full((B, S), 1.0 / S, dtype=dtype, device=device)
    belief = prior
    for t in range(L):
        if t > 0:
            prior = torch.bmm(belief.unsqueeze(1), trans).squeeze(1)
        joint = prior * lik[:, t]
        norm = joint.sum(-1, keepdim=True)
        zero = norm.squeeze(-1) <= 0
        dead_step = torch.where(zero & (dead_step < 0), t, dead_step)
        belief = torch.where(zero.unsqueeze(-1), uniform,
                             joint / torch.where(zero, 1.0, norm.squeeze(-1)).unsqueeze(-1))
        loglik += torch.where(zero, 0.0, norm.squeeze(-1).double().log())
        post[:, t] = belief
    return post, loglik, dead_step
