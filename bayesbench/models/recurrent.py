"""The stacked-RNN language model that LSTM and GRU share: config, layer base class, model,
the gradient pieces of their fused backward-through-time, and their capacity matching.

Each cell (lstm.py, gru.py) subclasses `RecurrentLayer` with its gates and its fused scan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import Tensor, nn

from ..checks import positive_int
from .base import EnsembleModel, InputEmbedding, TaskShape, modules_as
from .capacity import match_widths, meta_params
from .initialisers import glorot_uniform, orthogonal
from .layers import EnsembleLayerNorm, EnsembleLinear


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
    # the torch.nn twin (nn.LSTM, nn.GRU), called as (input_size, hidden_size, batch_first=...): a Callable,
    # since nn.RNNBase itself takes the mode first
    torch_class: Callable[..., nn.RNNBase] = nn.RNNBase

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
            twin.get_parameter("weight_ih_l0").copy_(self.w_ih[e].T)
            twin.get_parameter("weight_hh_l0").copy_(self.w_hh[e].T)
            twin.get_parameter("bias_ih_l0").copy_(self.bias[e])
            twin.get_parameter("bias_hh_l0").copy_(self.recurrent_bias()[e])
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
        for layer in modules_as(self.layers, RecurrentLayer):
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

    def make(d: int, de: int | None) -> RNNConfig:  # de None: d_embed = d_model
        return RNNConfig(n_layer=n_layer, d_model=d, d_embed=de)

    d, de = match_widths(lambda d, de: meta_params(lambda: model_class(shape, make(d, de))), target,
                         default_fine=lambda d: d, tolerance=tolerance, what=model_class.__name__)
    return make(d, None if de == d else de)


R = TypeVar("R", bound="RecurrentModel")


def build_rnn(model_class: type[R], shape: TaskShape, ensemble: int, match_params: int | None, cfg: dict) -> R:
    """Shared builder: RNNConfig(**cfg), or match_params=N (with optional n_layer) to fit widths."""
    if match_params is None:
        return model_class(shape, RNNConfig(**cfg), ensemble)
    extra = set(cfg) - {"n_layer", "tolerance"}
    if extra:
        raise ValueError(f"match_params fits the widths itself; do not also give {sorted(extra)}")
    return model_class(shape, match_rnn(model_class, shape, int(match_params), **cfg), ensemble)
