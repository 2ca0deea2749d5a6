"""Causal linear attention (Katharopoulos et al. 2020) in pre-norm transformer blocks.

Softmax-free, kernelised routing: with phi(x) = elu(x) + 1 > 0,
  out_t = phi(q_t)^T S_t / (phi(q_t) . z_t + eps),  S_t = sum_{s<=t} phi(k_s) v_s^T,  z_t = sum_{s<=t} phi(k_s),
computed with cumulative sums over time (the "RNN form", memory [.., L, Dh, Dh]); the quadratic
masked form is the reference the tests compare against. Blocks are the transformer's (x +=
attn(LN(x)); x += FFN(LN(x))) with the same parameter shapes, so a linear-attention model has
exactly the transformer's count at the same n_layer / n_head / d_model / d_ffn.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..checks import SettingError, one_of, positive_int, positive_number
from .base import ResidualStack, TaskShape
from .capacity import match_widths, meta_params
from .layers import EnsembleLayerNorm, EnsembleLinear, residual_std
from .registry import register_model

FORMS = ("cumsum", "quadratic")


@dataclass(frozen=True)
class LinearAttentionConfig:
    n_layer: int = 6
    n_head: int = 6
    d_model: int = 192
    d_ffn: int = 768
    eps: float = 1e-6
    form: str = "cumsum"

    def __post_init__(self) -> None:
        for f in ("n_layer", "n_head", "d_model", "d_ffn"):
            positive_int(f, getattr(self, f))
        if self.d_model % self.n_head:
            raise SettingError(f"d_model ({self.d_model}) must be divisible by n_head ({self.n_head})",
                               ("d_model", "n_head"))
        positive_number("eps", self.eps, "added to the normaliser")
        one_of("form", self.form, FORMS)


def feature_map(x: Tensor) -> Tensor:
    """phi(x) = elu(x) + 1: positive, so the normaliser never vanishes."""
    return F.elu(x) + 1.0


def causal_linear_attention(q: Tensor, k: Tensor, v: Tensor, eps: float = 1e-6) -> Tensor:
    """[..., L, Dh] -> [..., L, Dv] via running sums of phi(k) v^T and phi(k) (linear in L)."""
    fq, fk = feature_map(q), feature_map(k)
    state = torch.cumsum(fk.unsqueeze(-1) * v.unsqueeze(-2), dim=-3)  # [..., L, Dh, Dv]
    num = torch.einsum("...ld,...lde->...le", fq, state)
    den = (fq * torch.cumsum(fk, dim=-2)).sum(-1, keepdim=True)
    return num / (den + eps)


def causal_linear_attention_ref(q: Tensor, k: Tensor, v: Tensor, eps: float = 1e-6) -> Tensor:
    """The same map in its quadratic form: (phi(q) phi(k)^T masked causally) v, row-normalised."""
    fq, fk = feature_map(q), feature_map(k)
    weights = (fq @ fk.transpose(-2, -1)).tril()
    return (weights @ v) / (weights.sum(-1, keepdim=True) + eps)


class LinearSelfAttention(nn.Module):
    """Multi-head causal linear attention over [E, B, L, d] with E folded into the batch."""

    def __init__(self, E: int, cfg: LinearAttentionConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.qkv = EnsembleLinear(E, cfg.d_model, 3 * cfg.d_model)
        self.proj = EnsembleLinear(E, cfg.d_model, cfg.d_model, init_std=residual_std(2 * cfg.n_layer))

    def forward(self, x: Tensor) -> Tensor:
        E, B, L, d = x.shape
        H = self.cfg.n_head
        qkv = self.qkv(x).view(E * B, L, 3, H, d // H).permute(2, 0, 3, 1, 4)  # [3, E*B, H, L, Dh]
        attend = causal_linear_attention if self.cfg.form == "cumsum" else causal_linear_attention_ref
        y = attend(qkv[0], qkv[1], qkv[2], self.cfg.eps)
        return self.proj(y.transpose(1, 2).reshape(E, B, L, d))

    def recurrent_step(self, x: Tensor, state: dict[str, Tensor] | None) -> tuple[Tensor, dict[str, Tensor]]:
        """One position: S += phi(k) v^T and z += phi(k) per head ([E, B, H, Dh, Dh] and [E, B, H, Dh],
        the state carried), out = phi(q)^T S / (phi(q) . z + eps) (Katharopoulos et al. 2020, Sec. 3.4,
        the RNN form)."""
        E, B, d = x.shape
        H = self.cfg.n_head
        q, k, v = self.qkv(x).view(E, B, 3, H, d // H).unbind(2)
        fq, fk = feature_map(q), feature_map(k)
        S = fk.unsqueeze(-1) * v.unsqueeze(-2)
        z = fk
        if state is not None:
            S, z = state["S"] + S, state["z"] + z
        num = torch.einsum("abhd,abhdv->abhv", fq, S)
        den = (fq * z).sum(-1, keepdim=True)
        return self.proj((num / (den + self.cfg.eps)).reshape(E, B, d)), {"S": S, "z": z}


class Block(nn.Module):
    def __init__(self, E: int, cfg: LinearAttentionConfig) -> None:
        super().__init__()
        self.ln_1 = EnsembleLayerNorm(E, cfg.d_model)
        self.attn = LinearSelfAttention(E, cfg)
        self.ln_2 = EnsembleLayerNorm(E, cfg.d_model)
        self.fc = EnsembleLinear(E, cfg.d_model, cfg.d_ffn)
        self.fc_proj = EnsembleLinear(E, cfg.d_ffn, cfg.d_model, init_std=residual_std(2 * cfg.n_layer))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x))))


class LinearAttention(ResidualStack):
    """E independent linear-attention transformers: tokens [E, B, L] (+ header) -> logits [E, B, L, C]."""

    def __init__(self, shape: TaskShape, cfg: LinearAttentionConfig, ensemble: int = 1) -> None:
        super().__init__(shape, ensemble, cfg.d_model, [Block(ensemble, cfg) for _ in range(cfg.n_layer)])
        self.cfg = cfg


def match_linear_attention(shape: TaskShape, target: int, *, n_layer: int = 6, n_head: int = 6,
                           tolerance: float = 0.01, **cfg) -> LinearAttentionConfig:
    """A config of n_layer blocks and n_head heads within tolerance of target: d_model (a
    multiple of n_head, with d_ffn = 4 d_model), then d_ffn."""
    if "d_model" in cfg or "d_ffn" in cfg:
        raise ValueError("match_linear_attention fits d_model and d_ffn itself; do not give them")

    def make(d: int, f: int) -> LinearAttentionConfig:
        return LinearAttentionConfig(n_layer=n_layer, n_head=n_head, d_model=d, d_ffn=f, **cfg)

    d, f = match_widths(lambda d, f: meta_params(lambda: LinearAttention(shape, make(d, f))), target,
                        default_fine=lambda d: 4 * d, coarse_step=n_head, tolerance=tolerance,
                        what="linear-attention model")
    return make(d, f)


@register_model("linear-attention", "causal linear attention (elu+1 features, cumulative sums), pre-norm blocks",
                config=LinearAttentionConfig)
def build_linear_attention(shape: TaskShape, ensemble: int, match_params: int | None = None,
                           **cfg) -> LinearAttention:
    """LinearAttentionConfig fields directly, or match_params=N (with n_layer, n_head) to fit widths."""
    config = (LinearAttentionConfig(**cfg) if match_params is None
              else match_linear_attention(shape, int(match_params), **cfg))
    return LinearAttention(shape, config, ensemble)
