"""An attention block's queries, keys and values head by head, as the studies read them.

The model's own forward folds the ensemble into the batch ([E*B, H, T, Dh]); the geometry's
instrumented forward and the routing law's score function keep the members apart. Both split
the block's qkv projection the same way, with the rotary rotation of q and k for
position="rope", here.
"""

from __future__ import annotations

from torch import Tensor

from ..models.transformer import rotary


def head_qkv(attn, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """h [E, B, T, d_model] (the block's normalised input) -> q, k, v [E, B, H, T, Dh] of the
    block's attention `attn`, q and k rotated when it uses rotary positions."""
    E, B, T, d = h.shape
    H = attn.n_head
    qkv = attn.qkv(h).view(E, B, T, 3, H, d // H).permute(3, 0, 1, 4, 2, 5)
    q, k, v = qkv[0], qkv[1], qkv[2]
    if attn.rope:
        q, k = rotary(q), rotary(k)
    return q, k, v
