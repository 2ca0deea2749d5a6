"""GLA: gated linear attention with data-dependent vector gates, ensemble-native, pure PyTorch.

Yang, Wang, Shen, Panda, Kim 2023, "Gated Linear Attention Transformers with Hardware-Efficient
Training", arXiv 2312.06635. Per head a matrix state S [Dk, Dv] decays per key channel with a
gate computed from the input (Sec. 4.1):

    S_t = diag(alpha_t) S_{t-1} + k_t v_t^T,     o_t = S_t^T q_t,

and the chunkwise form of Sec. 4.2 trains it (`gated_recurrence.gated_recurrence_chunked`, the
intra-chunk part with exact exp(b_t - b_s) factors in place of the paper's secondary chunking;
`gated_recurrence_step` is the recurrent reference).

The layer (Sec. 4.4, "GLA Transformer"): q = x W_q and k = x W_k of width d_model / 2, v = x W_v
of width d_model (the paper's d_k = d/2, d_v = d), split over n_head heads; the gate is low-rank
and slow: alpha_t = sigmoid(x W_a1 W_a2 + b_a)^(1/tau) with rank 16 and tau = 16 (so the initial
gates sit near 0.5^(1/16) ~ 0.96, slow forgetting); o = LayerNorm per head (per-member affine);
output (Swish(x W_r + b_r) * o) W_o. q is scaled by Dk^-1/2 per head (flash-linear-attention's
convention for the same layer). Departures (the zoo's, `gated_recurrence.py`): LayerNorm/GELU-FFN
blocks instead of RMSNorm/SwiGLU, and N(0, 0.02) init with residual-scaled output maps.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F
from torch import Tensor, nn

from ..checks import SettingError, positive_int, positive_number
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
class GLAConfig:
    n_layer: int = 2
    n_head: int = 2
    d_model: int = 64
    d_ffn: int = 256
    gate_rank: int = 16  # the low rank of the gate's projection (Sec. 4.4)
    gate_temperature: float = 16.0  # tau: alpha = sigmoid(.)^(1/tau) (Sec. 4.4)
    chunk: int = 16  # positions per chunk of the chunkwise form
    kernel: str = "torch"  # "torch" (any device) or an outside kernel on CUDA (`external_kernels`)

    def __post_init__(self) -> None:
        for f in ("n_layer", "n_head", "d_model", "d_ffn", "gate_rank"):
            positive_int(f, getattr(self, f))
        positive_number("gate_temperature", self.gate_temperature, "alpha = sigmoid(.)^(1/gate_temperature)")
        positive_int("chunk", self.chunk, "positions per chunk of the chunkwise form")
        external_kernels.check_kernel(self.kernel, external_kernels.COVERED["gla"])
        if self.d_model % (2 * self.n_head):
            raise SettingError(f"d_model ({self.d_model}) must be divisible by 2 * n_head ({2 * self.n_head}): "
                               "the key width d_model / 2 is split over the heads", ("d_model", "n_head"))


class GLAMixer(nn.Module):
    """Multi-head gated linear attention over [E, B, L, d] (module docstring)."""

    def __init__(self, E: int, cfg: GLAConfig) -> None:
        super().__init__()
        d, H = cfg.d_model, cfg.n_head
        self.cfg, self.H, self.dk, self.dv = cfg, H, d // 2, d
        self.qkv = EnsembleLinear(E, d, 2 * self.dk + self.dv, bias=False)
        self.gate_down = EnsembleLinear(E, d, cfg.gate_rank, bias=False)
        self.gate_up = EnsembleLinear(E, cfg.gate_rank, self.dk)
        self.r_proj = EnsembleLinear(E, d, self.dv)
        self.o_norm = EnsembleHeadNorm(E, H, self.dv // H, centre=True)
        self.o_proj = EnsembleLinear(E, self.dv, d, bias=False, init_std=residual_std(2 * cfg.n_layer))

    def gates(self, x: Tensor) -> Tensor:
        """log alpha = logsigmoid(x W_a1 W_a2 + b_a) / tau: [E, ..., dk], <= 0."""
        return F.logsigmoid(self.gate_up(self.gate_down(x))) / self.cfg.gate_temperature

    def _heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """q (scaled), k, v and log alpha of x [E, ..., d], split into heads [E, ..., H, D]."""
        H = self.H
        q, k, v = self.qkv(x).split([self.dk, self.dk, self.dv], dim=-1)
        q = q * (self.dk // H) ** -0.5
        return (q.unflatten(-1, (H, -1)), k.unflatten(-1, (H, -1)), v.unflatten(-1, (H, -1)),
                self.gates(x).unflatten(-1, (H, -1)))

    def _out(self, o: Tensor, x: Tensor) -> Tensor:
        return self.o_proj(F.silu(self.r_proj(x)) * self.o_norm(o))

    def forward(self, x: Tensor) -> Tensor:
        E, B, L, _ = x.shape
        q, k, v, g = (t.transpose(2, 3) for t in self._heads(x))  # [E, B, H, L, D]
        if self.cfg.kernel == "torch":
            o = gated_recurrence_chunked(q, k, v, g, self.cfg.chunk)
        else:
            external_kernels.check_device(self.cfg.kernel, x)
            o = external_kernels.gated_recurrence(q, k, v, g, kernel=self.cfg.kernel)
        return self._out(o.transpose(2, 3).reshape(E, B, L, self.dv), x)

    def recurrent_step(self, x: Tensor, state: State | None) -> tuple[Tensor, State]:
        """x [E, B, d] at one position -> (y [E, B, d], {'S': the state [E, B, H, dk/H, dv/H]})."""
        E, B, _ = x.shape
        q, k, v, g = self._heads(x)
        o, S = gated_recurrence_step(q, k, v, g, None if state is None else state["S"])
        return self._out(o.reshape(E, B, self.dv), x), {"S": S}


class GLA(ResidualStack):
    """E independent GLA transformers: tokens [E, B, L] (+ header) -> logits [E, B, L, C]."""

    def __init__(self, shape: TaskShape, cfg: GLAConfig, ensemble: int = 1) -> None:
        blocks = [MixerBlock(ensemble, cfg.d_model, cfg.d_ffn, GLAMixer(ensemble, cfg), 2 * cfg.n_layer)
                  for _ in range(cfg.n_layer)]
        super().__init__(shape, ensemble, cfg.d_model, blocks)
        self.cfg = cfg


def match_gla(shape: TaskShape, target: int, *, n_layer: int = 2, n_head: int = 2, tolerance: float = 0.01,
              **cfg) -> GLAConfig:
    """A GLAConfig of n_layer blocks and n_head heads within tolerance of target: d_model (a
    multiple of 2 n_head, d_ffn = 4 d_model), then d_ffn."""
    if "d_model" in cfg or "d_ffn" in cfg:
        raise ValueError("match_gla fits d_model and d_ffn itself; do not give them")

    def make(d: int, f: int) -> GLAConfig:
        return GLAConfig(n_layer=n_layer, n_head=n_head, d_model=d, d_ffn=f, **cfg)

    d, f = match_d_model_and_ffn(lambda d, f: meta_params(lambda: GLA(shape, make(d, f))), target,
                                 step=2 * n_head, what="GLA model", tolerance=tolerance)
    return make(d, f)


@register_model("gla", "GLA: gated linear attention, data-dependent vector gates, chunkwise form "
                       "(Yang et al. 2023)", config=GLAConfig)
def build_gla(shape: TaskShape, ensemble: int, match_params: int | None = None, **cfg) -> GLA:
    """GLAConfig fields directly, or match_params=N (with n_layer, n_head, ...) to fit widths."""
    config = GLAConfig(**cfg) if match_params is None else match_gla(shape, int(match_params), **cfg)
    return GLA(shape, config, ensemble)
