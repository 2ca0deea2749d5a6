"""Gated DeltaNet: the delta rule with Mamba-2's decay gate, ensemble-native, pure PyTorch.

Yang, Kautz, Hatamizadeh 2024, "Gated Delta Networks: Improving Mamba2 with Delta Rule",
arXiv 2412.06464. The gated delta rule (Sec. 3.1):

    S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,     o_t = S_t^T q_t,

alpha_t in (0, 1] a data-dependent scalar per head that can erase the whole state at once (the
gate) while beta_t edits one key's slot (the delta rule). Its chunkwise form (Sec. 3.3, the WY
representation with the cumulative gate) is `deltanet.delta_rule_chunked` with a log decay; the
recurrent reference `deltanet.delta_rule_step`: one kernel for both architectures.

The layer (Sec. 3.4 and Fig. 1, as flash-linear-attention's GatedDeltaNet runs it): DeltaNet's
q, k, v (short conv, SiLU, q and k L2-normalised), beta_t = sigmoid(x W_beta), and
alpha_t = exp(-exp(A_log) softplus(x W_a + dt_bias)) per head, Mamba-2's parameterisation of the
decay with its initialisation: A ~ U(0, 16), A_log = log A, and dt = softplus(dt_bias)
log-uniform in [dt_min, dt_max] = [1e-3, 1e-1] (floored at 1e-4); output RMSNorm per head times
SiLU(x W_g), then W_o. A_log and dt_bias are excluded from weight decay (`_no_weight_decay`).
Departures: as DeltaNet's (`deltanet.py`): LayerNorm/GELU-FFN blocks of the zoo and its N(0, 0.02)
init of the projections; the value width is d_model (the paper's models expand it 2x; here the
heads' key and value widths are equal so the state is (d_model / H)^2 per head, like DeltaNet's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..checks import SettingError, positive_number
from .base import TaskShape
from .deltanet import DeltaNet, DeltaNetConfig, DeltaRuleMixer, match_deltanet
from .registry import register_model
from .scan import inverse_softplus

A_INIT_MAX = 16.0  # A ~ U(0, 16): the paper's code (flash-linear-attention GatedDeltaNet)
DT_FLOOR = 1e-4  # smallest initial step dt (Mamba-2's dt_init_floor)


@dataclass(frozen=True)
class GatedDeltaNetConfig(DeltaNetConfig):
    dt_min: float = 1e-3  # the range of the initial decay steps dt = softplus(dt_bias)
    dt_max: float = 1e-1

    def __post_init__(self) -> None:
        super().__post_init__()
        for f in ("dt_min", "dt_max"):
            positive_number(f, getattr(self, f))
        if self.dt_min > self.dt_max:
            raise SettingError(f"dt_min must be <= dt_max, got dt_min={self.dt_min}, dt_max={self.dt_max}",
                               ("dt_min", "dt_max"))


class GatedDeltaRuleMixer(DeltaRuleMixer):
    """DeltaNet's mixer with the decay gate alpha_t and the output gate (module docstring)."""

    def __init__(self, E: int, cfg: GatedDeltaNetConfig) -> None:
        super().__init__(E, cfg, gated=True)
        self.dt_min, self.dt_max = cfg.dt_min, cfg.dt_max
        self.A_log = nn.Parameter(torch.empty(E, cfg.n_head))
        self.dt_bias = nn.Parameter(torch.empty(E, cfg.n_head))
        for p in (self.A_log, self.dt_bias):  # Mamba-2's convention: no decay towards A = 1, dt = log 2
            setattr(p, "_no_weight_decay", True)

    def reset_member(self, e: int, generator: torch.Generator) -> None:
        H = self.H
        with torch.no_grad():
            A = torch.rand(H, generator=generator) * A_INIT_MAX
            self.A_log[e].copy_(torch.log(A.clamp(min=torch.finfo(torch.float32).tiny)))
            log_dt = torch.rand(H, generator=generator) * (math.log(self.dt_max) - math.log(self.dt_min))
            dt = torch.exp(log_dt + math.log(self.dt_min)).clamp(min=DT_FLOOR)
            self.dt_bias[e].copy_(inverse_softplus(dt))

    def log_decay(self, x: Tensor) -> Tensor:
        """log alpha = -exp(A_log) softplus(x W_a + dt_bias): [E, ..., H], <= 0."""
        shape = (x.shape[0],) + (1,) * (x.dim() - 2) + (self.H,)
        dt = torch.nn.functional.softplus(self.a_proj(x) + self.dt_bias.view(shape))
        return -torch.exp(self.A_log).view(shape) * dt


class GatedDeltaNet(DeltaNet):
    """E independent Gated DeltaNet stacks: tokens [E, B, L] (+ header) -> logits [E, B, L, C]."""

    @staticmethod
    def mixer(E: int, cfg: DeltaNetConfig) -> nn.Module:
        if not isinstance(cfg, GatedDeltaNetConfig):
            raise TypeError(f"GatedDeltaNet needs a GatedDeltaNetConfig, got {type(cfg).__name__}")
        return GatedDeltaRuleMixer(E, cfg)


@register_model("gated-deltanet", "Gated DeltaNet: delta rule with a decay gate, chunkwise WY form "
                                  "(Yang, Kautz, Hatamizadeh 2024)", config=GatedDeltaNetConfig)
def build_gated_deltanet(shape: TaskShape, ensemble: int, match_params: int | None = None,
                         **cfg) -> GatedDeltaNet:
    """GatedDeltaNetConfig fields directly, or match_params=N (with n_layer, n_head, ...) to fit widths."""
    config = (GatedDeltaNetConfig(**cfg) if match_params is None
              else match_deltanet(shape, int(match_params), model=GatedDeltaNet, config=GatedDeltaNetConfig, **cfg))
    return GatedDeltaNet(shape, config, ensemble)
