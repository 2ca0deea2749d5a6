"""The exact predictive of a finite mixture of HMMs (docs/science.md#mixture-of-hmms-ginc).

Xie et al. 2022, "An Explanation of In-context Learning as Implicit Bayesian Inference" (arXiv
2111.02080, the GINC data set): each sequence comes from one of M fixed HMMs
(transition T_z [S, S], emission E_z [S, V], start p_z [S]), drawn with prior w_z. Given
o_0..o_t the Bayes predictive of o_{t+1} is the mixture of the components' predictives weighted
by their posteriors:

    p(o_{t+1} | o_0..t) = sum_z w_z(t) p_z(o_{t+1} | o_0..t),
    w_z(t) = w_z p_z(o_0..t) / sum_z' w_z' p_z'(o_0..t),
    p_z(o_{t+1} | o_0..t) = (alpha_z(t) T_z) E_z[:, o_{t+1}],

alpha_z(t) = p(s_t | o_0..t, z) the component's filter. `hmm_mixture_predictive` runs the
existing forward op (`hmm_filter`, the compiled kernel where built) on all B x M
(sequence, component) pairs at once and forms the weights in log space from the one-step
predictive likelihoods; `hmm_mixture_reference` is a plain float64 loop over time on the
product space (z, s), with nothing of the fast path. The joint belief p(z, s_t | o_0..t) is the
belief-geometry probe's target.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .hmm import hmm_filter
from .validate import require_distribution_rows, require_float, require_integer, require_range, require_shape


def check_mixture_inputs(trans: Tensor, emit: Tensor, init: Tensor, prior: Tensor, obs: Tensor) -> None:
    """Shapes, dtypes, distributions and symbol range (ValueError naming the argument)."""
    require_float("trans", trans)
    require_shape("trans", trans, (None, None, None), "component M, from-state S, to-state S")
    M, S, _ = trans.shape
    require_shape("trans", trans, (M, S, S), "component M, from-state S, to-state S")
    require_shape("emit", emit, (M, S, None), f"component M={M}, state S={S}, symbol V")
    require_shape("init", init, (M, S), f"component M={M}, state S={S}")
    require_shape("prior", prior, (M,), f"component M={M}")
    for name, x in (("trans", trans), ("emit", emit), ("init", init), ("prior", prior)):
        require_float(name, x)
        require_distribution_rows(name, x.double())
    require_integer("obs", obs)
    require_shape("obs", obs, (None, None), "batch B, time L")
    require_range("obs", obs, 0, emit.shape[2])


def hmm_mixture_predictive(trans: Tensor, emit: Tensor, init: Tensor, prior: Tensor, obs: Tensor, *,
                           backend: str = "auto", check: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """(predictive [B, L, V], weights [B, L, M], beliefs [B, L, M, S]), float64.

    predictive[b, t] = p(o_{t+1} | o_0..t); weights[b, t, z] = p(z | o_0..t);
    beliefs[b, t, z, s] = p(z, s_t = s | o_0..t). trans [M, S, S], emit [M, S, V], init [M, S],
    prior [M]: the fixed components; obs [B, L]. The component filters come from `hmm_filter`
    (`backend` picks the compiled op or its reference); a component that cannot emit a sequence
    gets weight 0 (its filter is continued from a uniform belief, which the weight then ignores).
    """
    if check:
        check_mixture_inputs(trans, emit, init, prior, obs)
    M, S, V = emit.shape
    B, L = obs.shape
    dev = obs.device
    t64, e64, i64 = trans.double().to(dev), emit.double().to(dev), init.double().to(dev)
    if L == 0:
        return (torch.empty((B, 0, V), dtype=torch.float64, device=dev),
                torch.empty((B, 0, M), dtype=torch.float64, device=dev),
                torch.empty((B, 0, M, S), dtype=torch.float64, device=dev))
    # every (sequence, component) pair is one HMM of the batched forward op
    post = hmm_filter(t64.repeat(B, 1, 1), e64.repeat(B, 1, 1), obs.repeat_interleave(M, 0), i64.repeat(B, 1),
                      backend=backend, check=False).reshape(B, M, L, S)
    ahead = torch.einsum("bmls,mst,mtv->bmlv", post, t64, e64)  # p_z(o_{t+1} = v | o_0..t)
    first = torch.einsum("ms,msv->mv", i64, e64)  # p_z(o_0 = v)
    step = torch.empty((B, M, L), dtype=torch.float64, device=dev)  # p_z(o_t | o_<t)
    step[:, :, 0] = first[:, obs[:, 0]].T
    if L > 1:
        step[:, :, 1:] = ahead[:, :, :-1].gather(-1, obs[:, 1:].unsqueeze(1).expand(B, M, L - 1).unsqueeze(-1)
                                                 ).squeeze(-1)
    logw = prior.double().to(dev).log().view(1, M, 1) + step.log().cumsum(-1)
    weights = torch.softmax(logw, dim=1)  # [B, M, L]
    predictive = torch.einsum("bml,bmlv->blv", weights, ahead)
    beliefs = (weights.unsqueeze(-1) * post).permute(0, 2, 1, 3)
    return predictive, weights.transpose(1, 2), beliefs


def hmm_mixture_reference(trans: Tensor, emit: Tensor, init: Tensor, prior: Tensor, obs: Tensor
                          ) -> tuple[Tensor, Tensor, Tensor]:
    """The same three tensors by the forward algorithm on the product space (z, s) in float64, a
    plain loop over time: the joint belief is updated and renormalised, the predictive and the
    weights read off it (no component filter, no log-space weights)."""
    t64, e64 = trans.double().to(obs.device), emit.double().to(obs.device)
    M, S, V = e64.shape
    B, L = obs.shape
    joint = (prior.double().view(M, 1) * init.double()).to(obs.device).expand(B, M, S)  # before o_0
    pred = torch.empty((B, L, V), dtype=torch.float64, device=obs.device)
    beliefs = torch.empty((B, L, M, S), dtype=torch.float64, device=obs.device)
    for i in range(L):
        lik = e64[:, :, obs[:, i]].permute(2, 0, 1)  # [B, M, S]: E_z[s, o_i]
        joint = joint * lik
        joint = joint / joint.sum((1, 2), keepdim=True)
        beliefs[:, i] = joint
        pred[:, i] = torch.einsum("bms,mst,mtv->bv", joint, t64, e64)
        joint = torch.einsum("bms,mst->bmt", joint, t64)  # the next state, before o_{i+1}
    return pred, beliefs.sum(-1), beliefs
