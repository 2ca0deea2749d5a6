"""Paper II's toy: one causal attention head, no residual stream, no LayerNorm, no FFN.

  x = embed(tokens);  q = x W_Q, k = x W_K, v = x W_V (no biases);
  alpha = softmax(q k^T / sqrt(d_head) + causal mask);  g_i = sum_j alpha_ij v_j;  logits = g W_O.
W_O maps the context g straight to the C classes, so the upstream gradient u_i = dL/dg_i =
W_O^T (p_i - y_i) and b_ij = u_i . v_j are exactly the quantities of Paper II's analysis
(`internals` returns q, k, v, alpha, g for such probes). All weights, embeddings included, are
drawn N(0, init_std^2) with init_std = 0.1 by default (Paper II's setting).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ..checks import positive_int, positive_number
from .attention import attention_weights
from .base import EnsembleModel, InputEmbedding, TaskShape
from .capacity import match_widths, meta_params
from .layers import EnsembleLinear
from .registry import register_model


@dataclass(frozen=True)
class ToyAttentionConfig:
    d_model: int = 64  # embedding and value width
    d_head: int | None = None  # query/key width, default d_model; the fine matching knob
    init_std: float = 0.1

    def __post_init__(self) -> None:
        positive_int("d_model", self.d_model)
        if self.d_head is not None:
            positive_int("d_head", self.d_head)
        positive_number("init_std", self.init_std, "the initial weights' standard deviation")

    @property
    def qk_dim(self) -> int:
        return self.d_model if self.d_head is None else self.d_head


class ToyAttention(EnsembleModel):
    """E independent one-head attention toys: tokens [E, B, L] (+ header) -> logits [E, B, L, C]."""

    def __init__(self, shape: TaskShape, cfg: ToyAttentionConfig, ensemble: int = 1) -> None:
        super().__init__(shape, ensemble)
        self.cfg = cfg
        d, dk, std = cfg.d_model, cfg.qk_dim, cfg.init_std
        self.embed = InputEmbedding(ensemble, shape, d, init_std=std)
        self.W_Q = EnsembleLinear(ensemble, d, dk, bias=False, init_std=std)
        self.W_K = EnsembleLinear(ensemble, d, dk, bias=False, init_std=std)
        self.W_V = EnsembleLinear(ensemble, d, d, bias=False, init_std=std)
        self.W_O = EnsembleLinear(ensemble, d, shape.num_classes, bias=False, init_std=std)

    def internals(self, tokens: Tensor, header: Tensor | None = None) -> dict[str, Tensor]:
        """Every intermediate: x, q, k, v [E, B, L, *], alpha [E, B, L, L], g [E, B, L, d], logits."""
        self.check_inputs(tokens, header)
        x = self.embed(tokens, header)
        q, k, v = self.W_Q(x), self.W_K(x), self.W_V(x)
        alpha = attention_weights(q, k, causal=True, scale=1 / math.sqrt(self.cfg.qk_dim))
        g = alpha @ v
        return {"x": x, "q": q, "k": k, "v": v, "alpha": alpha, "g": g, "logits": self.W_O(g)}

    def forward(self, tokens: Tensor, header: Tensor | None = None) -> Tensor:
        return self.internals(tokens, header)["logits"]

    #: the toy's one mixer is the model itself, from its embedding on (`models.state`): its input is
    #: the output of this submodule, and `mix` is its fast form over x [E, B, L, d]
    recurrent_input = "embed"

    def mix(self, x: Tensor) -> Tensor:
        """The logits from the embeddings x [E, B, L, d] (what `internals` computes after `embed`)."""
        alpha = attention_weights(self.W_Q(x), self.W_K(x), causal=True, scale=1 / math.sqrt(self.cfg.qk_dim))
        return self.W_O(alpha @ self.W_V(x))

    def recurrent_step(self, x: Tensor, state: dict[str, Tensor] | None) -> tuple[Tensor, dict[str, Tensor]]:
        """One position of the embeddings x [E, B, d] against the K and V cache of the positions before
        it ([E, B, t, d_head] and [E, B, t, d], grown by this one): the logits at that position."""
        q, k, v = self.W_Q(x).unsqueeze(2), self.W_K(x).unsqueeze(2), self.W_V(x).unsqueeze(2)
        if state is not None:
            k, v = torch.cat([state["k"], k], 2), torch.cat([state["v"], v], 2)
        alpha = torch.softmax((q @ k.transpose(-1, -2)) / math.sqrt(self.cfg.qk_dim), dim=-1)
        return self.W_O((alpha @ v).squeeze(2)), {"k": k, "v": v}


def match_toy_attention(shape: TaskShape, target: int, *, tolerance: float = 0.01,
                        init_std: float = 0.1) -> ToyAttentionConfig:
    """A toy config within tolerance of target: d_model (with d_head = d_model), then d_head."""

    def make(d: int, dk: int | None) -> ToyAttentionConfig:  # dk None: d_head = d_model
        return ToyAttentionConfig(d_model=d, d_head=dk, init_std=init_std)

    d, dk = match_widths(lambda d, dk: meta_params(lambda: ToyAttention(shape, make(d, dk))), target,
                         default_fine=lambda d: d, tolerance=tolerance, what="toy attention")
    return make(d, None if dk == d else dk)


@register_model("toy-attention", "Paper II toy: one causal attention head, no residual/LayerNorm, W_O to logits",
                config=ToyAttentionConfig)
def build_toy_attention(shape: TaskShape, ensemble: int, match_params: int | None = None,
                        **cfg) -> ToyAttention:
    """ToyAttentionConfig fields directly, or match_params=N to fit d_model and d_head."""
    config = (ToyAttentionConfig(**cfg) if match_params is None
              else match_toy_attention(shape, int(match_params), **cfg))
    return ToyAttention(shape, config, ensemble)
