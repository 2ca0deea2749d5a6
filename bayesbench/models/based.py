"""Based: linear attention with a 2nd-order Taylor feature map, interleaved with sliding-window
softmax attention (Arora et al. 2024, "Simple linear attention language models balance the
recall-throughput tradeoff", arXiv 2402.18668).

Taylor linear attention (Sec. 4.1): q and k are projected to `feature_dim` (d') channels per head
and mapped by phi(x) = [1, x / d'^(1/4), vec(x x^T) / (sqrt(2) sqrt(d'))], so that
phi(q) . phi(k) = 1 + s + s^2 / 2 with s = q . k / sqrt(d'): the Taylor expansion of exp(s),
positive for every s. The output is normalised like linear attention's:
y_t = sum_{j<=t} phi(q_t).phi(k_j) v_j / (sum_{j<=t} phi(q_t).phi(k_j) + eps).
Its recurrent state per head is S = sum phi(k) v^T [1 + d' + d'^2, Dh] and z = sum phi(k): fixed in
the length, growing with d'^2 (the recall-throughput knob of Sec. 4). Sliding-window attention
(Sec. 4.2; `models/sliding_window.py`) adds exact local retrieval over the last `window` positions.

Layers (pre-norm blocks x += mixer(LN(x)); x += FFN(LN(x)), the transformer's embeddings and
initialisation): even layers Taylor linear attention, odd layers sliding window. Departures: the
paper's language models also interleave short gated convolutions (BaseConv, Sec. 4.3) and put
linear attention in a minority of layers; here the two attentions alternate 1:1 and there are no
convolution layers, so that the architecture is the two primitives the paper's name stands for.
The fast form is the quadratic masked form computed from s directly (no features); the recurrent
reference carries S and z in feature space, so the test also checks the feature map.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..checks import int_at_least, positive_int, positive_number
from .base import ResidualStack, TaskShape
from .capacity import match_widths, meta_params
from .layers import EnsembleLinear, residual_std
from .registry import register_model
from .sliding_window import Block, SlidingWindowAttention, check_heads


@dataclass(frozen=True)
class BasedConfig:
    n_layer: int = 2
    n_head: int = 2
    d_model: int = 64
    d_ffn: int = 256
    feature_dim: int = 16  # d': the q/k width per head of the Taylor linear attention (the paper's 16)
    window: int = 64  # the sliding window's keys per query, its own included (the paper's 64)
    eps: float = 1e-6

    def __post_init__(self) -> None:
        for f in ("n_layer", "n_head", "d_model", "d_ffn", "feature_dim"):
            positive_int(f, getattr(self, f))
        check_heads(self.d_model, self.n_head)
        int_at_least("window", self.window, 1, "the number of positions each query attends to, its own included")
        positive_number("eps", self.eps, "added to the normaliser")


def taylor_features(x: Tensor) -> Tensor:
    """phi(x) [..., 1 + d' + d'^2] of x [..., d']: phi(q) . phi(k) = 1 + s + s^2/2, s = q.k / sqrt(d')."""
    d = x.shape[-1]
    outer = (x.unsqueeze(-1) * x.unsqueeze(-2)).flatten(-2) / (math.sqrt(2.0) * math.sqrt(d))
    return torch.cat([torch.ones_like(x[..., :1]), x / d ** 0.25, outer], -1)


class TaylorLinearAttention(nn.Module):
    """Multi-head normalised linear attention with the Taylor feature map, [E, B, L, d] -> same."""

    def __init__(self, E: int, cfg: BasedConfig) -> None:
        super().__init__()
        self.cfg = cfg
        H, Df = cfg.n_head, cfg.feature_dim
        self.qk = EnsembleLinear(E, cfg.d_model, 2 * H * Df, bias=False)
        self.v = EnsembleLinear(E, cfg.d_model, cfg.d_model, bias=False)
        self.proj = EnsembleLinear(E, cfg.d_model, cfg.d_model, bias=False, init_std=residual_std(2 * cfg.n_layer))

    def forward(self, x: Tensor) -> Tensor:
        E, B, L, d = x.shape
        H, Df = self.cfg.n_head, self.cfg.feature_dim
        q, k = self.qk(x).view(E, B, L, 2, H, Df).permute(3, 0, 1, 4, 2, 5).unbind(0)  # [E, B, H, L, Df]
        v = self.v(x).view(E, B, L, H, d // H).transpose(2, 3)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(Df)
        weights = (1 + s + 0.5 * s * s).tril()  # phi(q).phi(k), causal
        y = (weights @ v) / (weights.sum(-1, keepdim=True) + self.cfg.eps)
        return self.proj(y.transpose(2, 3).reshape(E, B, L, d))

    def recurrent_step(self, x: Tensor, state: dict[str, Tensor] | None) -> tuple[Tensor, dict[str, Tensor]]:
        """One position: S += phi(k) v^T [E, B, H, 1 + d' + d'^2, Dh], z += phi(k);
        y = phi(q)^T S / (phi(q).z + eps)."""
        E, B, d = x.shape
        H, Df = self.cfg.n_head, self.cfg.feature_dim
        q, k = self.qk(x).view(E, B, 2, H, Df).unbind(2)
        v = self.v(x).view(E, B, H, d // H)
        fq, fk = taylor_features(q), taylor_features(k)
        S, z = fk.unsqueeze(-1) * v.unsqueeze(-2), fk
        if state is not None:
            S, z = state["S"] + S, state["z"] + z
        num = torch.einsum("abhf,abhfv->abhv", fq, S)
        den = (fq * z).sum(-1, keepdim=True)
        return self.proj((num / (den + self.cfg.eps)).reshape(E, B, d)), {"S": S, "z": z}


class Based(ResidualStack):
    """E independent Based stacks: tokens [E, B, L] (+ header) -> logits [E, B, L, C]."""

    def __init__(self, shape: TaskShape, cfg: BasedConfig, ensemble: int = 1) -> None:
        blocks = []
        for i in range(cfg.n_layer):
            mixer = (TaylorLinearAttention(ensemble, cfg) if i % 2 == 0 else
                     SlidingWindowAttention(ensemble, cfg.d_model, cfg.n_head, cfg.window, cfg.n_layer))
            blocks.append(Block(ensemble, cfg.d_model, cfg.d_ffn, cfg.n_layer, mixer))
        super().__init__(shape, ensemble, cfg.d_model, blocks)
        self.cfg = cfg


def match_based(shape: TaskShape, target: int, *, n_layer: int = 2, n_head: int = 2, tolerance: float = 0.01,
                **cfg) -> BasedConfig:
    """n_layer layers of n_head heads within tolerance of target: d_model (a multiple of n_head,
    d_ffn = 4 d_model), then d_ffn."""
    if "d_model" in cfg or "d_ffn" in cfg:
        raise ValueError("match_based fits d_model and d_ffn itself; do not give them")
    positive_int("n_head", n_head)

    def make(d: int, f: int) -> BasedConfig:
        return BasedConfig(n_layer=n_layer, n_head=n_head, d_model=d, d_ffn=f, **cfg)

    d, f = match_widths(lambda d, f: meta_params(lambda: Based(shape, make(d, f))), target,
                        default_fine=lambda d: 4 * d, coarse_step=n_head, tolerance=tolerance, what="Based model")
    return make(d, f)


@register_model("based", "Based: Taylor-feature linear attention alternating with sliding-window attention",
                config=BasedConfig)
def build_based(shape: TaskShape, ensemble: int, match_params: int | None = None, **cfg) -> Based:
    """BasedConfig fields directly, or match_params=N (with n_layer, n_head, ...) to fit widths."""
    config = BasedConfig(**cfg) if match_params is None else match_based(shape, int(match_params), **cfg)
    return Based(shape, config, ensemble)
