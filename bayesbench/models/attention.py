"""Causal softmax attention written out in plain PyTorch: the masked softmax that the
transformer's "eager" backend, Paper II's toy attention and the reference of the Triton
kernels (`bayesbench.kernels.reference`) all use.

It lives here, not in `bayesbench.kernels`, so the models import without the kernels package
(which the transformer loads only for attention='triton' or 'reference').
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor


def causal_mask(t: int, device: torch.device) -> Tensor:
    """Boolean [T, T] mask, True where key j may be seen by query i (j <= i)."""
    return torch.ones(t, t, dtype=torch.bool, device=device).tril()


def attention_weights(q: Tensor, k: Tensor, *, causal: bool = True, scale: float) -> Tensor:
    """alpha = softmax(scale * q k^T) over keys, with key j > query i masked out when causal."""
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(~causal_mask(q.shape[-2], q.device), float("-inf"))
    return torch.softmax(s, dim=-1)


def softmax_attention(q: Tensor, k: Tensor, v: Tensor, dropout_p: float = 0.0) -> Tensor:
    """softmax(q k^T / sqrt(d) + causal mask) v, written out (the transformer's 'eager' backend);
    dropout on the attention weights as SDPA applies it."""
    weights = attention_weights(q, k, causal=True, scale=1 / math.sqrt(q.shape[-1]))
    return F.dropout(weights, dropout_p) @ v if dropout_p > 0 else weights @ v
