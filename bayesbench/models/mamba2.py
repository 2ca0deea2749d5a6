"""Mamba-2: the SSD layer (state space duality), scalar decay per head, ensemble-native, pure PyTorch.

Dao and Gu 2024, "Transformers are SSMs: Generalized Models and Efficient Algorithms Through
Structured State Space Duality", arXiv 2405.21060. The SSM with A_t a scalar times the identity per
head (the SSD layer: the scalar-identity case the duality is built on): per head h, state h_t [N, P],

    h_t = exp(dt_t A_h) h_{t-1} + dt_t B_t x_t^T,     y_t = h_t^T C_t + D_h x_t,

B_t, C_t [N] shared by all heads (one group, the multi-value form of Sec. 7.2) and x_t [P] the
head's slice of the inner width. The SSD algorithm of Sec. 6 (chunks: a quadratic, attention-like
form inside each, the state passed between them) is `gated_recurrence_chunked` with q = C, k = B,
v = dt x and the scalar log decay dt A; `gated_recurrence_step` is the recurrent reference.

The block (Sec. 7.1, Fig. 6, the "parallel" Mamba-2 block): [z, x, B, C, dt] = u W_in (all
projections at the block's start, no bias); [x, B, C] = SiLU(causal depthwise conv_4([x, B, C]));
dt = softplus(dt + dt_bias); y = SSD(x, dt, A, B, C) + D x; y = RMSNorm(y * SiLU(z)) (the extra
normalisation of Sec. 7.1, gated as mamba_ssm's RMSNormGated with norm_before_gate=False);
out = y W_out. Initialisation (mamba_ssm's Mamba2, the reference code of the paper): A ~ U(1, 16),
A_log = log A; dt = softplus(dt_bias) log-uniform in [dt_min, dt_max] = [1e-3, 1e-1] (floored at
1e-4); D = 1; the conv torch's Conv1d default; A_log, D and dt_bias excluded from weight decay.
Departures: the zoo's N(0, 0.02) init of in/out projections with W_out scaled by 1/sqrt(n_layer)
and LayerNorm pre-norm (as `mamba.py` does) in place of mamba_ssm's Linear defaults and RMSNorm;
the head width P = d_inner / n_head follows n_head (the paper fixes P = 64, more than the zoo's
small widths hold).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..checks import SettingError, positive_int, positive_number
from . import external_kernels
from .base import ResidualStack, TaskShape
from .capacity import fit_width, meta_params
from .gated_recurrence import EnsembleHeadNorm, State, conv_step, gated_recurrence_chunked, gated_recurrence_step
from .layers import EnsembleLayerNorm, EnsembleLinear, residual_std
from .mamba import CausalDepthwiseConv
from .registry import register_model
from .scan import inverse_softplus

A_INIT_RANGE = (1.0, 16.0)  # A ~ U(1, 16) (mamba_ssm Mamba2's A_init_range)
DT_FLOOR = 1e-4  # dt_init_floor


@dataclass(frozen=True)
class Mamba2Config:
    n_layer: int = 4  # no FFN: two Mamba-2 blocks ~ one transformer block in parameters
    n_head: int = 4
    d_model: int = 64
    d_state: int = 16  # N
    d_conv: int = 4
    d_inner: int | None = None  # default 2 * d_model (expand = 2); the fine matching knob
    dt_min: float = 1e-3
    dt_max: float = 1e-1
    chunk: int = 16  # positions per chunk of the SSD algorithm
    kernel: str = "torch"  # "torch" (any device) or an outside kernel on CUDA (`external_kernels`)

    def __post_init__(self) -> None:
        for f in ("n_layer", "n_head", "d_model", "d_state", "d_conv"):
            positive_int(f, getattr(self, f))
        if self.d_inner is not None:
            positive_int("d_inner", self.d_inner)
        for f in ("dt_min", "dt_max"):
            positive_number(f, getattr(self, f))
        if self.dt_min > self.dt_max:
            raise SettingError(f"dt_min must be <= dt_max, got dt_min={self.dt_min}, dt_max={self.dt_max}",
                               ("dt_min", "dt_max"))
        positive_int("chunk", self.chunk, "positions per chunk of the SSD algorithm")
        external_kernels.check_kernel(self.kernel, external_kernels.COVERED["mamba2"])
        if self.inner % self.n_head:
            raise SettingError(f"d_inner ({self.inner}) must be divisible by n_head ({self.n_head}): "
                               "each head holds d_inner / n_head channels", ("d_inner", "n_head"))

    @property
    def inner(self) -> int:
        return 2 * self.d_model if self.d_inner is None else self.d_inner


class SSDMixer(nn.Module):
    """The Mamba-2 mixer over [E, B, L, d] (module docstring), without the block's pre-norm."""

    def __init__(self, E: int, cfg: Mamba2Config) -> None:
        super().__init__()
        Di, N, H = cfg.inner, cfg.d_state, cfg.n_head
        self.cfg, self.H, self.P = cfg, H, Di // H
        self.in_proj = EnsembleLinear(E, cfg.d_model, 2 * Di + 2 * N + H, bias=False)
        self.conv = CausalDepthwiseConv(E, Di + 2 * N, cfg.d_conv)
        self.dt_bias = nn.Parameter(torch.empty(E, H))
        self.A_log = nn.Parameter(torch.empty(E, H))
        self.D = nn.Parameter(torch.empty(E, H))
        for p in (self.dt_bias, self.A_log, self.D):  # mamba_ssm's convention
            setattr(p, "_no_weight_decay", True)
        self.norm = EnsembleHeadNorm(E, 1, Di, centre=False)
        self.out_proj = EnsembleLinear(E, Di, cfg.d_model, bias=False, init_std=residual_std(cfg.n_layer))

    def reset_member(self, e: int, generator: torch.Generator) -> None:
        cfg, H = self.cfg, self.H
        with torch.no_grad():
            log_dt = torch.rand(H, generator=generator) * (math.log(cfg.dt_max) - math.log(cfg.dt_min))
            dt = torch.exp(log_dt + math.log(cfg.dt_min)).clamp(min=DT_FLOOR)
            self.dt_bias[e].copy_(inverse_softplus(dt))
            lo, hi = A_INIT_RANGE
            self.A_log[e].copy_(torch.log(lo + torch.rand(H, generator=generator) * (hi - lo)))
            self.D[e].fill_(1.0)

    def _split(self, zxbcdt: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        Di, N = self.cfg.inner, self.cfg.d_state
        z, xBC, dt = zxbcdt.split([Di, Di + 2 * N, self.H], dim=-1)
        return z, xBC, dt

    def _ssm_inputs(self, xBC: Tensor, dt: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """x [E, ..., H, P], B and C [E, ..., 1, N] (one group for all heads), dt and log decay
        dt A [E, ..., H, 1] from the conv output and the raw dt."""
        Di, N = self.cfg.inner, self.cfg.d_state
        x, Bm, Cm = F.silu(xBC).split([Di, N, N], dim=-1)
        shape = (dt.shape[0],) + (1,) * (dt.dim() - 2) + (self.H,)
        dt = F.softplus(dt + self.dt_bias.view(shape)).unsqueeze(-1)
        A = -torch.exp(self.A_log).view(shape).unsqueeze(-1)
        return x.unflatten(-1, (self.H, self.P)), Bm.unsqueeze(-2), Cm.unsqueeze(-2), dt, dt * A

    def _out(self, y: Tensor, x: Tensor, z: Tensor) -> Tensor:
        """(y + D x), gated by SiLU(z), RMS-normalised, projected out; y, x [E, ..., H, P]."""
        shape = (x.shape[0],) + (1,) * (x.dim() - 3) + (self.H, 1)
        y = (y + self.D.view(shape) * x).flatten(-2)
        return self.out_proj(self.norm(y * F.silu(z)))

    def forward(self, u: Tensor) -> Tensor:
        z, xBC, dt = self._split(self.in_proj(u))
        x, Bm, Cm, dt, g = self._ssm_inputs(self.conv(xBC), dt)  # x [E, B, L, H, P], B/C [E, B, L, 1, N]
        if self.cfg.kernel == "torch":
            y = gated_recurrence_chunked(Cm.transpose(2, 3), Bm.transpose(2, 3), (x * dt).transpose(2, 3),
                                         g.transpose(2, 3), self.cfg.chunk).transpose(2, 3)  # [E, B, L, H, P]
        else:
            external_kernels.check_device(self.cfg.kernel, u)
            y = external_kernels.ssd(x, dt, -torch.exp(self.A_log), Bm, Cm, self.cfg.chunk, kernel=self.cfg.kernel)
        return self._out(y, x, z)

    def recurrent_step(self, u: Tensor, state: State | None) -> tuple[Tensor, State]:
        """u [E, B, d] at one position -> (y [E, B, d], {'conv': the conv's last d_conv - 1 inputs
        [E, B, d_conv - 1, d_inner + 2 N], 'S': the SSM state [E, B, H, N, P]})."""
        z, xBC, dt = self._split(self.in_proj(u))
        mixed, conv = conv_step(self.conv.weight, self.conv.bias, xBC, state)
        x, Bm, Cm, dt, g = self._ssm_inputs(mixed, dt)
        y, S = gated_recurrence_step(Cm, Bm, x * dt, g, None if state is None else state["S"])
        return self._out(y, x, z), {"conv": conv, "S": S}


class Mamba2Block(nn.Module):
    """x + SSDMixer(LN(x)) (no FFN, as in the paper's Mamba-2 language models)."""

    def __init__(self, E: int, cfg: Mamba2Config) -> None:
        super().__init__()
        self.ln = EnsembleLayerNorm(E, cfg.d_model)
        self.mixer = SSDMixer(E, cfg)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.mixer(self.ln(x))


class Mamba2(ResidualStack):
    """E independent Mamba-2 stacks: tokens [E, B, L] (+ header) -> logits [E, B, L, C]."""

    def __init__(self, shape: TaskShape, cfg: Mamba2Config, ensemble: int = 1) -> None:
        super().__init__(shape, ensemble, cfg.d_model, [Mamba2Block(ensemble, cfg) for _ in range(cfg.n_layer)])
        self.cfg = cfg


def match_mamba2(shape: TaskShape, target: int, *, n_layer: int = 4, n_head: int = 4, d_state: int = 16,
                 tolerance: float = 0.01, **cfg) -> Mamba2Config:
    """A Mamba2Config of n_layer blocks and n_head heads within tolerance of target: d_model (a
    multiple of n_head, d_inner = 2 d_model), then d_inner (a multiple of n_head), then, only where
    no d_inner comes within tolerance, d_state (a step of d_inner changes n_layer * n_head * ~3
    d_model parameters, more than 1% of a small model). Among the candidates within tolerance the
    one with d_state nearest its default wins (the state size is what the leaderboard compares),
    then d_inner nearest 2 d_model, then the smaller gap. Other fields (d_conv, chunk, ...) through cfg."""
    if "d_model" in cfg or "d_inner" in cfg:
        raise ValueError("match_mamba2 fits d_model and d_inner itself; do not give them")
    positive_int("target", target)

    def make(d: int, di: int, n: int) -> Mamba2Config:
        return Mamba2Config(n_layer=n_layer, n_head=n_head, d_model=d, d_inner=None if di == 2 * d else di,
                            d_state=n, **cfg)

    counts: dict[tuple[int, int, int], int] = {}

    def count(d: int, di: int, n: int) -> int:
        if (d, di, n) not in counts:
            counts[d, di, n] = meta_params(lambda: Mamba2(shape, make(d, di, n)))
        return counts[d, di, n]

    coarse = fit_width(lambda d: count(d, 2 * d, d_state), target, step=n_head)
    pairs = [(d, di) for d in (coarse - n_head, coarse, coarse + n_head) if d >= n_head
             for di in sorted({2 * d, fit_width(lambda di: count(d, di, d_state), target, step=n_head)})]
    candidates = []
    for fit_state in (False, True):  # d_state is fitted only where no d_inner comes within tolerance
        for d, di in pairs:
            n = fit_width(lambda n: count(d, di, n), target) if fit_state else d_state
            gap = abs(count(d, di, n) - target) / target
            candidates.append((abs(n - d_state), abs(di - 2 * d), gap, d, di, n))
        ok = [c for c in candidates if c[2] <= tolerance]
        if ok:
            break
    if not ok:
        _, _, gap, d, di, n = min(candidates, key=lambda c: c[2])
        raise ValueError(f"no Mamba-2 within {tolerance:.0%} of {target} parameters (closest: {count(d, di, n)} "
                         f"at d_model={d}, d_inner={di}, d_state={n}; try another n_layer)")
    _, _, _, d, di, n = min(ok)
    return make(d, di, n)


@register_model("mamba2", "Mamba-2: SSD layer, scalar decay per head, chunked SSD algorithm (Dao and Gu 2024)",
                config=Mamba2Config)
def build_mamba2(shape: TaskShape, ensemble: int, match_params: int | None = None, **cfg) -> Mamba2:
    """Mamba2Config fields directly, or match_params=N (with n_layer, n_head, ...) to fit widths."""
    config = Mamba2Config(**cfg) if match_params is None else match_mamba2(shape, int(match_params), **cfg)
    return Mamba2(shape, config, ensemble)
