"""A hybrid: softmax-attention layers interleaved with a recurrent mixer, one attention layer every
`attn_every` layers (what Jamba, Lieber et al. 2024, arXiv 2403.19887, Sec. 2, and Zamba/Samba
build: a few attention layers for exact retrieval in a stack of fixed-state mixers).

Layer i (0-based) is the transformer's block (`models/transformer.py`: causal softmax attention and
an FFN) when (i + 1) is a multiple of `attn_every`, else the recurrent mixer's own block: `mamba`
(`models/mamba.py`'s MambaBlock: selective SSM, no FFN, as in Jamba's Mamba layers) or
`linear-attention` (`models/linear_attention.py`'s block, with its FFN). So `attn_every` = 2 with
4 layers is [mixer, attention, mixer, attention], and `attn_every` = n_layer puts one attention
layer on top. Each block keeps its own architecture's initialisation (the modules are those
architectures' own). Departures from Jamba: no mixture-of-experts FFNs, a 1:(attn_every - 1) ratio
chosen by the setting instead of its 1:7, learned absolute positions (every bayesbench model's).

State: the attention layers' KV caches (growing with the length) plus the mixers' fixed states.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from ..checks import SettingError, one_of, positive_int
from .base import ResidualStack, TaskShape
from .capacity import match_widths, meta_params
from .linear_attention import Block as LinearAttentionBlock
from .linear_attention import LinearAttentionConfig
from .mamba import MambaBlock, MambaConfig
from .registry import register_model
from .sliding_window import check_heads
from .transformer import Block as TransformerBlock
from .transformer import TransformerConfig

MIXERS = ("mamba", "linear-attention")


@dataclass(frozen=True)
class HybridConfig:
    n_layer: int = 4
    n_head: int = 2
    d_model: int = 64
    d_ffn: int = 256  # the attention (and linear-attention) blocks' FFN width; the fine matching knob
    attn_every: int = 2  # one attention layer every attn_every layers, in [2, n_layer]
    mixer: str = "mamba"

    def __post_init__(self) -> None:
        for f in ("n_layer", "n_head", "d_model", "d_ffn"):
            positive_int(f, getattr(self, f))
        check_heads(self.d_model, self.n_head)
        one_of("mixer", self.mixer, MIXERS)
        if isinstance(self.attn_every, bool) or not isinstance(self.attn_every, int) \
                or not 2 <= self.attn_every <= self.n_layer:
            raise SettingError(f"attn_every must be an integer in [2, n_layer={self.n_layer}] (one attention layer "
                               f"every attn_every layers: at least one of each kind), got {self.attn_every!r}",
                               ("attn_every", "n_layer"))

    def is_attention(self, layer: int) -> bool:
        return (layer + 1) % self.attn_every == 0


class Hybrid(ResidualStack):
    """E independent hybrids: tokens [E, B, L] (+ header) -> logits [E, B, L, C]."""

    def __init__(self, shape: TaskShape, cfg: HybridConfig, ensemble: int = 1) -> None:
        attention = TransformerConfig(n_layer=cfg.n_layer, n_head=cfg.n_head, d_model=cfg.d_model, d_ffn=cfg.d_ffn)
        blocks: list[nn.Module] = []
        for i in range(cfg.n_layer):
            if cfg.is_attention(i):
                blocks.append(TransformerBlock(ensemble, attention))
            elif cfg.mixer == "mamba":
                blocks.append(MambaBlock(ensemble, MambaConfig(n_layer=cfg.n_layer, d_model=cfg.d_model)))
            else:
                blocks.append(LinearAttentionBlock(ensemble, LinearAttentionConfig(
                    n_layer=cfg.n_layer, n_head=cfg.n_head, d_model=cfg.d_model, d_ffn=cfg.d_ffn)))
        super().__init__(shape, ensemble, cfg.d_model, blocks)
        self.cfg = cfg


def match_hybrid(shape: TaskShape, target: int, *, n_layer: int = 4, n_head: int = 2, tolerance: float = 0.01,
                 **cfg) -> HybridConfig:
    """n_layer layers of n_head heads within tolerance of target: d_model (a multiple of n_head,
    d_ffn = 4 d_model), then d_ffn."""
    if "d_model" in cfg or "d_ffn" in cfg:
        raise ValueError("match_hybrid fits d_model and d_ffn itself; do not give them")
    positive_int("n_head", n_head)

    def make(d: int, f: int) -> HybridConfig:
        return HybridConfig(n_layer=n_layer, n_head=n_head, d_model=d, d_ffn=f, **cfg)

    make(n_head, 4 * n_head)  # the settings' own rules first (attn_every against n_layer), not a fitting error
    d, f = match_widths(lambda d, f: meta_params(lambda: Hybrid(shape, make(d, f))), target,
                        default_fine=lambda d: 4 * d, coarse_step=n_head, tolerance=tolerance, what="hybrid model")
    return make(d, f)


@register_model("hybrid", "attention layers interleaved with a recurrent mixer (Mamba or linear attention), "
                          "one every attn_every layers", config=HybridConfig)
def build_hybrid(shape: TaskShape, ensemble: int, match_params: int | None = None, **cfg) -> Hybrid:
    """HybridConfig fields directly, or match_params=N (with n_layer, n_head, attn_every, mixer) to fit widths."""
    config = HybridConfig(**cfg) if match_params is None else match_hybrid(shape, int(match_params), **cfg)
    return Hybrid(shape, config, ensemble)
