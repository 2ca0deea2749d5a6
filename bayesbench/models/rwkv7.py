"""RWKV-7 "Goose": the generalised delta rule with vector-valued decay and in-context learning rate
(Peng et al. 2025, "RWKV-7 'Goose' with Expressive Dynamic State Evolution", arXiv 2503.14456).

Time mixing (Sec. 4, Fig. 1 and Eqs. 3-18), per head of Dh channels, with token shift
x^c_t = x_t + (x_{t-1} - x_t) mu_c for c in r, w, k, v, a, g:
  r = x^r W_r;  k = x^k W_k;  v = x^v W_v;
  decay w_t = exp(-e^{-0.5} sigmoid(w0 + tanh(x^w W1) W2))   (in (0.545, 1), per channel);
  in-context learning rate a_t = sigmoid(a0 + x^a A1 A2);   gate g_t = sigmoid(x^g G1) G2;
  removal key kappa = normalise(k * xi) per head;  replacement key k~ = k * (1 + (a - 1) * alpha);
  S_t = S_{t-1} (diag(w_t) - kappa^T (a_t * kappa)) + v_t^T k~_t        (S [Dh, Dh] per head)
  y_t = GroupNorm_head(S_t r_t) + (sum(r * k~ * rho) per head) v_t;  out = (y * g) W_o.
Channel mixing (Sec. 4.3): k = ReLU(x^k W_k)^2, out = k W_v with a token shift of its own.
Blocks: x += TimeMix(LN(x)); x += ChannelMix(LN(x)).

State (zoology issue #34 was about overstating it): per layer the H matrices S of Dh x Dh floats
(H Dh^2 = d Dh, not d^2 and not a per-channel vector per key) plus the two token shifts' previous
inputs (2 d floats): what `recurrent_step` carries and `models.state` counts.

Initialisation: the reference implementation's (RWKV-LM, RWKV-v7 train code, `RWKV_Tmix_x070`):
token-shift mu from the layer's depth and channel index, decay bias w0 = -7 + 5 (n/(d-1))^(0.85 +
sqrt(layer/(L-1))) + 0.5, W1, A1, G1 zero and W2, A2, G2 (semi-)orthogonal times 0.1, a0 = 0,
xi = 0.85, alpha = 1, rho = 0, W_r and W_v U(+-0.5/sqrt(d)), W_k U(+-0.05/sqrt(d)), W_o = 0 (so a
new time mix adds nothing), channel mix key U(+-0.5/sqrt(d)) and value 0, GroupNorm eps 64e-5.
Departures: no value-residual path (v_first mixing across layers, Sec. 4.2), no ln0 after the
embedding and the shared learned position table of every bayesbench model (RWKV has none); the
low-rank widths follow the reference formulas (1.8 sqrt(d) for decay and a, 0.6 d^0.8 for the gate)
rounded to multiples of 4 with a floor of 4 instead of multiples of 32 with a floor of 32, a floor
meant for widths of hundreds. The fast `forward` computes every projection at once and runs the
state update in chunks of 16 positions (`chunked_delta_rule`: one triangular solve and a few
matrix products per chunk); the recurrent reference applies the update one position at a time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..checks import positive_int
from . import external_kernels
from .base import ResidualStack, TaskShape
from .capacity import match_widths, meta_params
from .initialisers import uniform
from .layers import EnsembleLayerNorm
from .registry import register_model
from .sliding_window import check_heads

MIXES = ("r", "w", "k", "v", "a", "g")
GROUP_NORM_EPS = 64e-5


@dataclass(frozen=True)
class RWKV7Config:
    n_layer: int = 2
    n_head: int = 2
    d_model: int = 64
    d_ffn: int = 256  # the channel mix's hidden width (the paper's 4 d_model); the fine matching knob
    kernel: str = "torch"  # "torch" (any device) or an outside kernel on CUDA (`external_kernels`)

    def __post_init__(self) -> None:
        for f in ("n_layer", "n_head", "d_model", "d_ffn"):
            positive_int(f, getattr(self, f))
        check_heads(self.d_model, self.n_head)
        external_kernels.check_kernel(self.kernel, external_kernels.COVERED["rwkv7"])


def lora_rank(d: int, scale: float, power: float) -> int:
    """scale * d^power rounded to a multiple of 4, at least 4 (RWKV-LM's formula with 4 for its 32)."""
    return max(4, int(round(scale * d ** power / 4)) * 4)


def semi_orthogonal(rows: int, cols: int, scale: float, generator: torch.Generator) -> Tensor:
    """RWKV-LM's ortho_init: an orthogonal (rows x cols) matrix with gain sqrt(rows/cols) when
    rows > cols, times scale (QR of a Gaussian, signs fixed)."""
    big, small = max(rows, cols), min(rows, cols)
    q, r = torch.linalg.qr(torch.randn((big, small), generator=generator, dtype=torch.float32).double())
    q = (q * torch.sign(torch.diagonal(r)).unsqueeze(0)).float()
    gain = math.sqrt(rows / cols) if rows > cols else 1.0
    return (q if rows >= cols else q.T) * gain * scale


def member_matmul(x: Tensor, w: Tensor) -> Tensor:
    """x [E, ..., in] @ w [E, in, out] per member."""
    E, lead = x.shape[0], x.shape[1:-1]
    return torch.bmm(x.reshape(E, -1, x.shape[-1]), w).reshape(E, *lead, w.shape[-1])


def shifted(x: Tensor) -> Tensor:
    """x_{t-1} along dim 2 of [E, B, L, d], zero at t = 0 (the token shift)."""
    return F.pad(x, (0, 0, 1, 0))[:, :, :-1]


CHUNK = 16  # positions per chunk of the fast form


def chunked_delta_rule(q: Tensor, decay: Tensor, kappa: Tensor, b: Tensor, k: Tensor, v: Tensor, *,
                       chunk: int = CHUNK) -> Tensor:
    """y_t = S_t q_t for S_t = S_{t-1} (diag(w_t) - kappa_t b_t^T) + v_t k_t^T, S_0 = 0, every input
    [..., L, Dh], in chunks of `chunk` positions (the fast form of `TimeMix.update` looped).

    Within a chunk, with G_t the decays' product from its start and r_t = S_{t-1} kappa_t (what the
    removal key reads), S_t = S_0 G_t + sum_{s<=t} (v_s k_s^T - r_s b_s^T) G_t / G_s; so the reads
    solve one unit lower-triangular system (I + A) r = S_0 (G_{t-1} kappa_t) + K v, with
    A_ts = (b_s G_{t-1}/G_s) . kappa_t and K_ts = (k_s G_{t-1}/G_s) . kappa_t for s < t (the
    WY/UT-transform idea of chunked delta-rule kernels, Yang et al. 2024, arXiv 2406.06484, Sec. 3),
    then the outputs and the chunk's final state are matrix products. The ratios G_t / G_s are
    factored as G_t times 1/G_s, which RWKV-7's decay floor exp(-e^-0.5) > 0.545 bounds by
    0.545^-chunk (1.6e4 at 16 positions: no overflow in float32); a decay parametrised without
    a floor would need the ratios formed pairwise instead."""
    L = q.shape[-2]
    S = q.new_zeros(*q.shape[:-2], v.shape[-1], q.shape[-1])  # [..., Dv, Dk]
    logw = torch.log(decay)
    ys = []
    for start in range(0, L, chunk):
        sl = slice(start, min(start + chunk, L))
        qc, kc, vc, bc = q[..., sl, :], k[..., sl, :], v[..., sl, :], b[..., sl, :]
        kap, lw = kappa[..., sl, :], logw[..., sl, :]
        C = qc.shape[-2]
        cum = lw.cumsum(-2)  # log G_t
        prev = cum - lw  # log G_{t-1}
        t_idx = torch.arange(C, device=q.device)
        strict = t_idx[:, None] > t_idx[None, :]  # s < t
        upto = t_idx[:, None] >= t_idx[None, :]  # s <= t
        grow, shrink = torch.exp(-cum), torch.exp(cum)  # 1/G_s (at most 0.545^-chunk) and G_t
        kap_prev = kap * torch.exp(prev)
        A = (kap_prev @ (bc * grow).transpose(-1, -2)).masked_fill(~strict, 0.0)  # (b_s G_{t-1}/G_s) . kappa_t
        K = (kap_prev @ (kc * grow).transpose(-1, -2)).masked_fill(~strict, 0.0)
        rhs = kap_prev @ S.transpose(-1, -2) + K @ vc  # [..., C, Dv]
        eye = torch.eye(C, dtype=q.dtype, device=q.device)
        reads = torch.linalg.solve_triangular(eye + A, rhs, upper=False, unitriangular=True)  # r_t [..., C, Dv]
        q_decayed = qc * shrink
        Qk = (q_decayed @ (kc * grow).transpose(-1, -2)).masked_fill(~upto, 0.0)
        Qb = (q_decayed @ (bc * grow).transpose(-1, -2)).masked_fill(~upto, 0.0)
        ys.append(q_decayed @ S.transpose(-1, -2) + Qk @ vc - Qb @ reads)
        last = torch.exp(cum[..., -1:, :] - cum)  # G_C / G_s
        S = S * shrink[..., -1, :].unsqueeze(-2) + vc.transpose(-1, -2) @ (kc * last) \
            - reads.transpose(-1, -2) @ (bc * last)
    return torch.cat(ys, -2)


class TimeMix(nn.Module):
    """RWKV-7's time mixing, [E, B, L, d] -> same."""

    def __init__(self, E: int, cfg: RWKV7Config, layer: int) -> None:
        super().__init__()
        d, H = cfg.d_model, cfg.n_head
        self.cfg, self.layer = cfg, layer
        rw, rg = lora_rank(d, 1.8, 0.5), lora_rank(d, 0.6, 0.8)
        self.mu = nn.Parameter(torch.empty(E, len(MIXES), d))
        self.w_r, self.w_k = nn.Parameter(torch.empty(E, d, d)), nn.Parameter(torch.empty(E, d, d))
        self.w_v, self.w_o = nn.Parameter(torch.empty(E, d, d)), nn.Parameter(torch.empty(E, d, d))
        self.w0, self.w1, self.w2 = (nn.Parameter(torch.empty(E, d)), nn.Parameter(torch.empty(E, d, rw)),
                                     nn.Parameter(torch.empty(E, rw, d)))
        self.a0, self.a1, self.a2 = (nn.Parameter(torch.empty(E, d)), nn.Parameter(torch.empty(E, d, rw)),
                                     nn.Parameter(torch.empty(E, rw, d)))
        self.g1, self.g2 = nn.Parameter(torch.empty(E, d, rg)), nn.Parameter(torch.empty(E, rg, d))
        self.k_k, self.k_a = nn.Parameter(torch.empty(E, d)), nn.Parameter(torch.empty(E, d))
        self.r_k = nn.Parameter(torch.empty(E, H, d // H))
        self.ln_w, self.ln_b = nn.Parameter(torch.empty(E, d)), nn.Parameter(torch.empty(E, d))

    def reset_member(self, e: int, generator: torch.Generator) -> None:
        d, n_layer = self.cfg.d_model, self.cfg.n_layer
        r01 = self.layer / max(n_layer - 1, 1)
        r10 = 1.0 - self.layer / n_layer
        ddd = torch.arange(d, dtype=torch.float32) / d
        mu = {"r": 1 - ddd ** (0.2 * r10), "w": 1 - ddd ** (0.9 * r10), "k": 1 - (ddd ** (0.9 * r10) + 0.4 * r01),
              "v": 1 - (ddd ** (0.4 * r10) + 0.6 * r01), "a": 1 - ddd ** (0.9 * r10), "g": 1 - ddd ** (0.2 * r10)}
        n = torch.arange(d, dtype=torch.float32) / max(d - 1, 1)
        decay_speed = -7 + 5 * n ** (0.85 + 1.0 * r01 ** 0.5)
        with torch.no_grad():
            self.mu[e].copy_(torch.stack([mu[c] for c in MIXES]))
            self.w_r[e].copy_(uniform((d, d), 0.5 / math.sqrt(d), generator))
            self.w_k[e].copy_(uniform((d, d), 0.05 / math.sqrt(d), generator))
            self.w_v[e].copy_(uniform((d, d), 0.5 / math.sqrt(d), generator))
            self.w_o[e].zero_()
            self.w0[e].copy_(decay_speed + 0.5)
            self.a0[e].zero_()
            for first, second in ((self.w1, self.w2), (self.a1, self.a2), (self.g1, self.g2)):
                first[e].zero_()
                rows, cols = second.shape[1:]
                second[e].copy_(semi_orthogonal(rows, cols, 0.1, generator))
            self.k_k[e].fill_(0.85)
            self.k_a[e].fill_(1.0)
            self.r_k[e].zero_()
            self.ln_w[e].fill_(1.0)
            self.ln_b[e].zero_()

    def inputs(self, x: Tensor, prev: Tensor) -> tuple[Tensor, ...]:
        """r, decay, kappa, a * kappa, k~, v, g, every [E, ..., H, Dh] (g: [E, ..., d]) from x and x_{t-1}."""
        E, H = x.shape[0], self.cfg.n_head
        lead = x.shape[1:-1]
        view = (E, *lead, H, -1)
        mu = self.mu.view(E, *([1] * len(lead)), len(MIXES), -1)
        xs = (x.unsqueeze(-2) + (prev - x).unsqueeze(-2) * mu).unbind(-2)  # x^c for c in MIXES
        xr, xw, xk, xv, xa, xg = xs
        bcast = (E, *([1] * len(lead)), -1)
        r = member_matmul(xr, self.w_r)
        k = member_matmul(xk, self.w_k)
        v = member_matmul(xv, self.w_v)
        w = -F.softplus(-(self.w0.view(bcast) + member_matmul(torch.tanh(member_matmul(xw, self.w1)), self.w2))) - 0.5
        decay = torch.exp(-torch.exp(w))
        a = torch.sigmoid(self.a0.view(bcast) + member_matmul(member_matmul(xa, self.a1), self.a2))
        g = member_matmul(torch.sigmoid(member_matmul(xg, self.g1)), self.g2)
        kappa = F.normalize((k * self.k_k.view(bcast)).view(view), dim=-1)
        k = k * (1 + (a - 1) * self.k_a.view(bcast))
        a = a.view(view)
        return r.view(view), decay.view(view), kappa, a * kappa, k.view(view), v.view(view), g

    def output(self, y: Tensor, r: Tensor, k: Tensor, v: Tensor, g: Tensor) -> Tensor:
        """GroupNorm per head of y [E, ..., H, Dh], the bonus (r k~ rho) v, the gate and W_o."""
        E, lead = y.shape[0], y.shape[1:-2]
        d = self.cfg.d_model
        bcast = (E, *([1] * len(lead)), self.cfg.n_head, -1)
        y = F.layer_norm(y, y.shape[-1:], eps=GROUP_NORM_EPS)
        y = y * self.ln_w.view(bcast) + self.ln_b.view(bcast)
        y = y + (r * k * self.r_k.view(bcast)).sum(-1, keepdim=True) * v
        return member_matmul(y.reshape(E, *lead, d) * g, self.w_o)

    @staticmethod
    def update(S: Tensor, decay: Tensor, kappa: Tensor, a_kappa: Tensor, k: Tensor, v: Tensor) -> Tensor:
        """S (diag(w) - kappa^T (a kappa)) + v^T k~ for S [..., Dv, Dk] and the rest [..., Dh]."""
        removed = torch.einsum("...vk,...k->...v", S, kappa)
        return (S * decay.unsqueeze(-2) - removed.unsqueeze(-1) * a_kappa.unsqueeze(-2)
                + v.unsqueeze(-1) * k.unsqueeze(-2))

    def forward(self, x: Tensor) -> Tensor:
        r, decay, kappa, a_kappa, k, v, g = self.inputs(x, shifted(x))
        heads_first = [t.transpose(2, 3) for t in (r, decay, kappa, a_kappa, k, v)]  # [E, B, H, L, Dh]
        if self.cfg.kernel == "torch":
            y = chunked_delta_rule(*heads_first, chunk=CHUNK)
        else:
            external_kernels.check_device(self.cfg.kernel, x)
            y = external_kernels.rwkv7(*heads_first, kernel=self.cfg.kernel)
        return self.output(y.transpose(2, 3), r, k, v, g)

    def recurrent_step(self, x: Tensor, state: dict[str, Tensor] | None) -> tuple[Tensor, dict[str, Tensor]]:
        """One position of x [E, B, d]: the shift carries x_{t-1} [E, B, d], the heads' S [E, B, H, Dh, Dh]."""
        E, B, d = x.shape
        H = self.cfg.n_head
        prev = torch.zeros_like(x) if state is None else state["shift"]
        S = x.new_zeros(E, B, H, d // H, d // H) if state is None else state["S"]
        r, decay, kappa, a_kappa, k, v, g = self.inputs(x, prev)
        S = self.update(S, decay, kappa, a_kappa, k, v)
        y = torch.einsum("ebhvk,ebhk->ebhv", S, r)
        return self.output(y, r, k, v, g), {"shift": x, "S": S}


class ChannelMix(nn.Module):
    """RWKV-7's channel mixing: token shift, ReLU^2 of the key, the value map."""

    def __init__(self, E: int, cfg: RWKV7Config, layer: int) -> None:
        super().__init__()
        self.cfg, self.layer = cfg, layer
        self.mu = nn.Parameter(torch.empty(E, cfg.d_model))
        self.key = nn.Parameter(torch.empty(E, cfg.d_model, cfg.d_ffn))
        self.value = nn.Parameter(torch.empty(E, cfg.d_ffn, cfg.d_model))

    def reset_member(self, e: int, generator: torch.Generator) -> None:
        d = self.cfg.d_model
        r10 = 1.0 - self.layer / self.cfg.n_layer
        with torch.no_grad():
            self.mu[e].copy_(1 - (torch.arange(d, dtype=torch.float32) / d) ** (r10 ** 4))
            self.key[e].copy_(uniform((d, self.cfg.d_ffn), 0.5 / math.sqrt(d), generator))
            self.value[e].zero_()

    def channel_mix(self, x: Tensor, prev: Tensor) -> Tensor:
        mu = self.mu.view(x.shape[0], *([1] * (x.dim() - 2)), -1)
        k = torch.relu(member_matmul(x + (prev - x) * mu, self.key)) ** 2
        return member_matmul(k, self.value)

    def forward(self, x: Tensor) -> Tensor:
        return self.channel_mix(x, shifted(x))

    def recurrent_step(self, x: Tensor, state: dict[str, Tensor] | None) -> tuple[Tensor, dict[str, Tensor]]:
        """One position of x [E, B, d]; the shift carries x_{t-1} [E, B, d]."""
        return self.channel_mix(x, torch.zeros_like(x) if state is None else state["shift"]), {"shift": x}


class Block(nn.Module):
    def __init__(self, E: int, cfg: RWKV7Config, layer: int) -> None:
        super().__init__()
        self.ln_1 = EnsembleLayerNorm(E, cfg.d_model)
        self.att = TimeMix(E, cfg, layer)
        self.ln_2 = EnsembleLayerNorm(E, cfg.d_model)
        self.ffn = ChannelMix(E, cfg, layer)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.att(self.ln_1(x))
        return x + self.ffn(self.ln_2(x))


class RWKV7(ResidualStack):
    """E independent RWKV-7 stacks: tokens [E, B, L] (+ header) -> logits [E, B, L, C]."""

    def __init__(self, shape: TaskShape, cfg: RWKV7Config, ensemble: int = 1) -> None:
        super().__init__(shape, ensemble, cfg.d_model, [Block(ensemble, cfg, i) for i in range(cfg.n_layer)])
        self.cfg = cfg


def match_rwkv7(shape: TaskShape, target: int, *, n_layer: int = 2, n_head: int = 2, tolerance: float = 0.01,
                **cfg) -> RWKV7Config:
    """n_layer blocks of n_head heads within tolerance of target: d_model (a multiple of n_head,
    d_ffn = 4 d_model), then d_ffn."""
    if "d_model" in cfg or "d_ffn" in cfg:
        raise ValueError("match_rwkv7 fits d_model and d_ffn itself; do not give them")
    positive_int("n_head", n_head)

    def make(d: int, f: int) -> RWKV7Config:
        return RWKV7Config(n_layer=n_layer, n_head=n_head, d_model=d, d_ffn=f, **cfg)

    d, f = match_widths(lambda d, f: meta_params(lambda: RWKV7(shape, make(d, f))), target,
                        default_fine=lambda d: 4 * d, coarse_step=n_head, tolerance=tolerance, what="RWKV-7 model")
    return make(d, f)


@register_model("rwkv7", "RWKV-7 Goose: generalised delta rule, vector decay and in-context learning rate",
                config=RWKV7Config)
def build_rwkv7(shape: TaskShape, ensemble: int, match_params: int | None = None, **cfg) -> RWKV7:
    """RWKV7Config fields directly, or match_params=N (with n_layer, n_head) to fit widths."""
    config = RWKV7Config(**cfg) if match_params is None else match_rwkv7(shape, int(match_params), **cfg)
    return RWKV7(shape, config, ensemble)
