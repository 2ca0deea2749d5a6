"""Shared pieces of the architecture zoo: per-member initialisers, the stacked-RNN model that
LSTM and GRU share, and capacity matching (pick widths so a model has N parameters).

Capacity matching: every architecture's count grows with a coarse width (d_model: the hidden or
residual width) in steps too big for 1% at small sizes (~2/d_model relative per unit), so each
`match_<arch>` fits the coarse width by bisection and then a fine knob (LSTM/GRU: the embedding
width; Mamba: d_inner; linear attention: d_ffn; toy attention: d_head) by a second bisection.
Counts come from building the model on the meta device, so they are exact by construction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor, nn

from .base import EnsembleModel, InputEmbedding, TaskShape
from .layers import EnsembleLayerNorm, EnsembleLinear
from .registry import meta_params

# ---------------------------------------------------------------------------------------------
# per-member initialisers (CPU float32 draws from the member's generator, as layers._normal)


def glorot_uniform(shape: tuple[int, int], generator: torch.Generator) -> Tensor:
    """U(-r, r), r = sqrt(6 / (fan_in + fan_out)) (Keras' default kernel init for RNNs)."""
    return uniform(shape, math.sqrt(6.0 / (shape[0] + shape[1])), generator)


def uniform(shape: tuple[int, ...], bound: float, generator: torch.Generator) -> Tensor:
    """U(-bound, bound) draws."""
    return (torch.rand(shape, generator=generator, dtype=torch.float32) * 2 - 1) * bound


def orthogonal(n: int, generator: torch.Generator) -> Tensor:
    """A Haar-random n x n orthogonal matrix: QR of a Gaussian with the sign of diag(R) fixed
    (what torch.nn.init.orthogonal_ does; the QR runs in float64 so Q^T Q = I to ~1e-7)."""
    q, r = torch.linalg.qr(torch.randn((n, n), generator=generator, dtype=torch.float32).double())
    return (q * torch.sign(torch.diagonal(r)).unsqueeze(0)).float()


def positive_int(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


# ---------------------------------------------------------------------------------------------
# capacity matching


def fit_width(count: Callable[[int], int], target: int, *, step: int = 1) -> int:
    """The multiple of `step` (>= step) whose count is closest to target, for count increasing."""
    lo, hi = step, step
    if count(lo) >= target:
        return lo
    while count(hi) < target:
        lo, hi = hi, hi * 2
    while hi - lo > step:  # invariant: count(lo) < target <= count(hi)
        mid = (lo + hi) // (2 * step) * step
        lo, hi = (mid, hi) if count(mid) < target else (lo, mid)
    return lo if target - count(lo) <= count(hi) - target else hi


def match_widths(count: Callable[[int, int], int], target: int, *, default_fine: Callable[[int], int],
                 coarse_step: int = 1, fine_step: int = 1, tolerance: float = 0.01,
                 what: str = "model") -> tuple[int, int]:
    """(coarse, fine) widths whose count is within `tolerance` of target.

    The coarse width is fitted with the fine one at its default (e.g. d_embed = d_model); for it
    and its two neighbours the candidates are the default fine width and the fitted one. Among
    those within tolerance the one whose fine width is nearest its default wins (the most
    standard shape; then the smaller gap); if none is, a ValueError names the closest.
    """
    positive_int("target", target)
    if not 0 < tolerance < 1:
        raise ValueError(f"tolerance must be in (0, 1), got {tolerance!r}")
    coarse = fit_width(lambda c: count(c, default_fine(c)), target, step=coarse_step)
    candidates = []
    for c in (coarse - coarse_step, coarse, coarse + coarse_step):
        if c >= coarse_step:
            for f in (default_fine(c), fit_width(lambda f, c=c: count(c, f), target, step=fine_step)):
                candidates.append((abs(count(c, f) - target) / target, c, f))
    ok = [cand for cand in candidates if cand[0] <= tolerance]
    if ok:
        _, c, f = min(ok, key=lambda cand: (abs(cand[2] - default_fine(cand[1])), cand[0]))
        return c, f
    _, c, f = min(candidates)
    raise ValueError(f"no {what} within {tolerance:.0%} of {target} parameters "
                     f"(closest: {count(c, f)} at widths {c}, {f}; try another n_layer)")


# ---------------------------------------------------------------------------------------------
# stacked RNN language model (LSTM, GRU)


@dataclass(frozen=True)
class RNNConfig:
    """n_layer stacked recurrent layers of d_model units on embeddings of width d_embed."""

    n_layer: int = 2
    d_model: int = 256
    d_embed: int | None = None  # default d_model; the fine knob of capacity matching

    def __post_init__(self) -> None:
        positive_int("n_layer", self.n_layer)
        positive_int("d_model", self.d_model)
        if self.d_embed is not None:
            positive_int("d_embed", self.d_embed)

    @property
    def embed_dim(self) -> int:
        return self.d_model if self.d_embed is None else self.d_embed


class RecurrentLayer(nn.Module):
    """One gated RNN layer over [E, B, L, d_in] -> [E, B, L, d_model] (subclasses give the cell).

    w_ih [E, d_in, G*h] and bias [E, G*h] project every timestep at once (one baddbmm); the
    time loop then only does the recurrent product h_{t-1} w_hh (w_hh [E, h, G*h], a baddbmm
    batched over members). Gate blocks follow torch.nn.LSTM/GRU's order.

    Two implementations of the time loop give the same numbers (up to float rounding):
    `fused` (the default) runs it inside a torch.autograd.Function with a hand-written
    backward-through-time (`forward_fused`), so autograd records one node per layer instead of
    ~10 per timestep; `forward_reference` is the plain autograd loop, kept as the reference.
    """

    gates = 1
    torch_class: type[nn.RNNBase] = nn.RNNBase  # the torch.nn twin (nn.LSTM, nn.GRU)

    def __init__(self, E: int, d_in: int, d_model: int) -> None:
        super().__init__()
        G = self.gates
        self.d_in, self.d_model = d_in, d_model
        self.fused = True  # RecurrentModel.set_fused switches it
        self.w_ih = nn.Parameter(torch.empty(E, d_in, G * d_model))
        self.bias = nn.Parameter(torch.empty(E, G * d_model))
        self.w_hh = nn.Parameter(torch.empty(E, d_model, G * d_model))

    def reset_member(self, e: int, generator: torch.Generator) -> None:
        """Glorot-uniform input kernel, an orthogonal h x h block per gate, zero bias."""
        h = self.d_model
        with torch.no_grad():
            self.w_ih[e].copy_(glorot_uniform((self.d_in, self.gates * h), generator))
            for g in range(self.gates):
                self.w_hh[e, :, g * h:(g + 1) * h].copy_(orthogonal(h, generator))
            self.bias[e].zero_()

    def recurrent_bias(self) -> Tensor:
        """[E, G*h]: the bias added to h_{t-1} W_hh (torch.nn's bias_hh); zero unless a cell has one."""
        return self.w_hh.new_zeros(self.w_hh.shape[0], self.w_hh.shape[2])

    def member_as_torch(self, e: int) -> nn.RNNBase:
        """Member e as a one-layer, batch-first torch.nn LSTM/GRU with the same weights: for use
        outside bayesbench, and an independent check that the gates are the standard ones."""
        twin = self.torch_class(self.d_in, self.d_model, batch_first=True).to(self.w_ih)
        with torch.no_grad():
            twin.weight_ih_l0.copy_(self.w_ih[e].T)
            twin.weight_hh_l0.copy_(self.w_hh[e].T)
            twin.bias_ih_l0.copy_(self.bias[e])
            twin.bias_hh_l0.copy_(self.recurrent_bias()[e])
        return twin

    def input_projection(self, x: Tensor) -> Tensor:
        """x W_ih + b for every timestep, time-major: [L, E, B, G*h] (contiguous per step)."""
        E, B, L, _ = x.shape
        flat = x.transpose(1, 2).reshape(E, L * B, self.d_in)  # rows ordered (t, b)
        xp = torch.baddbmm(self.bias.unsqueeze(1), flat, self.w_ih)
        return xp.view(E, L, B, -1).transpose(0, 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.forward_fused(x) if self.fused else self.forward_reference(x)

    def forward_fused(self, x: Tensor) -> Tensor:  # pragma: no cover
        raise NotImplementedError

    def forward_reference(self, x: Tensor) -> Tensor:  # pragma: no cover
        raise NotImplementedError

    def extra_repr(self) -> str:
        return f"E={self.w_hh.shape[0]}, d_in={self.d_in}, d_model={self.d_model}, fused={self.fused}"


class RecurrentModel(EnsembleModel):
    """E independent stacked RNNs: embed -> n_layer recurrent layers -> LayerNorm -> head."""

    layer_class: type[RecurrentLayer] = RecurrentLayer

    def __init__(self, shape: TaskShape, cfg: RNNConfig, ensemble: int = 1) -> None:
        super().__init__(shape, ensemble)
        self.cfg = cfg
        self.embed = InputEmbedding(ensemble, shape, cfg.embed_dim)
        dims = [cfg.embed_dim] + [cfg.d_model] * cfg.n_layer
        self.layers = nn.ModuleList(self.layer_class(ensemble, dims[i], cfg.d_model) for i in range(cfg.n_layer))
        self.ln_f = EnsembleLayerNorm(ensemble, cfg.d_model)
        self.head = EnsembleLinear(ensemble, cfg.d_model, shape.num_classes)

    def forward(self, tokens: Tensor, header: Tensor | None = None) -> Tensor:
        self.check_inputs(tokens, header)
        x = self.embed(tokens, header)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.ln_f(x))

    def set_fused(self, fused: bool) -> None:
        """Switch every layer between the fused time loop (hand-written backward) and the
        autograd reference loop; parameters and results are the same either way."""
        for layer in self.layers:
            layer.fused = bool(fused)


def input_projection_grads(ctx, d_pre: Tensor, flat: Tensor, w_ih: Tensor) -> tuple[Tensor | None, ...]:
    """(dx, dW_ih, d bias) of pre = x W_ih + b, all steps at once, for a fused scan's backward.

    d_pre [E, L*B, G] and flat [E, L*B, d] have rows ordered (t, b); ctx.x_shape is x's
    [E, B, L, d]; a gradient autograd does not need (ctx.needs_input_grad[0..2]) is None.
    """
    d_x = d_w_ih = d_bias = None
    if ctx.needs_input_grad[0]:
        E, B, L, d = ctx.x_shape
        d_x = torch.bmm(d_pre, w_ih.transpose(1, 2)).view(E, L, B, d).transpose(1, 2)
    if ctx.needs_input_grad[1]:
        d_w_ih = torch.bmm(flat.transpose(1, 2), d_pre)
    if ctx.needs_input_grad[2]:
        d_bias = d_pre.sum(dim=1)
    return d_x, d_w_ih, d_bias


def recurrent_weight_grad(out: Tensor, d_pre: Tensor, w_hh: Tensor) -> Tensor:
    """dW_hh of pre_t += h_{t-1} W_hh with h_{-1} = 0: one bmm over steps 1.. (out [E, L, B, h])."""
    E, L, B, h = out.shape
    if L == 1:
        return torch.zeros_like(w_hh)
    return torch.bmm(out[:, :-1].reshape(E, (L - 1) * B, h).transpose(1, 2), d_pre[:, B:])


def match_rnn(model_class: type[RecurrentModel], shape: TaskShape, target: int, *, n_layer: int = 2,
              tolerance: float = 0.01) -> RNNConfig:
    """The RNNConfig of `n_layer` layers within tolerance of target: d_model, then d_embed."""
    positive_int("n_layer", n_layer)
    make = lambda d, de: RNNConfig(n_layer=n_layer, d_model=d, d_embed=de)  # noqa: E731
    d, de = match_widths(lambda d, de: meta_params(lambda: model_class(shape, make(d, de))), target,
                         default_fine=lambda d: d, tolerance=tolerance, what=model_class.__name__)
    return make(d, None if de == d else de)


def build_rnn(model_class: type[RecurrentModel], shape: TaskShape, ensemble: int,
              match_params: int | None, cfg: dict) -> RecurrentModel:
    """Shared builder: RNNConfig(**cfg), or match_params=N (with optional n_layer) to fit widths."""
    if match_params is None:
        return model_class(shape, RNNConfig(**cfg), ensemble)
    extra = set(cfg) - {"n_layer", "tolerance"}
    if extra:
        raise ValueError(f"match_params fits the widths itself; do not also give {sorted(extra)}")
    return model_class(shape, match_rnn(model_class, shape, int(match_params), **cfg), ensemble)
