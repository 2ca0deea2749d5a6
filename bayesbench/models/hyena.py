"""Hyena: gated implicit long convolutions (Poli et al. 2023, "Hyena Hierarchy: Towards Larger
Convolutional Language Models", arXiv 2302.10866).

The Hyena operator of order N (Sec. 3.1, Def. 3.1 and Algorithm 3): N + 1 projections of the input,
each through a short causal depthwise convolution (kernel 3), give x_1 .. x_N and v; then
v <- h_n * (x_n v) for n = N .. 2 and y = x_1 v, an output projection after. Each long filter h_n
spans every position and is implicit (Sec. 3.3, Algorithm 2): a small FFN with sine activations
(`Sin`, learned frequency, initialised to 1) over positional encodings of t (t normalised to
[0, 1] over the model's max_len, and the real and imaginary parts of e^{-i 2 pi f t}), times an
exponential window exp(-alpha_c t) whose rate per channel runs linearly from a fast to a slow decay
(the reference implementation's ExponentialModulation: target 1e-2 reached at 30% and at 150% of
the length), plus a per-channel skip term D v (the filter's bias, initialised N(0, 1) as there).
The convolution is computed in its FFT form (zero-padded to 2L, O(L log L)) for training.

The recurrent reference is the direct causal convolution position by position, whose state is
the history of every long convolution's input (N - 1 of them, d floats per position each) plus
the short convolutions' last 2 inputs: it grows with the length like an attention cache, since a
filter as long as the sequence forgets nothing by construction (the paper's Sec. 3.4 distils it
into a fixed-size recurrence; not done here).

Blocks: pre-norm x += Hyena(LN(x)); x += FFN(LN(x)) with the transformer's FFN and embeddings (the
paper's language models use the same block with Hyena in place of attention, Sec. 4.2). Filter
FFN layers use torch's nn.Linear default init U(+-1/sqrt(fan_in)) (as the reference code does),
projections N(0, 0.02^2), the output projection scaled by 1/sqrt(2 n_layer). Departure: no
dropout in the filter and no filter normalisation (the reference code's defaults too).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..checks import SettingError, int_at_least, positive_int
from .base import ResidualStack, TaskShape
from .capacity import match_widths, meta_params
from .initialisers import uniform
from .layers import EnsembleLinear, residual_std
from .mamba import CausalDepthwiseConv
from .registry import register_model
from .sliding_window import Block

FAST_DECAY, SLOW_DECAY, TARGET = 0.3, 1.5, 1e-2  # the window's decay range (the reference ExponentialModulation)


@dataclass(frozen=True)
class HyenaConfig:
    n_layer: int = 2
    d_model: int = 64
    d_ffn: int = 256
    order: int = 2  # N: N - 1 long convolutions and N gates
    filter_order: int = 32  # the filter FFN's width
    emb_dim: int = 3  # positional encoding features: t and (emb_dim - 1) / 2 complex exponentials
    short_kernel: int = 3

    def __post_init__(self) -> None:
        for f in ("n_layer", "d_model", "d_ffn", "filter_order", "short_kernel"):
            positive_int(f, getattr(self, f))
        int_at_least("order", self.order, 2, "the Hyena recurrence's depth: order - 1 long convolutions")
        int_at_least("emb_dim", self.emb_dim, 3, "positional encoding features")
        if self.emb_dim % 2 == 0:
            raise SettingError(f"emb_dim must be odd (t plus pairs of cos/sin features), got {self.emb_dim}",
                               ("emb_dim",))


class TorchDefaultLinear(EnsembleLinear):
    """EnsembleLinear with torch's nn.Linear initialisation: weight and bias U(+-1/sqrt(fan_in))."""

    def reset_member(self, e: int, generator: torch.Generator) -> None:
        bound = 1.0 / math.sqrt(self.in_features)
        with torch.no_grad():
            self.weight[e].copy_(uniform((self.in_features, self.out_features), bound, generator))
            if self.bias is not None:
                self.bias[e].copy_(uniform((self.out_features,), bound, generator))


