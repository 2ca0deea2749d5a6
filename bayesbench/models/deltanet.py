"""DeltaNet: linear attention with the delta rule, ensemble-native, pure PyTorch.

Yang, Wang, Zhang, Shen, Kim 2024, "Parallelizing Linear Transformers with the Delta Rule over
Sequence Length", arXiv 2406.06484. Per head the state S [Dk, Dv] is rewritten, not only added to
(Sec. 2, Widrow-Hoff's rule: S_t = S_{t-1} - beta_t k_t (S_{t-1}^T k_t - v_t)^T):

    S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,     o_t = S_t^T q_t,

with alpha_t = 1 here and the learned gate alpha_t in (0, 1] in Gated DeltaNet
(`gated_deltanet.py`, which shares this module's kernel). `delta_rule_step` is the recurrent
reference; `delta_rule_chunked` the training path, the chunkwise form of Sec. 3 (the WY / UT
representation of the products of Householder-like matrices): within a chunk the pseudo-values
w_t = beta_t (v_t - alpha_t S_{t-1}^T k_t) solve the unit lower-triangular system
(I + A) W = diag(beta) (V - diag(gamma) K S_0), A_ts = beta_t (gamma_t / gamma_s) k_t . k_s for
s < t (gamma: the cumulative gate within the chunk), one `solve_triangular` per chunk; then
o_t = gamma_t q_t S_0 + sum_{s<=t} (gamma_t / gamma_s)(q_t . k_s) w_s and S leaves the chunk as
gamma_C S_0 + sum_s (gamma_C / gamma_s) k_s w_s^T (Gated DeltaNet, arXiv 2412.06464, Sec. 3.3).

The layer (the paper's "DeltaNet Transformer", as flash-linear-attention's DeltaNet runs it):
q, k, v = SiLU(short causal depthwise conv_4(x W_{q,k,v})); q, k L2-normalised per head (the
normalisation that keeps the eigenvalues of I - beta k k^T in [-1, 1]);
beta_t = sigmoid(x W_beta) per head; o = RMSNorm per head (per-member affine), then W_o.
Departures (said once for the zoo, `gated_recurrence.py`): pre-norm LayerNorm blocks with the
transformer's GELU FFN rather than the paper's Llama-style RMSNorm/SwiGLU, and the zoo's N(0, 0.02)
init with residual-scaled output maps rather than the paper's; the short convs of q, k and v are
one depthwise conv over the concatenated channels (the same map).
"""

from __future__ import annotations

import math
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
    conv_step,
    l2_normalise,
    match_d_model_and_ffn,
    meta_params,
    time_chunks,
)
from .layers import EnsembleLinear, residual_std
from .mamba import CausalDepthwiseConv
from .registry import register_model


def delta_rule_step(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, log_decay: Tensor | None,
                    state: Tensor | None) -> tuple[Tensor, Tensor]:
    """One position of S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, o_t = S_t^T q_t.

    q, k: [..., Dk]; v: [..., Dv]; beta, log_decay (log alpha; None: alpha = 1): [...];
    state [..., Dk, Dv] or None (zeros). Returns (o [..., Dv], the new state)."""
    if state is None:
        state = q.new_zeros(*q.shape, v.shape[-1])
    elif log_decay is not None:
        state = torch.exp(log_decay)[..., None, None] * state
    predicted = (k.unsqueeze(-1) * state).sum(-2)  # S^T k: what the state recalls for k
    state = state + beta[..., None, None] * k.unsqueeze(-1) * (v - predicted).unsqueeze(-2)
    return (q.unsqueeze(-1) * state).sum(-2), state


def delta_rule_ref(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, log_decay: Tensor | None = None) -> Tensor:
    """`delta_rule_step` looped over the time axis (q, k, v: -2; beta, log_decay: -1)."""
    state, out = None, []
    for t in range(q.shape[-2]):
        g = None if log_decay is None else log_decay[..., t]
        o, state = delta_rule_step(q[..., t, :], k[..., t, :], v[..., t, :], beta[..., t], g, state)
        out.append(o)
    return torch.stack(out, dim=-2)


def _unit_lower_solve(A: Tensor, *rhs: Tensor) -> list[Tensor]:
    """(I + A)^-1 b for each b, A strictly lower triangular: `solve_triangular` with a unit
    diagonal, in at least float32 (a bf16 forward under autocast solves in float32)."""
    dtype = torch.promote_types(A.dtype, torch.float32)
    return [torch.linalg.solve_triangular(A.to(dtype), b.to(dtype), upper=False, unitriangular=True).to(b.dtype)
            for b in rhs]


