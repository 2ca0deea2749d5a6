"""Gated linear recurrences: one home for the kernels and blocks of GLA, RetNet and Mamba-2.

All three mixers are the same linear recurrence over a matrix state S [Dk, Dv] per head,

    S_t = diag(a_t) S_{t-1} + k_t v_t^T,     o_t = S_t^T q_t,     a_t = exp(g_t) in (0, 1],

differing only in where the decay g_t <= 0 comes from: a data-dependent vector per key channel
(GLA: Yang et al. 2023, "Gated Linear Attention Transformers with Hardware-Efficient Training",
arXiv 2312.06635, Sec. 4), a data-dependent scalar per head (Mamba-2's SSD: Dao and Gu 2024,
"Transformers are SSMs", arXiv 2405.21060, Sec. 6) or a fixed scalar per head (RetNet: Sun et al.
2023, "Retentive Network", arXiv 2307.08621, Sec. 2.1).

`gated_recurrence_step` is the recurrent reference (one position, the truth, a few lines);
`gated_recurrence_chunked` the training path: the sequence cut into chunks of C positions, the
intra-chunk part in its parallel (masked, quadratic in C) form and the state carried from chunk to
chunk (GLA Sec. 4.2, Mamba-2 Sec. 6, RetNet Sec. 2.1). A scalar decay's factors exp(b_t - b_s)
(b: the within-chunk cumulative log decay, s <= t) are formed directly, each exponent <= 0. A
vector decay's intra-chunk scores are the matmul (q exp(b)) (k exp(-b))^T (GLA Sec. 4.2) while
the chunk's total decay stays within `FACTOR_LIMIT` (no overflow), else the exact [C, C, Dk] form
with every exponent <= 0 (where GLA's paper uses secondary chunking): the same numbers either way.

The module also holds what the five zoo architectures of issue 43 share: a per-head norm with a
per-member affine, the causal short convolution's one-step form, and the pre-norm block
`x += mixer(LN(x)); x += FFN(LN(x))` with the transformer's GELU FFN (the channel mixer kept
equal across the zoo, so an entry differs from the transformer in its sequence mixer alone).
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .capacity import match_widths, meta_params
from .layers import EnsembleLayerNorm, EnsembleLinear, residual_std

State = dict[str, Tensor]
# A chunk whose vector decay sums to more than this (in log) is computed in the exact form, not as
# (q exp(b)) (k exp(-b))^T: exp(30) ~ 1e13 leaves float32 far from overflow, and each product keeps
# its relative precision (no cancellation: the factors multiply, they are not subtracted)
FACTOR_LIMIT = {torch.float64: 300.0, torch.float32: 30.0}


def gated_recurrence_step(q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor,
                          state: Tensor | None) -> tuple[Tensor, Tensor]:
    """One position of S_t = exp(g_t)[:, None] * S_{t-1} + k_t v_t^T, o_t = S_t^T q_t.

    q, k: [..., Dk]; v: [..., Dv]; log_decay g: [..., Dk] (a vector gate) or [..., 1] (a scalar
    per head); state: [..., Dk, Dv] or None (zeros). Returns (o [..., Dv], the new state)."""
    write = k.unsqueeze(-1) * v.unsqueeze(-2)
    new = write if state is None else torch.exp(log_decay).unsqueeze(-1) * state + write
    return (q.unsqueeze(-1) * new).sum(-2), new


def gated_recurrence_ref(q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor) -> Tensor:
    """`gated_recurrence_step` looped over the time axis (-2): the reference of the chunked form."""
    state, out = None, []
    for t in range(q.shape[-2]):
        o, state = gated_recurrence_step(q[..., t, :], k[..., t, :], v[..., t, :], log_decay[..., t, :], state)
        out.append(o)
    return torch.stack(out, dim=-2)


def time_chunks(x: Tensor, C: int) -> Tensor:
    """[..., L, D] -> [..., n, C, D], zero-padded at the end to a multiple of C. Padding is inert:
    a zero key writes nothing, a zero log decay keeps the state, and padded outputs are cut off."""
    L = x.shape[-2]
    n = -(-L // C)
    x = F.pad(x, (0, 0, 0, n * C - L))
    return x.reshape(*x.shape[:-2], n, C, x.shape[-1])


def gated_recurrence_chunked(q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor, chunk: int) -> Tensor:
    """The chunked form of `gated_recurrence_ref`: [..., L, Dk/Dv] -> o [..., L, Dv].

    Within a chunk (b: cumulative log decay from the chunk's start, inclusive)
      o_t = sum_{s<=t} (q_t * exp(b_t - b_s)) . k_s v_s   +   (q_t * exp(b_t)) S_0,
      S_C = exp(b_C) * S_0 + sum_s (k_s * exp(b_C - b_s)) v_s^T,
    the first term batched over all chunks, the second a loop over the L / C chunks."""
    L = q.shape[-2]
    C = max(1, min(chunk, L))
    scalar = log_decay.shape[-1] == 1
    qc, kc, vc, gc = (time_chunks(x, C) for x in (q, k, v, log_decay))
    b = torch.cumsum(gc, dim=-2)  # [..., n, C, Dk or 1]
    causal = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    if scalar:
        diff = (b[..., :, None, 0] - b[..., None, :, 0]).masked_fill(~causal, -math.inf)
        scores = (qc @ kc.transpose(-1, -2)) * torch.exp(diff)  # [..., n, C, C]
    elif bool((b[..., -1, :] > -FACTOR_LIMIT.get(q.dtype, 5.0)).all()):  # (one host read)
        # exp(b_t - b_s) = exp(b_t) exp(-b_s): a matmul; exp(-b_s) <= exp(-b_C) is far from overflow
        scores = ((qc * torch.exp(b)) @ (kc * torch.exp(-b)).transpose(-1, -2)).masked_fill(~causal, 0.0)
    else:  # a decay too strong to factorise: every factor exp(b_t - b_s) <= 1 formed, [..., n, C, C, Dk]
        diff = (b.unsqueeze(-2) - b.unsqueeze(-3)).masked_fill(~causal.unsqueeze(-1), -math.inf)
        scores = (qc.unsqueeze(-2) * kc.unsqueeze(-3) * torch.exp(diff)).sum(-1)
    out = scores @ vc  # the intra-chunk part [..., n, C, Dv]
    n = qc.shape[-3]
    if n > 1:
        b_last = b[..., -1:, :]
        q_in = qc * torch.exp(b)  # reads the state entering the chunk
        k_out = kc * torch.exp(b_last - b)  # writes into the state leaving it
        carry = torch.exp(b_last).squeeze(-2).unsqueeze(-1)  # [..., n, Dk or 1, 1]
        state = (k_out[..., 0, :, :].transpose(-1, -2) @ vc[..., 0, :, :])
        inter = [torch.zeros_like(out[..., 0, :, :])]
        for i in range(1, n):
            inter.append(q_in[..., i, :, :] @ state)
            if i < n - 1:
                state = carry[..., i, :, :] * state + k_out[..., i, :, :].transpose(-1, -2) @ vc[..., i, :, :]
        out = out + torch.stack(inter, dim=-3)
    return out.reshape(*out.shape[:-3], -1, out.shape[-1])[..., :L, :]


class EnsembleHeadNorm(nn.Module):
    """Normalise each head's channels (RMS, or mean and variance: GroupNorm with one group per
    head, RetNet Sec. 2.2) then a per-member, per-channel affine: [E, ..., H * D] -> same."""

    def __init__(self, E: int, heads: int, head_dim: int, *, centre: bool, eps: float = 1e-5) -> None:
        super().__init__()
        self.heads, self.head_dim, self.centre, self.eps = heads, head_dim, centre, eps
        self.weight = nn.Parameter(torch.ones(E, heads * head_dim))
        self.bias = nn.Parameter(torch.zeros(E, heads * head_dim)) if centre else None

    def reset_member(self, e: int, generator: torch.Generator) -> None:  # no draws
        with torch.no_grad():
            self.weight[e].fill_(1.0)
            if self.bias is not None:
                self.bias[e].zero_()

    def forward(self, x: Tensor) -> Tensor:
        y = x.unflatten(-1, (self.heads, self.head_dim))
        if self.centre:
            y = y - y.mean(-1, keepdim=True)
        y = (y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)).flatten(-2)
        shape = (x.shape[0],) + (1,) * (x.dim() - 2) + (x.shape[-1],)
        y = y * self.weight.view(shape)
        return y if self.bias is None else y + self.bias.view(shape)


def conv_step(weight: Tensor, bias: Tensor, x: Tensor, state: State | None, key: str = "conv") -> tuple[Tensor, Tensor]:
    """One position of `mamba.CausalDepthwiseConv` (weight [E, D, k], bias [E, D]) on x [E, B, D]:
    returns (y [E, B, D], the last k - 1 inputs [E, B, k - 1, D], what the conv carries)."""
    E, B, D = x.shape
    k = weight.shape[-1]
    past = state[key] if state is not None else x.new_zeros(E, B, k - 1, D)
    window = torch.cat([past, x.unsqueeze(2)], dim=2)  # [E, B, k, D], oldest first
    y = bias.unsqueeze(1) + torch.einsum("ebkd,edk->ebd", window, weight)
    return y, window[:, :, 1:]


def l2_normalise(x: Tensor, eps: float = 1e-6) -> Tensor:
    """x / ||x|| over the last dim (DeltaNet's key and query normalisation, arXiv 2406.06484)."""
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps)


