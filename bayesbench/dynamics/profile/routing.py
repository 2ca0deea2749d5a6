"""The scores a routing-law check compares: the transformer's attention scores, and their
first-order change along a parameter update.

Scores are the scaled scores s_ij = q_i . k_j / sqrt(d_head) of the transformer's eval-mode
forward (no dropout; rotary q, k for position="rope"), computed by `transformer_scores`;
`predicted_change` gives s(theta0) and the Jacobian-vector product J(theta0) . delta
(torch.func.jvp). The statistics built on them are in law.py (Paper II, arXiv 2512.22473,
section 3).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.func import functional_call, jvp

from bayesbench.models.attention import causal_mask

from ..qkv import head_qkv
from .probes import attention_layers


def transformer_scores(model, tokens: Tensor, header: Tensor | None = None) -> Tensor:
    """Scaled attention scores of every attention layer: [L, E, B, H, T, T] (masked entries as
    computed, not -inf). Runs the blocks as their eval-mode forward does, up to the last
    attention layer."""
    return _internals(model, tokens, header)[0]


def transformer_values(model, tokens: Tensor, header: Tensor | None = None) -> Tensor:
    """The value vectors v_j of every attention layer's heads: [L, E, B, H, T, Dh] (the eval-mode
    forward, as `transformer_scores`)."""
    return _internals(model, tokens, header)[1]


def _internals(model, tokens: Tensor, header: Tensor | None) -> tuple[Tensor, Tensor]:
    layers = attention_layers(model)
    model.check_inputs(tokens, header)
    x = model.embed(tokens, header)
    E, B, T, d = x.shape
    keep = causal_mask(T, x.device)
    out, values = [], []
    for i, block in enumerate(model.blocks[: layers[-1] + 1]):
        if block.attn is not None:
            H = block.attn.n_head
            q, k, v = head_qkv(block.attn, block.ln_1(x))  # [E, B, H, T, Dh]
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d // H)
            out.append(s)
            values.append(v)
            alpha = torch.softmax(s.masked_fill(~keep, float("-inf")), -1)
            y = torch.matmul(alpha, v).transpose(2, 3).reshape(E, B, T, d)
            x = x + block.attn.proj(y)
        x = x + block.mlp(block.ln_2(x))
    return torch.stack(out), torch.stack(values)


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
        out = jvp(f, tuple(p.detach() for p in params0), tuple(d.detach() for d in delta))
        s0, ds = out[0], out[1]  # (output, JVP); a third item only with has_aux
    finally:
        model.train(was_training)
    return s0, ds


def values_at(model, params: list[Tensor], tokens: Tensor, header: Tensor | None = None) -> Tensor:
    """`transformer_values` with the parameters `params` (`model.parameters()` order) in place of
    the model's own, without gradients."""
    names = [n for n, _ in model.named_parameters()]
    wrapper = _Fn(model, transformer_values)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            return functional_call(wrapper, {f"model.{n}": p for n, p in zip(names, params)}, (tokens, header))
    finally:
        model.train(was_training)


class _Fn(nn.Module):
    def __init__(self, model, fn) -> None:
        super().__init__()
        self.model, self.fn = model, fn

    def forward(self, tokens, header):
        return self.fn(self.model, tokens, header)
