"""A GPT-style causal transformer, ensemble-native (nanoGPT's model.py is the style anchor).

Pre-norm blocks x += attn(ln(x)); x += mlp(ln(x)), learned token and absolute position
embeddings, a final LayerNorm and a linear head onto the task's C classes. Attention folds the
ensemble into the batch ([E*B, H, T, Dh]) so one SDPA (or Triton) call serves every member.

Ablation (Paper I): `attn_off_top=k` removes attention from the top k blocks (their FFNs and
residuals stay); registered as `transformer-no-late-attention` with k = 2.

Pointer (`pointer`): "replace" or "add" gives the authors' bijection training model (their
`TinyGPT(pointer_lookup=True)`, `bayesbench.models.pointer`): at the final query, the logits are
a softmax over the context keys' hidden states scattered onto their paired values.

Positions (`position`): "learned" (the papers' absolute position table, default) or "rope"
(rotary embeddings: q and k of every head are rotated by an angle proportional to the position,
so attention scores depend on relative offsets only and no table row is left untrained past the
training length; Su et al., "RoFormer", arXiv 2104.09864). Length generalisation is then a
property of the architecture rather than of the embedding table (docs/reproducing.md).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..checks import SettingError, boolean, number_in, one_of, positive_int
from .attention import softmax_attention
from .base import ResidualStack, TaskShape, modules_as
from .layers import EnsembleLayerNorm, EnsembleLinear, residual_std

if TYPE_CHECKING:  # bayesbench.kernels is imported lazily, where a probed backend runs
    from ..kernels.probe import AttentionProbe
from .pointer import POINTER_MODES, PointerLookup, check_pointer_shape, combine_pointer
from .registry import register_model

ATTENTION_BACKENDS = ("sdpa", "eager", "triton", "reference")
PROBE_BACKENDS = ("eager", "triton", "reference")  # the backends whose backward fills a probe
POSITIONS = ("learned", "rope")
ROPE_BASE = 10000.0


@dataclass(frozen=True)
class TransformerConfig:
    n_layer: int = 6
    n_head: int = 6
    d_model: int = 192
    d_ffn: int = 768
    dropout: float = 0.0
    bias: bool = True
    attention: str = "sdpa"
    attn_off_top: int = 0  # ablation: blocks n_layer-k..n_layer-1 have no attention
    position: str = "learned"  # "learned" absolute table or "rope" (rotary q/k)
    pointer: str = "none"  # "replace" / "add": the authors' pointer head at the bijection's query

    def __post_init__(self) -> None:
        for f in ("n_layer", "n_head", "d_model", "d_ffn"):
            positive_int(f, getattr(self, f))
        if self.d_model % self.n_head:
            raise SettingError(f"d_model ({self.d_model}) must be divisible by n_head ({self.n_head})",
                               ("d_model", "n_head"))
        number_in("dropout", self.dropout, 0, 1, high_open=True)
        boolean("bias", self.bias)
        if isinstance(self.attn_off_top, bool) or not isinstance(self.attn_off_top, int) \
                or not 0 <= self.attn_off_top <= self.n_layer:
            raise SettingError(f"attn_off_top must be an integer in [0, n_layer={self.n_layer}], "
                               f"got {self.attn_off_top!r}", ("attn_off_top", "n_layer"))
        one_of("attention", self.attention, ATTENTION_BACKENDS)
        check_backend_dropout(self.attention, self.dropout)
        one_of("pointer", self.pointer, POINTER_MODES)
        one_of("position", self.position, POSITIONS)
        if self.position == "rope" and (self.d_model // self.n_head) % 2:
            raise SettingError(f"position='rope' needs an even head dimension, got d_model/n_head = "
                               f"{self.d_model}/{self.n_head} = {self.d_model // self.n_head}",
                               ("position", "d_model", "n_head"))


def rotary(x: Tensor, base: float = ROPE_BASE) -> Tensor:
    """Rotary position embedding of x [..., T, Dh] (Dh even): channel pairs (i, i + Dh/2) at
    position t are rotated by the angle t * base^(-2i/Dh). Then rotary(q)_m . rotary(k)_n depends
    on q, k and m - n only."""
    T, Dh = x.shape[-2], x.shape[-1]
    half = Dh // 2
    inv_freq = base ** (-torch.arange(half, device=x.device, dtype=torch.float64) / half)
    angle = torch.arange(T, device=x.device, dtype=torch.float64)[:, None] * inv_freq[None, :]  # [T, half]
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


def rotary_at(x: Tensor, position: int, base: float = ROPE_BASE) -> Tensor:
    """`rotary` of x [..., Dh] for the single position `position` (the recurrent reference's one step)."""
    Dh = x.shape[-1]
    half = Dh // 2
    inv_freq = base ** (-torch.arange(half, device=x.device, dtype=torch.float64) / half)
    angle = float(position) * inv_freq
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


def check_backend_dropout(backend: str, dropout: float) -> None:
    """The Triton kernel and the reference have no attention dropout: refuse rather than silently
    train another model."""
    if backend in ("triton", "reference") and dropout > 0:
        raise ValueError(f"attention={backend!r} has no attention dropout; use dropout=0 or attention='sdpa' "
                         f"(got dropout={dropout})")


def triton_attention(q: Tensor, k: Tensor, v: Tensor, probe=None) -> Tensor:
    """The instrumented Triton kernel of `bayesbench.kernels` (imported on first use)."""
    try:
        from bayesbench.kernels import attention, triton_available
    except ImportError as err:
        raise RuntimeError(f"attention='triton' needs bayesbench.kernels, which failed to import ({err}); "
                           "use attention='sdpa' or 'eager'") from err
    if not triton_available():
        raise RuntimeError("attention='triton' needs the triton package and a CUDA GPU (or TRITON_INTERPRET=1 "
                           "set before triton is imported); use attention='sdpa' or 'eager'")
    return attention(q, k, v, causal=True, probe=probe)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention over [E, B, T, d] with E folded into the batch.

    `probe` is the hook for Paper II's routing-law instrumentation: set it (an
    `bayesbench.kernels.AttentionProbe`) with attention 'triton' (fused kernels), 'reference'
    (explicit PyTorch backward) or 'eager' (autograd hooks); the next backward fills it.
    """

    def __init__(self, E: int, cfg: TransformerConfig) -> None:
        super().__init__()
        self.n_head, self.d_model, self.backend, self.dropout = cfg.n_head, cfg.d_model, cfg.attention, cfg.dropout
        self.rope = cfg.position == "rope"
        self.qkv = EnsembleLinear(E, cfg.d_model, 3 * cfg.d_model, bias=cfg.bias)
        self.proj = EnsembleLinear(E, cfg.d_model, cfg.d_model, bias=cfg.bias, init_std=residual_std(2 * cfg.n_layer))
        self.probe: AttentionProbe | None = None

    def forward(self, x: Tensor) -> Tensor:
        E, B, T, d = x.shape
        H = self.n_head
        qkv = self.qkv(x).view(E * B, T, 3, H, d // H).permute(2, 0, 3, 1, 4)  # [3, E*B, H, T, Dh]
        q, k, v = qkv.unbind(0)  # one view op; its backward is one stack (three selects would be three)
        if self.rope:
            q, k = rotary(q), rotary(k)
        if self.backend == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               dropout_p=self.dropout if self.training else 0.0)
        elif self.backend == "eager" and self.probe is None:
            y = softmax_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0)
        elif self.backend == "eager":  # autograd with hooks fills the probe (no attention dropout)
            from bayesbench.kernels.reference import eager_attention as probed_eager
            y = probed_eager(q, k, v, causal=True, probe=self.probe)
        elif self.backend == "reference":
            from bayesbench.kernels.reference import reference_attention
            y = reference_attention(q, k, v, causal=True, probe=self.probe)
        else:
            y = triton_attention(q, k, v, probe=self.probe)
        y = y.transpose(1, 2).reshape(E, B, T, d)
        return F.dropout(self.proj(y), self.dropout, self.training)

    def recurrent_step(self, x: Tensor, state: dict[str, Tensor] | None) -> tuple[Tensor, dict[str, Tensor]]:
        """One position of x [E, B, d] against the K and V cache of the positions before it
        ([E, B, H, t, Dh] each, grown by this position's): the inference path (no dropout), the
        reference `forward` is tested against and what `models.state` counts (grows with t)."""
        E, B, d = x.shape
        H = self.n_head
        q, k, v = self.qkv(x).view(E, B, 3, H, 1, d // H).unbind(2)  # [E, B, H, 1, Dh]
        t = 0 if state is None else state["k"].shape[3]
        if self.rope:
            q, k = rotary_at(q, t), rotary_at(k, t)
        if state is not None:
            k, v = torch.cat([state["k"], k], 3), torch.cat([state["v"], v], 3)
        weights = torch.softmax((q @ k.transpose(-1, -2)) / math.sqrt(d // H), dim=-1)  # [E, B, H, 1, t+1]
        y = (weights @ v).reshape(E, B, d)
        return self.proj(y), {"k": k, "v": v}


class FeedForward(nn.Module):
    def __init__(self, E: int, cfg: TransformerConfig) -> None:
        super().__init__()
        self.fc = EnsembleLinear(E, cfg.d_model, cfg.d_ffn, bias=cfg.bias)
        self.proj = EnsembleLinear(E, cfg.d_ffn, cfg.d_model, bias=cfg.bias, init_std=residual_std(2 * cfg.n_layer))
        self.dropout = cfg.dropout

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(self.proj(F.gelu(self.fc(x))), self.dropout, self.training)


class Block(nn.Module):
    """Pre-norm block; with attention=False only the FFN sublayer (the ablation's late blocks)."""

    def __init__(self, E: int, cfg: TransformerConfig, attention: bool = True) -> None:
        super().__init__()
        self.ln_1 = EnsembleLayerNorm(E, cfg.d_model) if attention else None
        self.attn = CausalSelfAttention(E, cfg) if attention else None
        self.ln_2 = EnsembleLayerNorm(E, cfg.d_model)
        self.mlp = FeedForward(E, cfg)

    def forward(self, x: Tensor) -> Tensor:
        if self.attn is not None and self.ln_1 is not None:  # both or neither
            x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Transformer(ResidualStack):
    """E independent causal transformers: tokens [E, B, L] (+ header) -> logits [E, B, L, C]."""

    def __init__(self, shape: TaskShape, cfg: TransformerConfig, ensemble: int = 1) -> None:
        first_off = cfg.n_layer - cfg.attn_off_top
        blocks = [Block(ensemble, cfg, attention=i < first_off) for i in range(cfg.n_layer)]
        check_pointer_shape(cfg.pointer, shape.vocab_size, shape.num_classes, shape.header_len)
        super().__init__(shape, ensemble, cfg.d_model, blocks, head_bias=cfg.bias, embed_dropout=cfg.dropout,
                         learned_positions=cfg.position == "learned")
        self.cfg = cfg
        # the pointer head as a module (no parameters): its recurrent reference is counted in the state
        self.pointer = PointerLookup(shape.num_classes) if cfg.pointer != "none" else None

    def forward(self, tokens: Tensor, header: Tensor | None = None) -> Tensor:
        if self.pointer is None:
            return super().forward(tokens, header)
        hidden = self.features(tokens, header)
        return combine_pointer(self.head(hidden), self.pointer(hidden, tokens), self.cfg.pointer)

    def dummy_tokens(self, length: int) -> Tensor:
        """Tokens [length] of the layout the pointer head reads (key 0, value 0, ...; zeros without it),
        for `models.state`'s dummy batch."""
        tokens = torch.zeros(length, dtype=torch.long)
        if self.pointer is not None:
            tokens[1::2] = self.shape.num_classes  # value classes start at C
        return tokens

    def param_breakdown(self) -> dict[str, int]:
        """The base's, without the pointer head (no parameters; a row's breakdown stays as it was)."""
        return {name: n for name, n in super().param_breakdown().items() if name != "pointer"}

    def typed_blocks(self) -> list[Block]:
        """The blocks as `Block`s (nn.ModuleList types its items as plain modules), for code that
        reads a block's attention or feed-forward."""
        return modules_as(self.blocks, Block)

    def set_attention(self, backend: str) -> None:
        """Switch every layer's attention backend (e.g. to 'eager' for a reference check)."""
        if backend not in ATTENTION_BACKENDS:
            raise ValueError(f"backend must be one of {ATTENTION_BACKENDS}, got {backend!r}")
        check_backend_dropout(backend, self.cfg.dropout)
        blocks = self.typed_blocks()
        for layer, block in enumerate(blocks):
            if block.attn is not None:
                _check_probe_backend(layer, backend, block.attn.probe)
        for block in blocks:
            if block.attn is not None:
                block.attn.backend = backend

    def set_probe(self, probe, layer: int) -> None:
        """Attach an attention probe to one layer (filled by the 'triton', 'reference' or 'eager'
        backward); None detaches it."""
        attn = self.typed_blocks()[layer].attn
        if attn is None:
            raise ValueError(f"layer {layer} has no attention (attn_off_top={self.cfg.attn_off_top})")
        _check_probe_backend(layer, attn.backend, probe)
        if probe is not None and self.cfg.dropout > 0:
            raise ValueError(f"probes need dropout=0 (the probed attention backwards have no attention dropout), "
                             f"got dropout={self.cfg.dropout}")
        attn.probe = probe


def _check_probe_backend(layer: int, backend: str, probe) -> None:
    """A probe is filled only by the backwards of PROBE_BACKENDS: a layer never holds one with 'sdpa'."""
    if probe is not None and backend not in PROBE_BACKENDS:
        raise ValueError(f"probes are filled by the {PROBE_BACKENDS} attention backwards; layer {layer} would use "
                         f"{backend!r} (set_attention('triton') first, or set_probe(None, {layer}) to detach)")


# The papers' named model sizes (Paper I's bijection and HMM transformers): `size="paper-hmm"`.
# Not experiment presets (`bayesbench.presets`), which choose tasks, sizes, steps and seeds.
SIZES = {
    "paper-bijection": TransformerConfig(n_layer=6, n_head=6, d_model=192, d_ffn=768),
    "paper-hmm": TransformerConfig(n_layer=9, n_head=8, d_model=256, d_ffn=1024),
}


def transformer_config(size: str | None = None, **overrides) -> TransformerConfig:
    """A TransformerConfig from a named size (paper-bijection, paper-hmm) plus overrides."""
    if size is None:
        return TransformerConfig(**overrides)
    one_of("size", size, tuple(SIZES))
    return dataclasses.replace(SIZES[size], **overrides)


@register_model("transformer", "GPT-style causal transformer: pre-norm blocks, learned token/position embeddings",
                config=TransformerConfig)
def build_transformer(shape: TaskShape, ensemble: int, size: str | None = None, **cfg) -> Transformer:
    return Transformer(shape, transformer_config(size, **cfg), ensemble)


@register_model("transformer-no-late-attention",
                "Paper I ablation: the transformer with attention removed from the top k blocks (default 2)",
                config=TransformerConfig)
def build_no_late_attention(shape: TaskShape, ensemble: int, size: str | None = None, attn_off_top: int = 2,
                            **cfg) -> Transformer:
    return Transformer(shape, transformer_config(size, attn_off_top=attn_off_top, **cfg), ensemble)
