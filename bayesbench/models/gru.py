"""Stacked GRU baseline.

Per layer (torch.nn.GRU's equations and gate order [r, z, n]):
r = sigmoid(x W_ir + h W_hr + b_r), z = sigmoid(x W_iz + h W_hz + b_z),
n = tanh(x W_in + b_in + r * (h W_hn + b_hn)), h_t = (1 - z) n + z h_{t-1}.
Only b_hn of torch's recurrent bias is kept (the others merely duplicate the input bias).
Same stacking, embedding, head and init as the LSTM (orthogonal recurrent blocks, Glorot
input kernels, zero biases).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import TaskShape
from .recurrent import RecurrentLayer, RecurrentModel, RNNConfig, build_rnn, match_rnn
from .registry import register_model


class GRULayer(RecurrentLayer):
    gates = 3

    def __init__(self, E: int, d_in: int, d_model: int) -> None:
        super().__init__(E, d_in, d_model)
        self.bias_hn = nn.Parameter(torch.empty(E, d_model))

    def reset_member(self, e: int, generator: torch.Generator) -> None:
        super().reset_member(e, generator)
        with torch.no_grad():
            self.bias_hn[e].zero_()

    def forward(self, x: Tensor) -> Tensor:
        xp = self.input_projection(x)  # [L, E, B, 3h]
        E, B, h = x.shape[0], x.shape[1], self.d_model
        rec_bias = F.pad(self.bias_hn, (2 * h, 0)).unsqueeze(1)  # [E, 1, 3h]: 0 for r and z, b_hn for n
        h_t = x.new_zeros(E, B, h)
        out = []
        for t in range(xp.shape[0]):
            gh = torch.baddbmm(rec_bias, h_t, self.w_hh)
            rz = torch.sigmoid(xp[t][..., :2 * h] + gh[..., :2 * h])
            r, z = rz[..., :h], rz[..., h:]
            n = torch.tanh(torch.addcmul(xp[t][..., 2 * h:], r, gh[..., 2 * h:]))
            h_t = torch.addcmul(n, z, h_t - n)  # (1 - z) n + z h
            out.append(h_t)
        return torch.stack(out, dim=2)


class GRU(RecurrentModel):
    """E independent stacked GRUs: tokens [E, B, L] (+ header) -> logits [E, B, L, C]."""

    layer_class = GRULayer


def match_gru(shape: TaskShape, target: int, *, n_layer: int = 2, tolerance: float = 0.01) -> RNNConfig:
    """A GRU config with `n_layer` layers within `tolerance` of `target` parameters."""
    return match_rnn(GRU, shape, target, n_layer=n_layer, tolerance=tolerance)


@register_model("gru", "stacked GRU (orthogonal recurrent init), LayerNorm + linear head")
def build_gru(shape: TaskShape, ensemble: int, match_params: int | None = None, **cfg) -> GRU:
    """n_layer/d_model/d_embed directly, or match_params=N (and n_layer) to fit the widths."""
    return build_rnn(GRU, shape, ensemble, match_params, cfg)