def delta_rule_chunked(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, log_decay: Tensor | None,
                       chunk: int) -> Tensor:
    """The chunkwise (WY) form of `delta_rule_ref`: q, k [..., L, Dk], v [..., L, Dv], beta and
    log_decay [..., L] -> o [..., L, Dv]. Padding to a multiple of the chunk is inert (beta = 0
    writes nothing, log decay 0 keeps the state)."""
    L = q.shape[-2]
    C = max(1, min(chunk, L))
    qc, kc, vc = (time_chunks(x, C) for x in (q, k, v))
    bc = time_chunks(beta.unsqueeze(-1), C)  # [..., n, C, 1]
    g = torch.zeros_like(bc) if log_decay is None else torch.cumsum(time_chunks(log_decay.unsqueeze(-1), C), dim=-2)
    causal = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    decay = torch.exp((g[..., :, None, 0] - g[..., None, :, 0]).masked_fill(~causal, -math.inf))  # gamma_t / gamma_s
    A = (bc * (kc @ kc.transpose(-1, -2)) * decay).tril(-1)
    U, Wk = _unit_lower_solve(A, bc * vc, bc * torch.exp(g) * kc)
    qk = (qc @ kc.transpose(-1, -2)) * decay
    n = qc.shape[-3]
    state: Tensor | None = None
    out = []
    for i in range(n):
        if state is None:
            w = U[..., i, :, :]
            out.append(qk[..., i, :, :] @ w)
        else:
            w = U[..., i, :, :] - Wk[..., i, :, :] @ state
            out.append(torch.exp(g[..., i, :, :]) * (qc[..., i, :, :] @ state) + qk[..., i, :, :] @ w)
        if i < n - 1:
            g_last = g[..., i, -1:, :]
            write = (kc[..., i, :, :] * torch.exp(g_last - g[..., i, :, :])).transpose(-1, -2) @ w
            state = write if state is None else torch.exp(g_last) * state + write
    o = torch.stack(out, dim=-3)
    return o.reshape(*o.shape[:-3], -1, o.shape[-1])[..., :L, :]


@dataclass(frozen=True)
class DeltaNetConfig:
    n_layer: int = 2
    n_head: int = 2
    d_model: int = 64
    d_ffn: int = 256
    d_conv: int = 4  # the short convolution of q, k, v
    chunk: int = 16  # positions per chunk of the chunkwise form
    kernel: str = "torch"  # "torch" (any device) or an outside kernel on CUDA (`external_kernels`)

    def __post_init__(self) -> None:
        for f in ("n_layer", "n_head", "d_model", "d_ffn", "d_conv"):
            positive_int(f, getattr(self, f))
        positive_int("chunk", self.chunk, "positions per chunk of the chunkwise form")
        external_kernels.check_kernel(self.kernel, external_kernels.COVERED["deltanet"])
        if self.d_model % self.n_head:
            raise SettingError(f"d_model ({self.d_model}) must be divisible by n_head ({self.n_head})",
                               ("d_model", "n_head"))


