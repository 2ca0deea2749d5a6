"""Stacked LSTM baseline (Paper II: the architecture without content-based routing).

Per layer, gates [i, f, g, o] = x_t W_ih + b + h_{t-1} W_hh (torch.nn.LSTM's order),
c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g), h_t = sigmoid(o) tanh(c_t). Plain stacking (no
residuals, no per-layer norm: the standard baseline), token + position (+ header) embedding in,
a final LayerNorm and a linear head out. Init: Glorot-uniform input kernels, an orthogonal
recurrent block per gate, bias 0 except the forget gate's 1 (Jozefowicz et al. 2015).

The time loop runs in `LSTMScan`, a torch.autograd.Function with a hand-written
backward-through-time (the layer's `forward_reference` is the plain autograd loop it is
tested against).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from .base import TaskShape
from .recurrent import (
    RecurrentLayer,
    RecurrentModel,
    RNNConfig,
    build_rnn,
    input_projection_grads,
    recurrent_weight_grad,
)
from .registry import register_model


class LSTMLayer(RecurrentLayer):
    gates = 4
    torch_class = nn.LSTM

    def reset_member(self, e: int, generator: torch.Generator) -> None:
        super().reset_member(e, generator)
        h = self.d_model
        with torch.no_grad():
            self.bias[e, h:2 * h].fill_(1.0)  # forget gate

    def forward_fused(self, x: Tensor) -> Tensor:
        return LSTMScan.apply(x, self.w_ih, self.bias, self.w_hh).transpose(1, 2)  # [E, B, L, h]

    def forward_reference(self, x: Tensor) -> Tensor:
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

    def recurrent_step(self, x: Tensor, state: dict[str, Tensor] | None) -> tuple[Tensor, dict[str, Tensor]]:
        """One position of x [E, B, d_in]: the gates from x and h_{t-1}, then c_t and h_t, the state
        carried ([E, B, h] each)."""
        h = self.d_model
        h_t = x.new_zeros(x.shape[0], x.shape[1], h) if state is None else state["h"]
        c_t = torch.zeros_like(h_t) if state is None else state["c"]
        gates = torch.baddbmm(torch.baddbmm(self.bias.unsqueeze(1), x, self.w_ih), h_t, self.w_hh)
        sig = torch.sigmoid(gates)
        i, f, o = sig[..., :h], sig[..., h:2 * h], sig[..., 3 * h:]
        c_t = f * c_t + i * torch.tanh(gates[..., 2 * h:3 * h])
        h_t = o * torch.tanh(c_t)
        return h_t, {"h": h_t, "c": c_t}


class LSTMScan(torch.autograd.Function):
    """The LSTM layer (input projection and time loop) with a hand-written backward-through-time.

    forward(x [E, B, L, d], w_ih [E, d, 4h], bias [E, 4h], w_hh [E, h, 4h]) -> hidden states
    [E, L, B, h] (time-major per member) from h_{-1} = c_{-1} = 0. The pre-activations of all
    steps, x W_ih + b, are one baddbmm into a buffer; step t adds h_{t-1} w_hh to its slice in
    place (one baddbmm_, batched over members) and a few elementwise ops write preallocated
    per-step views. No autograd graph is recorded.

    tanh is computed as 2 sigmoid(2x) - 1 (one sigmoid over all four gates; torch's CPU tanh
    costs about three sigmoids): the g-gate columns of W_ih, b, W_hh are doubled and the cell is
    carried as 2c, all exact in floating point, so only the rounding of the final -1 differs
    from torch.tanh (~1 ulp of 1, absolute).

    backward: the local derivatives of all steps are formed at once (vectorised over time) in
    the gradient buffer itself, so the reverse loop only carries dh and dc: per step one
    baddbmm_ (dh_{t-1} = dout_{t-1} + dgates_t w_hh^T) and four in-place elementwise ops. The
    weight gradients are single bmms over all steps at the end (dW_hh: [E, h, L*B] @
    [E, L*B, 4h]), as are the input projection's (dW_ih, d bias, dx).
    """

    @staticmethod
    def forward(ctx, x: Tensor, w_ih: Tensor, bias: Tensor, w_hh: Tensor) -> Tensor:
        E, B, L, d = x.shape
        G = w_hh.shape[-1]
        h = G // 4
        scale = x.new_ones(4, 1)
        scale[2] = 2.0  # g-gate columns doubled (exact): sigmoid(2 g) gives tanh(g)
        flat = x.transpose(1, 2).reshape(E, L * B, d)  # rows ordered (t, b)
        act = torch.baddbmm((bias.reshape(E, 4, h) * scale).view(E, 1, G), flat,
                            (w_ih.reshape(E, d, 4, h) * scale).view(E, d, G))
        act = act.view(E, L, B, 4, h)  # pre-activations, then [i, f, 2 tanh(g), o] in place
        w2 = (w_hh.reshape(E, h, 4, h) * scale).view(E, h, G)
        cell2 = x.new_empty(E, L, B, h)  # 2 c_t
        tanh_c = x.new_empty(E, L, B, h)
        out = x.new_empty(E, L, B, h)
        minus1, minus2 = x.new_full((), -1.0), x.new_full((), -2.0)
        A = act.view(E, L, B, G).unbind(1)
        I, F, G2, O = (v.unbind(1) for v in act.unbind(3))
        C2, TC, H = cell2.unbind(1), tanh_c.unbind(1), out.unbind(1)
        for t in range(L):
            if t:
                A[t].baddbmm_(H[t - 1], w2)
            A[t].sigmoid_()
            torch.add(minus2, G2[t], alpha=4, out=G2[t])  # 4 sigmoid(2g) - 2 = 2 tanh(g)
            if t:
                torch.mul(F[t], C2[t - 1], out=C2[t])
                C2[t].addcmul_(I[t], G2[t])  # 2c_t = f 2c_{t-1} + i 2g
            else:
                torch.mul(I[t], G2[t], out=C2[t])
            torch.sigmoid(C2[t], out=TC[t])
            torch.add(minus1, TC[t], alpha=2, out=TC[t])  # tanh(c_t)
            torch.mul(O[t], TC[t], out=H[t])
        ctx.save_for_backward(flat, w_ih, w_hh, act, cell2, tanh_c, out)
        ctx.x_shape = x.shape
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out: Tensor) -> tuple[Tensor | None, ...]:
        flat, w_ih, w_hh, act, cell2, tanh_c, out = ctx.saved_tensors
        E, L, B, _, h = act.shape
        G = 4 * h
        i, f, g2, o = act.unbind(3)
        # dc_t = dh_t o (1 - tanh(c)^2) + dc_{t+1} f_{t+1};  with g = g2 / 2 and c = cell2 / 2:
        # d[i, f, g, o]_pre = [dc g i(1-i), dc c_{t-1} f(1-f), dc i (1-g^2), dh tanh(c) o(1-o)].
        # The factors of dc (doubled, as the loop carries dc / 2: exact) and of dh go into the
        # gradient buffer first, for all steps at once; the loop multiplies them in place.
        d_gates = torch.addcmul(act, act, act, value=-1)  # s (1 - s) in the i, f, o slots
        d_i, d_f, d_g, d_o = d_gates.unbind(3)
        d_i.mul_(g2)
        d_f[:, 0].zero_()  # c_{-1} = 0
        d_f[:, 1:].mul_(cell2[:, :-1])
        torch.addcmul(act.new_full((), 2.0), g2, g2, value=-0.5, out=d_g).mul_(i)
        d_o.mul_(tanh_c)
        # (dc_t / 2) / dh_t = o (1 - tanh(c)^2) / 2; the loop turns it into dc_t / 2 in place
        dc = torch.addcmul(act.new_full((), 0.5), tanh_c, tanh_c, value=-0.5).mul_(o)
        dh = d_out.clone(memory_format=torch.contiguous_format)  # dout_t, then dh_t
        w_t = w_hh.transpose(1, 2)
        DGf, DGifg, DGo = d_gates.view(E, L, B, G).unbind(1), d_gates[..., :3, :].unbind(1), d_o.unbind(1)
        DH, DC, F = dh.unbind(1), dc.unbind(1), f.unbind(1)
        for t in range(L - 1, -1, -1):
            if t < L - 1:
                DH[t].baddbmm_(DGf[t + 1], w_t)  # dh_t = dout_t + dgates_{t+1} w_hh^T
                DC[t].mul_(DH[t]).addcmul_(DC[t + 1], F[t + 1])
            else:
                DC[t].mul_(DH[t])
            DGifg[t].mul_(DC[t].unsqueeze(2))
            DGo[t].mul_(DH[t])
        d_gates = d_gates.view(E, L * B, G)
        d_w_hh = recurrent_weight_grad(out, d_gates, w_hh) if ctx.needs_input_grad[3] else None
        return (*input_projection_grads(ctx, d_gates, flat, w_ih), d_w_hh)


class LSTM(RecurrentModel):
    """E independent stacked LSTMs: tokens [E, B, L] (+ header) -> logits [E, B, L, C]."""

    layer_class = LSTMLayer


@register_model("lstm", "stacked LSTM (orthogonal recurrent init, forget bias 1), LayerNorm + linear head",
                config=RNNConfig)
def build_lstm(shape: TaskShape, ensemble: int, match_params: int | None = None, **cfg) -> LSTM:
    """n_layer/d_model/d_embed directly, or match_params=N (and n_layer) to fit the widths."""
    return build_rnn(LSTM, shape, ensemble, match_params, cfg)
