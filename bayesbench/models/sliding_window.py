"""Sliding-window attention: the transformer with each query restricted to the last W positions.

Softmax attention in which position t attends to positions t - W + 1 .. t (W keys, its own
included; the local attention of Longformer, Beltagy et al. 2020, arXiv 2004.05150, Sec. 3.1, and
of the sliding-window layers zoology and Based use: Arora et al. 2024, arXiv 2402.18668, Sec. 4).
W = 1 sees only its own position (a position-wise model); W >= the sequence length is the full
causal transformer. Blocks, embeddings, initialisation and parameter shapes are the transformer's
(`models/transformer.py`), so its count at the same sizes is the transformer's exactly; capacity
matching fits d_model, then d_ffn, as linear attention does.

The fast form is one masked SDPA call (a band mask); the recurrent reference keeps a KV cache of
the last W - 1 positions, so the state is 2 W' d floats per layer with W' = min(W - 1, t): fixed
once t >= W - 1, where the transformer's cache keeps growing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..checks import SettingError, int_at_least, positive_int
from .base import ResidualStack, TaskShape
from .capacity import match_widths, meta_params
from .layers import EnsembleLayerNorm, EnsembleLinear, residual_std
from .registry import register_model


@dataclass(frozen=True)
class SlidingWindowConfig:
    n_layer: int = 2
    n_head: int = 2
    d_model: int = 64
    d_ffn: int = 256
    window: int = 8  # keys per query, its own position included (>= 1)

    def __post_init__(self) -> None:
        for f in ("n_layer", "n_head", "d_model", "d_ffn"):
            positive_int(f, getattr(self, f))
        check_heads(self.d_model, self.n_head)
        int_at_least("window", self.window, 1, "the number of positions each query attends to, its own included")


def check_heads(d_model: int, n_head: int) -> None:
    if d_model % n_head:
        raise SettingError(f"d_model ({d_model}) must be divisible by n_head ({n_head})", ("d_model", "n_head"))


def band_mask(L: int, window: int, device: torch.device) -> Tensor:
    """[L, L] boolean, True where key s may be seen by query t: t - window < s <= t."""
    t = torch.arange(L, device=device)
    offset = t[:, None] - t[None, :]
    return (offset >= 0) & (offset < window)


class SlidingWindowAttention(nn.Module):
    """Multi-head causal softmax attention over the last `window` positions, [E, B, L, d] -> same."""

    def __init__(self, E: int, d_model: int, n_head: int, window: int, n_layer: int) -> None:
        super().__init__()
        self.n_head, self.window = n_head, window
        self.qkv = EnsembleLinear(E, d_model, 3 * d_model)
        self.proj = EnsembleLinear(E, d_model, d_model, init_std=residual_std(2 * n_layer))

    def forward(self, x: Tensor) -> Tensor:
        E, B, L, d = x.shape
        H = self.n_head
        q, k, v = self.qkv(x).view(E * B, L, 3, H, d // H).permute(2, 0, 3, 1, 4).unbind(0)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=band_mask(L, self.window, x.device))
        return self.proj(y.transpose(1, 2).reshape(E, B, L, d))

    def recurrent_step(self, x: Tensor, state: dict[str, Tensor] | None) -> tuple[Tensor, dict[str, Tensor]]:
        """One position of x [E, B, d] against the cached K and V of the previous W - 1 positions
        ([E, B, H, W', Dh] each); the cache carried on drops the oldest beyond W - 1."""
        E, B, d = x.shape
        H = self.n_head
        q, k, v = self.qkv(x).view(E, B, 3, H, 1, d // H).unbind(2)  # [E, B, H, 1, Dh]
        if state is not None:
            k, v = torch.cat([state["k"], k], 3), torch.cat([state["v"], v], 3)
        weights = torch.softmax((q @ k.transpose(-1, -2)) / math.sqrt(d // H), dim=-1)
        y = self.proj((weights @ v).reshape(E, B, d))
        keep = self.window - 1
        start = max(0, k.shape[3] - keep)
        return y, {"k": k[:, :, :, start:], "v": v[:, :, :, start:]}


class FeedForward(nn.Module):
    """The transformer's position-wise FFN: proj(GELU(fc(x)))."""

    def __init__(self, E: int, d_model: int, d_ffn: int, n_layer: int) -> None:
        super().__init__()
        self.fc = EnsembleLinear(E, d_model, d_ffn)
        self.proj = EnsembleLinear(E, d_ffn, d_model, init_std=residual_std(2 * n_layer))

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    """Pre-norm: x += mixer(LN(x)); x += FFN(LN(x)) (the transformer's block with another mixer)."""

    def __init__(self, E: int, d_model: int, d_ffn: int, n_layer: int, mixer: nn.Module) -> None:
        super().__init__()
        self.ln_1 = EnsembleLayerNorm(E, d_model)
        self.attn = mixer
        self.ln_2 = EnsembleLayerNorm(E, d_model)
        self.mlp = FeedForward(E, d_model, d_ffn, n_layer)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class SlidingWindow(ResidualStack):
    """E independent sliding-window transformers: tokens [E, B, L] (+ header) -> logits [E, B, L, C]."""

    def __init__(self, shape: TaskShape, cfg: SlidingWindowConfig, ensemble: int = 1) -> None:
        blocks = [Block(ensemble, cfg.d_model, cfg.d_ffn, cfg.n_layer,
                        SlidingWindowAttention(ensemble, cfg.d_model, cfg.n_head, cfg.window, cfg.n_layer))
                  for _ in range(cfg.n_layer)]
        super().__init__(shape, ensemble, cfg.d_model, blocks)
        self.cfg = cfg


def match_sliding_window(shape: TaskShape, target: int, *, n_layer: int = 2, n_head: int = 2,
                         tolerance: float = 0.01, **cfg) -> SlidingWindowConfig:
    """n_layer blocks of n_head heads within tolerance of target: d_model (a multiple of n_head,
    d_ffn = 4 d_model), then d_ffn."""
    if "d_model" in cfg or "d_ffn" in cfg:
        raise ValueError("match_sliding_window fits d_model and d_ffn itself; do not give them")
    positive_int("n_head", n_head)

    def make(d: int, f: int) -> SlidingWindowConfig:
        return SlidingWindowConfig(n_layer=n_layer, n_head=n_head, d_model=d, d_ffn=f, **cfg)

    d, f = match_widths(lambda d, f: meta_params(lambda: SlidingWindow(shape, make(d, f))), target,
                        default_fine=lambda d: 4 * d, coarse_step=n_head, tolerance=tolerance,
                        what="sliding-window model")
    return make(d, f)


@register_model("sliding-window", "softmax attention over the last W positions (window a setting), pre-norm blocks",
                config=SlidingWindowConfig)
def build_sliding_window(shape: TaskShape, ensemble: int, match_params: int | None = None,
                         **cfg) -> SlidingWindow:
    """SlidingWindowConfig fields directly, or match_params=N (with n_layer, n_head, window) to fit widths."""
    config = (SlidingWindowConfig(**cfg) if match_params is None
              else match_sliding_window(shape, int(match_params), **cfg))
    return SlidingWindow(shape, config, ensemble)