class DeltaRuleMixer(nn.Module):
    """The (gated) delta-rule sequence mixer over [E, B, L, d]; `gated` adds Gated DeltaNet's
    decay alpha_t and output gate (`gated_deltanet.py` sets them up)."""

    def __init__(self, E: int, cfg: DeltaNetConfig, gated: bool = False) -> None:
        super().__init__()
        d, H = cfg.d_model, cfg.n_head
        self.cfg, self.gated, self.H, self.Dh = cfg, gated, H, d // H
        self.qkv = EnsembleLinear(E, d, 3 * d, bias=False)
        self.conv = CausalDepthwiseConv(E, 3 * d, cfg.d_conv)
        self.b_proj = EnsembleLinear(E, d, H, bias=False)
        if gated:
            self.a_proj = EnsembleLinear(E, d, H, bias=False)
            self.g_proj = EnsembleLinear(E, d, d, bias=False)
        self.o_norm = EnsembleHeadNorm(E, H, d // H, centre=False)
        self.o_proj = EnsembleLinear(E, d, d, bias=False, init_std=residual_std(2 * cfg.n_layer))

    def log_decay(self, x: Tensor) -> Tensor | None:
        """log alpha [E, ..., H] (None: alpha = 1, plain DeltaNet)."""
        return None

    def _qkvb(self, mixed: Tensor, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """q, k, v [..., H, Dh] (SiLU, q and k L2-normalised) and beta [..., H] from the conv output."""
        q, k, v = F.silu(mixed).unflatten(-1, (3, self.H, self.Dh)).unbind(-3)
        return l2_normalise(q), l2_normalise(k), v, torch.sigmoid(self.b_proj(x))

    def _out(self, o: Tensor, x: Tensor) -> Tensor:
        o = self.o_norm(o)
        if self.gated:
            o = o * F.silu(self.g_proj(x))
        return self.o_proj(o)

    def forward(self, x: Tensor) -> Tensor:
        E, B, L, d = x.shape
        q, k, v, beta = self._qkvb(self.conv(self.qkv(x)), x)  # [E, B, L, H, Dh], beta [E, B, L, H]
        g = self.log_decay(x)
        heads = (q.transpose(2, 3), k.transpose(2, 3), v.transpose(2, 3), beta.transpose(2, 3),
                 None if g is None else g.transpose(2, 3))
        if self.cfg.kernel == "torch":
            o = delta_rule_chunked(*heads, self.cfg.chunk)
        else:
            external_kernels.check_device(self.cfg.kernel, x)
            o = external_kernels.delta_rule(*heads, kernel=self.cfg.kernel)
        return self._out(o.transpose(2, 3).reshape(E, B, L, d), x)

    def recurrent_step(self, x: Tensor, state: State | None) -> tuple[Tensor, State]:
        """x [E, B, d] at one position -> (y [E, B, d], {'conv': the last d_conv - 1 inputs of
        the short conv [E, B, d_conv - 1, 3d], 'S': the delta-rule state [E, B, H, Dh, Dh]})."""
        E, B, d = x.shape
        mixed, conv = conv_step(self.conv.weight, self.conv.bias, self.qkv(x), state)
        q, k, v, beta = self._qkvb(mixed, x)
        o, S = delta_rule_step(q, k, v, beta, self.log_decay(x), None if state is None else state["S"])
        return self._out(o.reshape(E, B, d), x), {"conv": conv, "S": S}


class DeltaNet(ResidualStack):
    """E independent DeltaNet stacks: tokens [E, B, L] (+ header) -> logits [E, B, L, C]."""

    def __init__(self, shape: TaskShape, cfg: DeltaNetConfig, ensemble: int = 1) -> None:
        blocks = [MixerBlock(ensemble, cfg.d_model, cfg.d_ffn, self.mixer(ensemble, cfg), 2 * cfg.n_layer)
                  for _ in range(cfg.n_layer)]
        super().__init__(shape, ensemble, cfg.d_model, blocks)
        self.cfg = cfg

    @staticmethod
    def mixer(E: int, cfg: DeltaNetConfig) -> nn.Module:
        return DeltaRuleMixer(E, cfg)


def match_deltanet(shape: TaskShape, target: int, *, n_layer: int = 2, n_head: int = 2, tolerance: float = 0.01,
                   model: type[DeltaNet] = DeltaNet, config: type[DeltaNetConfig] = DeltaNetConfig,
                   **cfg) -> DeltaNetConfig:
    """A config of n_layer blocks and n_head heads within tolerance of target: d_model (a multiple
    of n_head, d_ffn = 4 d_model), then d_ffn; other fields through cfg."""
    if "d_model" in cfg or "d_ffn" in cfg:
        raise ValueError(f"match for {model.__name__} fits d_model and d_ffn itself; do not give them")

    def make(d: int, f: int) -> DeltaNetConfig:
        return config(n_layer=n_layer, n_head=n_head, d_model=d, d_ffn=f, **cfg)

    d, f = match_d_model_and_ffn(lambda d, f: meta_params(lambda: model(shape, make(d, f))), target,
                                 step=n_head, what=f"{model.__name__} model", tolerance=tolerance)
    return make(d, f)


@register_model("deltanet", "DeltaNet: delta-rule linear attention, chunkwise WY form (Yang et al. 2024)",
                config=DeltaNetConfig)
def build_deltanet(shape: TaskShape, ensemble: int, match_params: int | None = None, **cfg) -> DeltaNet:
    """DeltaNetConfig fields directly, or match_params=N (with n_layer, n_head, ...) to fit widths."""
    config = DeltaNetConfig(**cfg) if match_params is None else match_deltanet(shape, int(match_params), **cfg)
    return DeltaNet(shape, config, ensemble)