class Sin(nn.Module):
    """sin(freq * x) with a learned frequency per channel [E, width], initialised to 1."""

    def __init__(self, E: int, width: int) -> None:
        super().__init__()
        self.freq = nn.Parameter(torch.ones(E, width))

    def reset_member(self, e: int, generator: torch.Generator) -> None:
        with torch.no_grad():
            self.freq[e].fill_(1.0)

    def forward(self, x: Tensor) -> Tensor:  # x [E, L, width]
        return torch.sin(self.freq.unsqueeze(1) * x)


def positional_encoding(max_len: int, emb_dim: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """[max_len, emb_dim]: t in [0, 1], then cos and sin of 2 pi f t' / max_len for the bands f."""
    t = torch.linspace(0, 1, max_len, dtype=dtype, device=device)[:, None]
    bands = (emb_dim - 1) // 2
    w = 2 * math.pi * torch.arange(max_len, dtype=dtype, device=device)[:, None] / max_len
    f = torch.linspace(1e-4, bands - 1, bands, dtype=dtype, device=device)[None, :]
    return torch.cat([t, torch.cos(f * w), -torch.sin(f * w)], -1)


class ImplicitFilter(nn.Module):
    """h [E, max_len, channels] = FFN(positional encoding) * exp(-alpha t) and the skip D [E, channels]."""

    def __init__(self, E: int, cfg: HyenaConfig, max_len: int) -> None:
        super().__init__()
        channels = (cfg.order - 1) * cfg.d_model
        self.max_len, self.emb_dim, self.d_model = max_len, cfg.emb_dim, cfg.d_model
        self.fc1 = TorchDefaultLinear(E, cfg.emb_dim, cfg.filter_order)
        self.act1 = Sin(E, cfg.filter_order)
        self.fc2 = TorchDefaultLinear(E, cfg.filter_order, cfg.filter_order)
        self.act2 = Sin(E, cfg.filter_order)
        self.fc3 = TorchDefaultLinear(E, cfg.filter_order, channels, bias=False)
        self.D = nn.Parameter(torch.empty(E, channels))

    def reset_member(self, e: int, generator: torch.Generator) -> None:
        with torch.no_grad():
            self.D[e].copy_(torch.randn(self.D.shape[1], generator=generator))

    def forward(self, length: int) -> Tensor:
        """The filters' first `length` taps, [E, length, channels] (a prefix of the max_len filter)."""
        w = self.fc1.weight
        z = positional_encoding(self.max_len, self.emb_dim, w.dtype, w.device)[:length]
        h = self.fc3(self.act2(self.fc2(self.act1(self.fc1(z.expand(w.shape[0], -1, -1))))))
        t = torch.linspace(0, 1, self.max_len, dtype=w.dtype, device=w.device)[:length, None]
        d = self.d_model
        slow, fast = math.log(TARGET) / SLOW_DECAY, math.log(TARGET) / FAST_DECAY
        alpha = torch.linspace(slow, fast, d, dtype=w.dtype, device=w.device).abs().repeat(h.shape[-1] // d)
        return h * torch.exp(-t * alpha)


def fft_causal_conv(v: Tensor, h: Tensor) -> Tensor:
    """y_t = sum_{s<=t} h_{t-s} v_s along dim 2 of v [E, B, L, c] with h [E, L, c], via FFTs of length 2L."""
    L = v.shape[2]
    n = 2 * L
    spectrum = torch.fft.rfft(v, n=n, dim=2) * torch.fft.rfft(h, n=n, dim=1).unsqueeze(1)
    return torch.fft.irfft(spectrum, n=n, dim=2)[:, :, :L]


class HyenaOperator(nn.Module):
    """The order-N Hyena operator over [E, B, L, d] -> same (Algorithm 3)."""

    def __init__(self, E: int, cfg: HyenaConfig, max_len: int) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.in_proj = EnsembleLinear(E, d, (cfg.order + 1) * d)
        self.short = CausalDepthwiseConv(E, (cfg.order + 1) * d, cfg.short_kernel)
        self.filter = ImplicitFilter(E, cfg, max_len)
        self.out_proj = EnsembleLinear(E, d, d, init_std=residual_std(2 * cfg.n_layer))

    def forward(self, x: Tensor) -> Tensor:
        d = self.cfg.d_model
        *gates, v = self.short(self.in_proj(x)).split(d, dim=-1)
        h, D = self.filter(x.shape[2]), self.filter.D
        for o, gate in enumerate(reversed(gates[1:])):
            v = v * gate
            cols = slice(o * d, (o + 1) * d)
            v = fft_causal_conv(v, h[..., cols]) + v * D[:, None, None, cols]
        return self.out_proj(v * gates[0])

    def recurrent_step(self, x: Tensor, state: dict[str, Tensor] | None) -> tuple[Tensor, dict[str, Tensor]]:
        """One position t: the short convolutions' step, then each long convolution as the direct sum
        over the history of its inputs (carried, [E, B, t + 1, d] each, with the short window)."""
        d = self.cfg.d_model
        u, short = self.short.recurrent_step(self.in_proj(x), None if state is None else {"window": state["window"]})
        *gates, v = u.split(d, dim=-1)
        t = 0 if state is None else state["history0"].shape[2]
        taps = self.filter(t + 1).flip(1).unsqueeze(1)  # [E, 1, t + 1, channels], h_{t-s} at s
        D = self.filter.D
        out = {"window": short["window"]}
        for o, gate in enumerate(reversed(gates[1:])):
            v = v * gate
            past = v.unsqueeze(2) if state is None else torch.cat([state[f"history{o}"], v.unsqueeze(2)], 2)
            cols = slice(o * d, (o + 1) * d)
            v = (past * taps[..., cols]).sum(2) + v * D[:, None, cols]
            out[f"history{o}"] = past
        return self.out_proj(v * gates[0]), out


class Hyena(ResidualStack):
    """E independent Hyena stacks: tokens [E, B, L] (+ header) -> logits [E, B, L, C]."""

    def __init__(self, shape: TaskShape, cfg: HyenaConfig, ensemble: int = 1) -> None:
        blocks = [Block(ensemble, cfg.d_model, cfg.d_ffn, cfg.n_layer, HyenaOperator(ensemble, cfg, shape.max_len))
                  for _ in range(cfg.n_layer)]
        super().__init__(shape, ensemble, cfg.d_model, blocks)
        self.cfg = cfg


def match_hyena(shape: TaskShape, target: int, *, n_layer: int = 2, tolerance: float = 0.01, **cfg) -> HyenaConfig:
    """n_layer blocks within tolerance of target: d_model (d_ffn = 4 d_model), then d_ffn."""
    if "d_model" in cfg or "d_ffn" in cfg:
        raise ValueError("match_hyena fits d_model and d_ffn itself; do not give them")

    def make(d: int, f: int) -> HyenaConfig:
        return HyenaConfig(n_layer=n_layer, d_model=d, d_ffn=f, **cfg)

    d, f = match_widths(lambda d, f: meta_params(lambda: Hyena(shape, make(d, f))), target,
                        default_fine=lambda d: 4 * d, tolerance=tolerance, what="Hyena model")
    return make(d, f)


@register_model("hyena", "Hyena: gated implicit long convolutions (FFT form), pre-norm blocks with an FFN",
                config=HyenaConfig)
def build_hyena(shape: TaskShape, ensemble: int, match_params: int | None = None, **cfg) -> Hyena:
    """HyenaConfig fields directly, or match_params=N (with n_layer, order, ...) to fit widths."""
    config = HyenaConfig(**cfg) if match_params is None else match_hyena(shape, int(match_params), **cfg)
    return Hyena(shape, config, ensemble)
