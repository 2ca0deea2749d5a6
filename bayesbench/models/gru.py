"""Stacked GRU baseline.

Per layer (torch.nn.GRU's equations and gate order [r, z, n]):
r = sigmoid(x W_ir + h W_hr + b_r), z = sigmoid(x W_iz + h W_hz + b_z),
n = tanh(x W_in + b_in + r * (h W_hn + b_hn)), h_t = (1 - z) n + z h_{t-1}.
Only b_hn of torch's recurrent bias is kept (the others merely duplicate the input bias).
Same stacking, embedding, head and init as the LSTM (orthogonal recurrent blocks, Glorot
input kernels, zero biases).

The time loop runs in `GRUScan`, a torch.autograd.Function with a hand-written
backward-through-time (the layer's `forward_reference` is the plain autograd loop it is
tested against).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
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


class GRULayer(RecurrentLayer):
    gates = 3
    torch_class = nn.GRU

    def __init__(self, E: int, d_in: int, d_model: int) -> None:
        super().__init__(E, d_in, d_model)
        self.bias_hn = nn.Parameter(torch.empty(E, d_model))

    def reset_member(self, e: int, generator: torch.Generator) -> None:
        super().reset_member(e, generator)
        with torch.no_grad():
            self.bias_hn[e].zero_()

    def recurrent_bias(self) -> Tensor:
        """[E, 3h]: 0 for r and z, b_hn for n (torch.nn.GRU's bias_hh layout)."""
        return F.pad(self.bias_hn, (2 * self.d_model, 0))

    def forward_fused(self, x: Tensor) -> Tensor:
        return GRUScan.apply(x, self.w_ih, self.bias, self.w_hh, self.bias_hn).transpose(1, 2)  # [E, B, L, h]

    def forward_reference(self, x: Tensor) -> Tensor:
        xp = self.input_projection(x)  # [L, E, B, 3h]
        E, B, h = x.shape[0], x.shape[1], self.d_model
        rec_bias = self.recurrent_bias().unsqueeze(1)  # [E, 1, 3h]
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

    def recurrent_step(self, x: Tensor, state: dict[str, Tensor] | None) -> tuple[Tensor, dict[str, Tensor]]:
        """One position of x [E, B, d_in]: r, z, n from x and h_{t-1}, then h_t, the state carried [E, B, h]."""
        h = self.d_model
        h_prev = x.new_zeros(x.shape[0], x.shape[1], h) if state is None else state["h"]
        xp = torch.baddbmm(self.bias.unsqueeze(1), x, self.w_ih)
        gh = torch.baddbmm(self.recurrent_bias().unsqueeze(1), h_prev, self.w_hh)
        rz = torch.sigmoid(xp[..., :2 * h] + gh[..., :2 * h])
        r, z = rz[..., :h], rz[..., h:]
        n = torch.tanh(xp[..., 2 * h:] + r * gh[..., 2 * h:])
        h_t = (1 - z) * n + z * h_prev
        return h_t, {"h": h_t}


class GRUScan(torch.autograd.Function):
    """The GRU layer (input projection and time loop) with a hand-written backward-through-time.

    forward(x [E, B, L, d], w_ih [E, d, 3h], bias [E, 3h], w_hh [E, h, 3h], bias_hn [E, h]) ->
    hidden states [E, L, B, h] (time-major per member) from h_{-1} = 0. The input projections
    of all steps are one baddbmm into a buffer P, whose n block is then moved out (xp_n) and
    replaced by b_hn; step t adds h_{t-1} w_hh to P's slice in place (one baddbmm_, batched over
    members), turns the r, z block into sigmoid(.) and keeps gh_n = h_{t-1} W_hn + b_hn;
    n = tanh(xp_n + r gh_n) and h_t = lerp(n, h_{t-1}, z) = (1 - z) n + z h_{t-1}, all into
    preallocated per-step views. No autograd graph is recorded.

    tanh is computed as 2 sigmoid(2x) - 1 (torch's CPU tanh costs about three sigmoids): the
    n-block columns of W_ih, b, W_hh and b_hn are doubled, exact in floating point, so only the
    rounding of the final -1 differs from torch.tanh (~1 ulp of 1, absolute).

    backward: with dh_t the total gradient of h_t, every step's d[r, z, gh_n]_pre is dh_t times
    a factor known from the forward; the factors of all steps are formed at once in the
    gradient buffer, and the reverse loop is one in-place mul, one addcmul and one baddbmm_ per
    step (dh_{t-1} = dout_{t-1} + dh_t z_t + dP_t w_hh^T). The weight gradients are single bmms
    over all steps at the end (dW_hh: [E, h, L*B] @ [E, L*B, 3h]), as are the input
    projection's (dW_ih, d bias, dx); d b_hn is a sum.
    """

    @staticmethod
    def forward(ctx, x: Tensor, w_ih: Tensor, bias: Tensor, w_hh: Tensor, bias_hn: Tensor) -> Tensor:
        E, B, L, d = x.shape
        G = w_hh.shape[-1]
        h = G // 3
        scale = x.new_ones(3, 1)
        scale[2] = 2.0  # n-block columns doubled (exact): sigmoid(2 a) gives tanh(a)
        flat = x.transpose(1, 2).reshape(E, L * B, d)  # rows ordered (t, b)
        P = torch.baddbmm((bias.reshape(E, 3, h) * scale).view(E, 1, G), flat,
                          (w_ih.reshape(E, d, 3, h) * scale).view(E, d, G)).view(E, L, B, G)
        n = P[..., 2 * h:].clone()  # 2 xp_n, then 2 (xp_n + r gh_n), then n in place
        P[..., 2 * h:].copy_((2 * bias_hn).view(E, 1, 1, h).expand(E, L, B, h))
        w2 = (w_hh.reshape(E, h, 3, h) * scale).view(E, h, G)
        out = x.new_empty(E, L, B, h)
        minus1 = x.new_full((), -1.0)
        Pf = P.unbind(1)
        RZ, R, Z, GHN2 = (P[..., a:b].unbind(1) for a, b in ((0, 2 * h), (0, h), (h, 2 * h), (2 * h, G)))
        N, H = n.unbind(1), out.unbind(1)
        for t in range(L):
            if t:
                Pf[t].baddbmm_(H[t - 1], w2)
            RZ[t].sigmoid_()
            N[t].addcmul_(R[t], GHN2[t]).sigmoid_()
            torch.add(minus1, N[t], alpha=2, out=N[t])  # n = tanh(xp_n + r gh_n)
            if t:
                torch.lerp(N[t], H[t - 1], Z[t], out=H[t])
            else:
                torch.addcmul(N[t], Z[t], N[t], value=-1, out=H[t])  # h_{-1} = 0
        ctx.save_for_backward(flat, w_ih, w_hh, P, n, out)
        ctx.x_shape = x.shape
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out: Tensor) -> tuple[Tensor | None, ...]:
        flat, w_ih, w_hh, P, n, out = ctx.saved_tensors
        E, L, B, G = P.shape
        h = G // 3
        r, z, gh_n2 = P.view(E, L, B, 3, h).unbind(3)  # gh_n2 = 2 gh_n
        # factors of dh_t (filled into the gradient buffer for all steps at once):
        #   dn_pre = dh (1 - z)(1 - n^2),          d gh_n = dn_pre r,   dr_pre = dn_pre gh_n r (1 - r),
        #   dz_pre = dh (h_{t-1} - n) z (1 - z),   dh_{t-1} = dout_{t-1} + dh z + [dr_pre, dz_pre, d gh_n] w_hh^T
        dn_dh = torch.addcmul(P.new_ones(()), n, n, value=-1)
        dn_dh.addcmul_(dn_dh, z, value=-1)
        d_p = torch.addcmul(P, P, P, value=-1).view(E, L, B, 3, h)  # s (1 - s) in the r, z slots
        d_r, d_z, d_ghn = d_p.unbind(3)
        d_r.mul_(gh_n2).mul_(dn_dh).mul_(0.5)
        h_prev_minus_n = torch.neg(n)
        h_prev_minus_n[:, 1:].add_(out[:, :-1])  # h_{-1} = 0
        d_z.mul_(h_prev_minus_n)
        del h_prev_minus_n
        torch.mul(dn_dh, r, out=d_ghn)
        dh = P.new_empty(E, L, B, h)
        dh[:, L - 1].copy_(d_out[:, L - 1])
        w_t = w_hh.transpose(1, 2)
        DP, DPf = d_p.unbind(1), d_p.view(E, L, B, G).unbind(1)
        DH, DOUT, Z = dh.unbind(1), d_out.unbind(1), z.unbind(1)
        for t in range(L - 1, -1, -1):
            DP[t].mul_(DH[t].unsqueeze(2))
            if t:
                torch.addcmul(DOUT[t - 1], DH[t], Z[t], out=DH[t - 1])
                DH[t - 1].baddbmm_(DPf[t], w_t)
        d_p = d_p.view(E, L * B, G)
        # While d_p's n block holds d gh_n: the recurrent side (gh = h_{t-1} w_hh + b_hn).
        d_w_hh = recurrent_weight_grad(out, d_p, w_hh) if ctx.needs_input_grad[3] else None
        d_bias_hn = d_ghn.sum(dim=(1, 2)) if ctx.needs_input_grad[4] else None
        torch.mul(dh, dn_dh, out=d_ghn)  # now d xp_n = dn_pre (d gh_n = dn_pre r is spent)
        return (*input_projection_grads(ctx, d_p, flat, w_ih), d_w_hh, d_bias_hn)


class GRU(RecurrentModel):
    """E independent stacked GRUs: tokens [E, B, L] (+ header) -> logits [E, B, L, C]."""

    layer_class = GRULayer


@register_model("gru", "stacked GRU (orthogonal recurrent init), LayerNorm + linear head",
                config=RNNConfig)
def build_gru(shape: TaskShape, ensemble: int, match_params: int | None = None, **cfg) -> GRU:
    """n_layer/d_model/d_embed directly, or match_params=N (and n_layer) to fit the widths."""
    return build_rnn(GRU, shape, ensemble, match_params, cfg)
