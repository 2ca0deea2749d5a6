"""Flat per-member AdamW: the whole ensemble's parameters in one buffer, one update for all.

`torch.optim.AdamW` (single-tensor path) and a per-parameter loop for the per-member gradient
norms and clipping dispatch about 25 small ops per parameter tensor per step, and the NaN guard
read the losses and norms back to the host. With 78 parameter tensors (the paper-bijection
transformer) that is ~1,400 kernel launches per step, most of them tiny.

Here every parameter is a view into one contiguous buffer, laid out parameter-major: parameter i
occupies ``flat[o_i : o_i + E*n_i]`` as its own contiguous ``[E, ...]`` tensor, so models, custom
ops and checkpoints see ordinary contiguous parameters. Gradients live in a second buffer of the
same layout (autograd accumulates into the views in place). A *segment* is member e's slice of
parameter i; ``lengths`` lists the P*E segment lengths in buffer order. Then one step is:

- per-member squared gradient norms: one ``segment_reduce`` over the squared gradient buffer;
- the NaN/inf guard on the device: a member whose loss or gradient norm is not finite stops being
  updated (``alive``), with no host read;
- clipping by torch's rule (scale ``min(1, max_norm / (norm_e + 1e-6))``) and the guard's mask as
  one per-element scale;
- AdamW (decoupled weight decay, bias-corrected moments, torch's formula and order) on the whole
  buffer: about a dozen ops, whatever the number of parameters.

Decayed parameters come first in the buffer, so weight decay is one op on a prefix.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor, nn


def _segments(params: list[Tensor], ensemble: int) -> list[int]:
    return [p.numel() // ensemble for p in params for _ in range(ensemble)]


class FlatMemberAdamW:
    """AdamW over a flattened ensemble model, with per-member clipping and divergence guard.

    Parameters must all have the leading member dimension ``E`` (as every `EnsembleModel`'s
    do), one dtype and one device. `decays(p)` says whether parameter p gets weight decay.
    """

    def __init__(self, model: nn.Module, ensemble: int, *, lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, decays: Callable[[Tensor], bool] = lambda p: True,
                 max_norm: float = 1.0) -> None:
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            raise ValueError("model has no trainable parameters")
        for name, p in model.named_parameters():
            if p.dim() == 0 or p.shape[0] != ensemble:
                raise ValueError(f"parameter {name!r} has shape {list(p.shape)}: every parameter needs the "
                                 f"leading member dimension E={ensemble}")
        dtypes, devices = {p.dtype for p in params}, {p.device for p in params}
        if len(dtypes) != 1 or len(devices) != 1:
            raise ValueError(f"all parameters must share one dtype and device, got {dtypes} on {devices}")
        self.ensemble, self.lr, self.betas, self.eps = ensemble, lr, betas, eps
        self.weight_decay, self.max_norm = weight_decay, max_norm
        decayed = [p for p in params if decays(p)]
        self.params = decayed + [p for p in params if not decays(p)]
        self.n_decay = sum(p.numel() for p in decayed)
        total = sum(p.numel() for p in self.params)
        dtype, device = dtypes.pop(), devices.pop()
        self.param = torch.empty(total, dtype=dtype, device=device)
        self.grad = torch.zeros(total, dtype=dtype, device=device)
        offset = 0
        for p in self.params:
            n = p.numel()
            view = self.param[offset:offset + n].view_as(p)
            view.copy_(p.detach())
            p.data = view  # same Parameter object (modules keep their references), storage in the buffer
            p.grad = self.grad[offset:offset + n].view_as(p)
            offset += n
        self.lengths = torch.tensor(_segments(self.params, ensemble), dtype=torch.long, device=device)
        self.exp_avg = torch.zeros_like(self.param)
        self.exp_avg_sq = torch.zeros_like(self.param)
        self.steps = 0  # AdamW's step count (host integer: bias corrections need no device read)
        self._n_params = len(self.params)

    # -- per-member views
    def member_scale(self, per_member: Tensor) -> Tensor:
        """Expand a per-member vector [E] to one value per buffer element (no host read)."""
        return torch.repeat_interleave(per_member.repeat(self._n_params), self.lengths,
                                       output_size=self.param.numel())

    def member_grad_norms(self) -> Tensor:
        """Global L2 norm of each member's gradient over all its parameters: [E]."""
        seg = torch.segment_reduce(self.grad * self.grad, "sum", lengths=self.lengths)
        return seg.view(self._n_params, self.ensemble).sum(0).sqrt()

    def zero_grad(self) -> None:
        self.grad.zero_()

    # -- the update
    @torch.no_grad()
    def step(self, lr: float, ok: Tensor) -> tuple[Tensor, Tensor]:
        """Clip each member and update those where `ok` ([E] bool) holds and the gradient norm is
        finite; the others are left exactly as they are. Returns (pre-clip norms [E], the members
        updated [E] bool), both on the device."""
        norms = self.member_grad_norms()
        ok = ok & torch.isfinite(norms)
        coef = (self.max_norm / (norms + 1e-6)).clamp(max=1.0)
        coef = torch.where(ok, coef, torch.zeros((), dtype=coef.dtype, device=coef.device))
        g = self.grad.mul_(self.member_scale(coef)).nan_to_num_(0.0, 0.0, 0.0)
        live = self.member_scale(ok.to(self.param.dtype))
        beta1, beta2 = self.betas
        self.steps += 1
        self.exp_avg.lerp_(g, 1 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        bias1 = 1 - beta1 ** self.steps
        bias2_sqrt = math.sqrt(1 - beta2 ** self.steps)
        if self.weight_decay and self.n_decay:
            head = self.param[:self.n_decay]
            head.mul_(live[:self.n_decay].mul(-lr * self.weight_decay).add_(1.0))
        update = self.exp_avg / (self.exp_avg_sq.sqrt() / bias2_sqrt).add_(self.eps)
        self.param.addcmul_(update, live, value=-lr / bias1)
        return norms, ok

    # -- checkpoints
    def state_dict(self) -> dict:
        return {"kind": "flat-member-adamw", "steps": self.steps, "exp_avg": self.exp_avg,
                "exp_avg_sq": self.exp_avg_sq, "shapes": [list(p.shape) for p in self.params],
                "n_decay": self.n_decay}

    def load_state_dict(self, state: dict) -> None:
        if state.get("kind") != "flat-member-adamw":
            raise ValueError("optimizer state was written by another optimizer (a checkpoint from an older "
                             "bayesbench, before the flat per-member AdamW): train this run from step 0")
        if state["shapes"] != [list(p.shape) for p in self.params] or state["n_decay"] != self.n_decay:
            raise ValueError("optimizer state does not match this model's parameters")
        self.steps = int(state["steps"])
        self.exp_avg.copy_(state["exp_avg"])
        self.exp_avg_sq.copy_(state["exp_avg_sq"])
