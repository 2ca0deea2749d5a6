"""RetNet: retention with a fixed decay per head, ensemble-native, pure PyTorch.

Sun, Dong, Huang, Ma, Xia, Xue, Wang, Wei 2023, "Retentive Network: A Successor to Transformer for
Large Language Models", arXiv 2307.08621. Retention (Sec. 2.1) per head is the recurrence

    S_t = gamma S_{t-1} + k_t v_t^T,     o_t = S_t^T q_t,

with a fixed decay per head, gamma_h = 1 - 2^(-5 - h), h = 0..H-1 (multi-scale retention,
Sec. 2.2), trained in its chunkwise recurrent form (Sec. 2.1; `gated_recurrence_chunked` with a
constant scalar log decay) and checked against its recurrent form (`gated_recurrence_step`).

The layer (Sec. 2.2): Q = X W_Q, K = X W_K (width d_model, K scaled by d_head^-1/2), V = X W_V of
width 2 d_model (the value width doubled, as the paper's models do); Y = GroupNorm over heads (one
group per head, per-member affine); MSR(X) = (Swish(X W_G) * Y) W_O. The decays are not
parameters: they are a function of the head index, recomputed from the config.
Departures: no xPos rotation of Q and K (Sec. 2.1's Theta): every zoo model gets absolute
positions from its learned position embedding, and a rotation would add a position counter to the
recurrent state; the retention score normalisations of Sec. 2.2 are left
out because GroupNorm makes the output invariant to them (up to its eps). The zoo's LayerNorm/
GELU-FFN blocks and N(0, 0.02) init with residual-scaled output maps (`gated_recurrence.py`) in
place of the paper's DeepNet-style init.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..checks import SettingError, positive_int
from . import external_kernels
from .base import ResidualStack, TaskShape
from .gated_recurrence import (
    EnsembleHeadNorm,
    MixerBlock,
    State,
    gated_recurrence_chunked,
    gated_recurrence_step,
    match_d_model_and_ffn,
    meta_params,
)
from .layers import EnsembleLinear, residual_std
from .registry import register_model


@dataclass(frozen=True)
class RetNetConfig:
    n_layer: int = 2
    n_head: int = 2
    d_model: int = 64
    d_ffn: int = 256
    chunk: int = 16  # positions per chunk of the chunkwise form
    kernel: str = "torch"  # "torch" (any device) or an outside kernel on CUDA (`external_kernels`)

    def __post_init__(self) -> None:
        for f in ("n_layer", "n_head", "d_model", "d_ffn"):
            positive_int(f, getattr(self, f))
        positive_int("chunk", self.chunk, "positions per chunk of the chunkwise form")
        external_kernels.check_kernel(self.kernel, external_kernels.COVERED["retnet"])
        if self.d_model % self.n_head:
            raise SettingError(f"d_model ({self.d_model}) must be divisible by n_head ({self.n_head})",
                               ("d_model", "n_head"))


def retention_decays(n_head: int) -> Tensor:
    """gamma_h = 1 - 2^(-5 - h) for h = 0..n_head-1 (Sec. 2.2), in float64."""
    return 1.0 - torch.pow(2.0, -5.0 - torch.arange(n_head, dtype=torch.float64))


class MultiScaleRetention(nn.Module):
    """Multi-scale retention over [E, B, L, d] (module docstring)."""

    def __init__(self, E: int, cfg: RetNetConfig) -> None:
        super().__init__()
        d, H = cfg.d_model, cfg.n_head
        self.cfg, self.H, self.d = cfg, H, d
        self.qkv = EnsembleLinear(E, d, 4 * d, bias=False)  # q, k: d; v: 2d
        self.g_proj = EnsembleLinear(E, d, 2 * d, bias=False)
        self.norm = EnsembleHeadNorm(E, H, 2 * d // H, centre=True)
        self.o_proj = EnsembleLinear(E, 2 * d, d, bias=False, init_std=residual_std(2 * cfg.n_layer))

    def log_decay(self, x: Tensor) -> Tensor:
        """log gamma per head, [H, 1] in x's dtype and device."""
        return torch.log(retention_decays(self.H)).to(x.dtype).to(x.device).unsqueeze(-1)

    def _heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        q, k, v = self.qkv(x).split([self.d, self.d, 2 * self.d], dim=-1)
        k = k * (self.d // self.H) ** -0.5
        return q.unflatten(-1, (self.H, -1)), k.unflatten(-1, (self.H, -1)), v.unflatten(-1, (self.H, -1))

    def _out(self, o: Tensor, x: Tensor) -> Tensor:
        return self.o_proj(F.silu(self.g_proj(x)) * self.norm(o))

    def forward(self, x: Tensor) -> Tensor:
        E, B, L, d = x.shape
        q, k, v = (t.transpose(2, 3) for t in self._heads(x))  # [E, B, H, L, D]
        if self.cfg.kernel == "torch":
            g = self.log_decay(x).unsqueeze(-2).expand(self.H, L, 1)  # [H, L, 1], the same at every position
            o = gated_recurrence_chunked(q, k, v, g, self.cfg.chunk)
        else:
            external_kernels.check_device(self.cfg.kernel, x)
            o = external_kernels.retention(q, k, v, self.log_decay(x).squeeze(-1), kernel=self.cfg.kernel)
        return self._out(o.transpose(2, 3).reshape(E, B, L, 2 * d), x)

    def recurrent_step(self, x: Tensor, state: State | None) -> tuple[Tensor, State]:
        """x [E, B, d] at one position -> (y [E, B, d], {'S': the state [E, B, H, d/H, 2d/H]})."""
        E, B, d = x.shape
        q, k, v = self._heads(x)
        o, S = gated_recurrence_step(q, k, v, self.log_decay(x), None if state is None else state["S"])
        return self._out(o.reshape(E, B, 2 * d), x), {"S": S}


class RetNet(ResidualStack):
    """E independent RetNets: tokens [E, B, L] (+ header) -> logits [E, B, L, C]."""

    def __init__(self, shape: TaskShape, cfg: RetNetConfig, ensemble: int = 1) -> None:
        blocks = [MixerBlock(ensemble, cfg.d_model, cfg.d_ffn, MultiScaleRetention(ensemble, cfg), 2 * cfg.n_layer)
                  for _ in range(cfg.n_layer)]
        super().__init__(shape, ensemble, cfg.d_model, blocks)
        self.cfg = cfg


def match_retnet(shape: TaskShape, target: int, *, n_layer: int = 2, n_head: int = 2, tolerance: float = 0.01,
                 **cfg) -> RetNetConfig:
    """A RetNetConfig of n_layer blocks and n_head heads within tolerance of target: d_model (a
    multiple of n_head, d_ffn = 4 d_model), then d_ffn."""
    if "d_model" in cfg or "d_ffn" in cfg:
        raise ValueError("match_retnet fits d_model and d_ffn itself; do not give them")

    def make(d: int, f: int) -> RetNetConfig:
        return RetNetConfig(n_layer=n_layer, n_head=n_head, d_model=d, d_ffn=f, **cfg)

    d, f = match_d_model_and_ffn(lambda d, f: meta_params(lambda: RetNet(shape, make(d, f))), target,
                                 step=n_head, what="RetNet model", tolerance=tolerance)
    return make(d, f)


@register_model("retnet", "RetNet: multi-scale retention, fixed decay per head, chunkwise form (Sun et al. 2023)",
                config=RetNetConfig)
def build_retnet(shape: TaskShape, ensemble: int, match_params: int | None = None, **cfg) -> RetNet:
    """RetNetConfig fields directly, or match_params=N (with n_layer, n_head, ...) to fit widths."""
    config = RetNetConfig(**cfg) if match_params is None else match_retnet(shape, int(match_params), **cfg)
    return RetNet(shape, config, ensemble)
