"""Stacked LSTM baseline (Paper II: the architecture without content-based routing).

Per layer, gates [i, f, g, o] = x_t W_ih + b + h_{t-1} W_hh (torch.nn.LSTM's order),
c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g), h_t = sigmoid(o) tanh(c_t). Plain stacking (no
residuals, no per-layer norm: the standard baseline), token + position (+ header) embedding in,
a final LayerNorm and a linear head out. Init: Glorot-uniform input kernels, an orthogonal
recurrent block per gate, bias 0 except the forget gate's 1 (Jozefowicz et al. 2015).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .base import TaskShape
from .recurrent import RecurrentLayer, RecurrentModel, RNNConfig, build_rnn, match_rnn
from .registry import register_model


class LSTMLayer(RecurrentLayer):
    gates = 4

    def reset_member(self, e: int, generator: torch.Generator) -> None:
        super().reset_member(e, generator)
        h = self.d_model
        with torch.no_grad():
            self.bias[e, h:2 * h].fill_(1.0)  # forget gate

    def forward(self, x: Tensor) -> Tensor:
        xp = self.input_projection(x)  # [L, E, B, 4h]
        E, B, h = x.shape[0], x.shape[1], self.d_model
        h_t = x.new_zeros(E, B, h)
        c_t = x.new_zeros(E, B, h)
        out = []
        for t in range(xp.shape[0]):
            gates = torch.baddbmm(xp[t], h_t, self.w_hh)
            sig = torch.sigmoid(gates)
            i, f, o = sig[..., :h], sig[..., h:2 * h], sig[..., 3 * h:]
            c_t = torch.addcmul(f * c_t, i, torch.tanh(gates[..., 2 * h:3 * h]))
            h_t = o * torch.tanh(c_t)
            out.append(h_t)
        return torch.stack(out, dim=2)  # [E, B, L, h]


class LSTM(RecurrentModel):
    """E independent stacked LSTMs: tokens [E, B, L] (+ header) -> logits [E, B, L, C]."""

    layer_class = LSTMLayer


def match_lstm(shape: TaskShape, target: int, *, n_layer: int = 2, tolerance: float = 0.01) -> RNNConfig:
    """An LSTM config with `n_layer` layers within `tolerance` of `target` parameters."""
    return match_rnn(LSTM, shape, target, n_layer=n_layer, tolerance=tolerance)


@register_model("lstm", "stacked LSTM (orthogonal recurrent init, forget bias 1), LayerNorm + linear head")
def build_lstm(shape: TaskShape, ensemble: int, match_params: int | None = None, **cfg) -> LSTM:
    """n_layer/d_model/d_embed directly, or match_params=N (and n_layer) to fit the widths."""
    return build_rnn(LSTM, shape, ensemble, match_params, cfg)
