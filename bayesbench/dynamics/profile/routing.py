"""The routing law on real training: do the scores move with the advantage after a step?

dL/ds_ij = -alpha_ij A_ij is an identity of the attention backward (Paper II, arXiv 2512.22473,
section 3). Whether the *scores* then change along A depends on everything the update passes
through (W_Q, W_K, the residual stream, earlier layers, the optimiser). For one training step
with parameters theta -> theta + Delta theta, on that step's batch, per (member, layer, head):

    sign agreement    sum_ij alpha_ij [sign A_ij = sign Delta s_ij] / sum_ij alpha_ij
                      over visible (i, j) with A_ij != 0 (alpha, A at theta; Delta s the actual change)
    centred agreement the same with Delta s_ij - E_alpha_i[Delta s] (a per-query shift of the
                      scores leaves alpha unchanged, so only the centred change moves the weights)
    R^2               1 - sum (Delta s - J Delta theta)^2 / sum (Delta s - mean Delta s)^2 over the
                      visible entries, J Delta theta the first-order prediction (a Jacobian-vector
                      product of the scores along the update, torch.func.jvp)
    pred_rel_error    ||Delta s - J Delta theta|| / ||Delta s||
    cosine            cos(Delta s, alpha * A) over the visible entries: 1 when each score moves in
                      proportion to its own -dL/ds (free scores), near 0 when the update through
                      shared weights is unrelated to the entry's own gradient

Scores are the scaled scores s_ij = q_i . k_j / sqrt(d_head) of the transformer's eval-mode
forward (no dropout), computed by `transformer_scores`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.func import functional_call, jvp

from bayesbench.models.attention import causal_mask

from .probes import attention_layers

LAW_NAMES = ("law_sign_agreement", "law_sign_agreement_centred", "law_r2", "law_pred_rel_error", "law_cosine")


def transformer_scores(model, tokens: Tensor, header: Tensor | None = None) -> Tensor:
    """Scaled attention scores of every attention layer: [L, E, B, H, T, T] (masked entries as
    computed, not -inf). Runs the blocks as their eval-mode forward does, up to the last
    attention layer."""
    layers = attention_layers(model)
    model.check_inputs(tokens, header)
    x = model.embed(tokens, header)
    E, B, T, d = x.shape
    keep = causal_mask(T, x.device)
    out = []
    for i, block in enumerate(model.blocks[: layers[-1] + 1]):
        if block.attn is not None:
            H = block.attn.n_head
            qkv = block.attn.qkv(block.ln_1(x)).view(E, B, T, 3, H, d // H).permute(3, 0, 1, 4, 2, 5)
            q, k, v = qkv[0], qkv[1], qkv[2]  # [E, B, H, T, Dh]
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d // H)
            out.append(s)
            alpha = torch.softmax(s.masked_fill(~keep, float("-inf")), -1)
            y = torch.matmul(alpha, v).transpose(2, 3).reshape(E, B, T, d)
            x = x + block.attn.proj(y)
        x = x + block.mlp(block.ln_2(x))
    return torch.stack(out)


def attention_maps(model, tokens: Tensor, header: Tensor | None = None) -> Tensor:
    """alpha of every attention layer, [L, E, B, H, T, T], without gradients."""
    with torch.no_grad():
        s = transformer_scores(model, tokens, header)
    return masked_softmax(s)


def masked_softmax(s: Tensor) -> Tensor:
    keep = causal_mask(s.shape[-1], s.device)
    return torch.softmax(s.masked_fill(~keep, float("-inf")), -1)


class _Scores(nn.Module):
    def __init__(self, model) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens: Tensor, header: Tensor | None) -> Tensor:
        return transformer_scores(self.model, tokens, header)


def predicted_change(model, params0: list[Tensor], delta: list[Tensor], tokens: Tensor,
                     header: Tensor | None = None, score_fn=None) -> tuple[Tensor, Tensor]:
    """(s(theta0), J(theta0) . delta): the scores at params0 and their first-order change along
    `delta` (both lists in `model.parameters()` order). `score_fn(module, tokens, header)`
    defaults to `transformer_scores`."""
    names = [n for n, _ in model.named_parameters()]
    if len(names) != len(params0) or len(names) != len(delta):
        raise ValueError(f"params0 and delta must hold one tensor per parameter ({len(names)}), "
                         f"got {len(params0)} and {len(delta)}")
    wrapper = _Scores(model) if score_fn is None else _Fn(model, score_fn)

    def f(*ps):
        return functional_call(wrapper, {f"model.{n}": p for n, p in zip(names, ps)}, (tokens, header))

    was_training = model.training
    model.eval()
    try:
        s0, ds = jvp(f, tuple(p.detach() for p in params0), tuple(d.detach() for d in delta))
    finally:
        model.train(was_training)
    return s0, ds


class _Fn(nn.Module):
    def __init__(self, model, fn) -> None:
        super().__init__()
        self.model, self.fn = model, fn

    def forward(self, tokens, header):
        return self.fn(self.model, tokens, header)


def law_statistics(delta_s: Tensor, predicted: Tensor, advantage: Tensor, alpha: Tensor) -> Tensor:
    """[len(LAW_NAMES), ..., H] for tensors [..., B, H, T, T] reduced over (B, T, T).

    Inputs share the shape [..., B, H, T, T] (causal); returns the statistics per leading index
    and head. Entries above the diagonal are ignored.
    """
    if not (delta_s.shape == predicted.shape == advantage.shape == alpha.shape):
        raise ValueError(f"delta_s, predicted, advantage and alpha must share one shape, got "
                         f"{tuple(delta_s.shape)}, {tuple(predicted.shape)}, {tuple(advantage.shape)}, "
                         f"{tuple(alpha.shape)}")
    dt = torch.float64 if delta_s.dtype == torch.float64 else torch.float32
    delta_s, predicted, advantage, alpha = (x.to(dt) for x in (delta_s, predicted, advantage, alpha))
    T = delta_s.shape[-1]
    keep = causal_mask(T, delta_s.device)
    alpha = torch.where(keep, alpha, 0.0)
    red = (-4, -2, -1)  # B, T, T; the head dim -3 stays

    def agreement(ds: Tensor) -> Tensor:
        w = torch.where(keep & (advantage != 0), alpha, 0.0)
        agree = (torch.sign(advantage) == torch.sign(ds)).to(dt)
        return (w * agree).sum(red) / w.sum(red)

    centred = delta_s - (alpha * delta_s).sum(-1, keepdim=True)
    n = keep.sum().to(dt) * delta_s.shape[-4]
    z = torch.zeros((), dtype=dt, device=delta_s.device)
    ds_k = torch.where(keep, delta_s, z)
    mean = ds_k.sum(red, keepdim=True) / n
    ss_tot = torch.where(keep, (delta_s - mean) ** 2, z).sum(red)
    resid = torch.where(keep, (delta_s - predicted) ** 2, z).sum(red)
    r2 = 1 - resid / ss_tot
    rel = resid.sqrt() / ds_k.pow(2).sum(red).sqrt()
    push = torch.where(keep, alpha * advantage, z)  # -dL/ds
    cosine = (ds_k * push).sum(red) / (ds_k.pow(2).sum(red).sqrt() * push.pow(2).sum(red).sqrt())
    return torch.stack([agreement(delta_s), agreement(centred), r2, rel, cosine])