class MixerBlock(nn.Module):
    """Pre-norm residual block x += mixer(LN(x)), then (d_ffn > 0) x += FFN(LN(x)) with the
    transformer's GELU FFN and its residual-scaled output init (n_residual: residual writes in the
    whole stack)."""

    def __init__(self, E: int, d_model: int, d_ffn: int, mixer: nn.Module, n_residual: int) -> None:
        super().__init__()
        self.ln_1 = EnsembleLayerNorm(E, d_model)
        self.mixer = mixer
        self.has_ffn = d_ffn > 0
        if self.has_ffn:
            self.ln_2 = EnsembleLayerNorm(E, d_model)
            self.fc = EnsembleLinear(E, d_model, d_ffn)
            self.fc_proj = EnsembleLinear(E, d_ffn, d_model, init_std=residual_std(n_residual))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.mixer(self.ln_1(x))
        return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x)))) if self.has_ffn else x


def match_d_model_and_ffn(count: Callable[[int, int], int], target: int, *, step: int, what: str,
                          tolerance: float = 0.01) -> tuple[int, int]:
    """(d_model, d_ffn) within tolerance of target: d_model (a multiple of `step`, with d_ffn =
    4 d_model), then d_ffn (linear attention's `match`, `capacity.match_widths`)."""
    return match_widths(count, target, default_fine=lambda d: 4 * d, coarse_step=step,
                        tolerance=tolerance, what=what)


__all__ = ["EnsembleHeadNorm", "MixerBlock", "conv_step", "gated_recurrence_chunked", "gated_recurrence_ref",
           "gated_recurrence_step", "l2_normalise", "match_d_model_and_ffn", "meta_params", "time_chunks"]
