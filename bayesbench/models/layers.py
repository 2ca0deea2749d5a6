"""Ensemble layers: every parameter has a leading member dimension E.

One forward/backward pass through these layers trains E independent models: member e only
ever touches slice [e] of every parameter, so gradients, AdamW state and (with per-member
clipping in the trainer) updates never mix. Inputs are [E, ..., features].

Initialisation is per member: `reset_member(e, generator)` draws slice [e] from that member's
own CPU generator, so a model built with seeds [s_0, ..., s_{E-1}] holds in slot e exactly the
numbers of a one-member model built with seed s_e (see `EnsembleModel.init_members`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .initialisers import normal


class EnsembleLinear(nn.Module):
    """y = x W_e + b_e for each member e, as one batched matmul (torch.baddbmm).

    weight: [E, in, out] (stored input-major so no transpose is needed), bias: [E, out].
    `init_std` is the std of the normal weight init (biases start at zero).
    """

    def __init__(self, ensemble: int, in_features: int, out_features: int, bias: bool = True,
                 init_std: float = 0.02) -> None:
        super().__init__()
        self.ensemble, self.in_features, self.out_features = ensemble, in_features, out_features
        self.init_std = init_std
        self.weight = nn.Parameter(torch.empty(ensemble, in_features, out_features))
        self.bias = nn.Parameter(torch.zeros(ensemble, out_features)) if bias else None

    def reset_member(self, e: int, generator: torch.Generator) -> None:
        with torch.no_grad():
            self.weight[e].copy_(normal((self.in_features, self.out_features), self.init_std, generator))
            if self.bias is not None:
                self.bias[e].zero_()

    def forward(self, x: Tensor) -> Tensor:
        E, lead = x.shape[0], x.shape[1:-1]
        if E == 1:  # one member: a plain (add)mm, so the seed dimension costs nothing
            flat, w = x.reshape(-1, self.in_features), self.weight.view(self.in_features, self.out_features)
            y = flat @ w if self.bias is None else torch.addmm(self.bias.view(self.out_features), flat, w)
            return y.view(1, *lead, self.out_features)
        flat = x.reshape(E, -1, self.in_features)
        if self.bias is None:
            y = torch.bmm(flat, self.weight)
        else:
            y = torch.baddbmm(self.bias.unsqueeze(1), flat, self.weight)
        return y.reshape(E, *lead, self.out_features)

    def extra_repr(self) -> str:
        return f"E={self.ensemble}, in={self.in_features}, out={self.out_features}, bias={self.bias is not None}"


class EnsembleEmbedding(nn.Module):
    """Per-member lookup tables, weight [E, num, dim]; ids [E, ...] -> [E, ..., dim].

    The E tables are viewed as one [E*num, dim] table and member e's ids are offset by e*num,
    so the lookup (and its sparse-free backward) is a single F.embedding call.
    """

    def __init__(self, ensemble: int, num_embeddings: int, dim: int, init_std: float = 0.02) -> None:
        super().__init__()
        self.ensemble, self.num_embeddings, self.dim, self.init_std = ensemble, num_embeddings, dim, init_std
        self.weight = nn.Parameter(torch.empty(ensemble, num_embeddings, dim))

    def reset_member(self, e: int, generator: torch.Generator) -> None:
        with torch.no_grad():
            self.weight[e].copy_(normal((self.num_embeddings, self.dim), self.init_std, generator))

    def forward(self, ids: Tensor) -> Tensor:
        E = ids.shape[0]
        offset = (torch.arange(E, device=ids.device) * self.num_embeddings).view(E, *([1] * (ids.dim() - 1)))
        return F.embedding(ids + offset, self.weight.reshape(E * self.num_embeddings, self.dim))

    def extra_repr(self) -> str:
        return f"E={self.ensemble}, num={self.num_embeddings}, dim={self.dim}"


class MemberAffine(torch.autograd.Function):
    """out = y * weight + bias with per-member weight/bias broadcast over the middle dims.

    The same numbers as `torch.addcmul(bias, y, weight)`, with a backward of four ops (autograd's
    addcmul backward takes six: it multiplies by the scalar `value` twice). Every layer norm of
    every model runs through it, so on a GPU this saves two kernel launches per norm per step.
    Forward-mode (`jvp`, used by torch.func.jvp in the routing-law check) and vmap are supported.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(y: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
        return torch.addcmul(bias, y, weight)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        y, weight, _ = inputs
        ctx.save_for_backward(y, weight)
        ctx.save_for_forward(y, weight)

    @staticmethod
    def backward(ctx, grad: Tensor):
        y, weight = ctx.saved_tensors
        dims = tuple(range(1, grad.dim() - 1))
        grad_y = grad * weight if ctx.needs_input_grad[0] else None
        grad_w = (grad * y).sum(dims, keepdim=True) if ctx.needs_input_grad[1] else None
        grad_b = grad.sum(dims, keepdim=True) if ctx.needs_input_grad[2] else None
        return grad_y, grad_w, grad_b

    @staticmethod
    def jvp(ctx, dy: Tensor | None, dweight: Tensor | None, dbias: Tensor | None) -> Tensor:
        y, weight = ctx.saved_tensors
        out = torch.zeros_like(y) if dy is None else dy * weight
        if dweight is not None:
            out = out + y * dweight
        if dbias is not None:
            out = out + dbias
        return out


class EnsembleLayerNorm(nn.Module):
    """LayerNorm over the last dim with a per-member affine (weight, bias: [E, dim])."""

    def __init__(self, ensemble: int, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.ensemble, self.dim, self.eps = ensemble, dim, eps
        self.weight = nn.Parameter(torch.ones(ensemble, dim))
        self.bias = nn.Parameter(torch.zeros(ensemble, dim))

    def reset_member(self, e: int, generator: torch.Generator) -> None:  # (no draws: the generator is unused)
        with torch.no_grad():
            self.weight[e].fill_(1.0)
            self.bias[e].zero_()

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[0] == 1:  # one member: torch's fused layer norm with its affine
            return F.layer_norm(x, (self.dim,), self.weight.view(self.dim), self.bias.view(self.dim), self.eps)
        shape = (x.shape[0],) + (1,) * (x.dim() - 2) + (self.dim,)
        y = F.layer_norm(x, (self.dim,), eps=self.eps)
        return MemberAffine.apply(y, self.weight.view(shape), self.bias.view(shape))

    def extra_repr(self) -> str:
        return f"E={self.ensemble}, dim={self.dim}"


def residual_std(n_residual_layers: int, base: float = 0.02) -> float:
    """GPT-2's scaled init for projections that write into the residual stream."""
    return base / math.sqrt(max(1, n_residual_layers))
