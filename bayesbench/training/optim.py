"""Flat per-member AdamW: the whole ensemble's parameters in one buffer, one update for all.

`torch.optim.AdamW` (single-tensor path) and a per-parameter loop for the per-member gradient
norms and clipping dispatch about 25 small ops per parameter tensor per step, and the NaN guard
read the losses and norms back to the host. With 78 parameter tensors (the paper-bijection
transformer) that is ~1,400 kernel launches per step, most of them tiny.

Here every parameter is a view into one contiguous buffer, laid out parameter-major: parameter i
occupies ``flat[o_i : o_i + E*n_i]`` as its own contiguous ``[E, ...]`` tensor, so models, custom
ops and checkpoints see ordinary contiguous parameters. After backward the gradients are gathered
into a buffer of the same layout by one concatenation (autograd hands each parameter a fresh
gradient; accumulating into preset views would cost one add per parameter instead). A *segment*
is member e's slice of parameter i; ``lengths`` lists the P*E segment lengths in buffer order.
Then one step is:

- per-member squared gradient norms: one ``segment_reduce`` over the squared gradient buffer;
- the NaN/inf guard on the device: a member whose loss or gradient norm is not finite stops being
  updated (``alive``), with no host read;
- clipping by torch's rule (scale ``min(1, max_norm / (norm_e + 1e-6))``) and the guard's mask:
  on an accelerator one per-element scale (`member_scale`, two kernels); on a CPU, where expanding
  E values to every element costs more than the update itself (an index of N elements, built and
  gathered each step), one foreach op over the parameters' ``[E, n]`` views with an ``[E, 1]`` scale;
- AdamW by torch's own fused kernel (`torch._fused_adamw_`, the kernel behind
  `torch.optim.AdamW(fused=True)`) on two flat tensors: the decayed prefix and the rest;
- a diverged member is put back to its parameters before the step (one lerp with weight 0 or 1);
  with `keep_state` (members stopped on purpose, `trainer`'s `until`) its AdamW moments too.

Per-member learning rates (`member_scales`: member e at `lr * scale_e`, a learning-rate grid as
one ensemble, `bayesbench.sweep.tune`): given its moments, AdamW's step is linear in the rate,
``p_new = p - r * (wd * p + m_hat / (sqrt(v_hat) + eps))``, and the moments do not depend on it.
So the fused kernel runs once at rate 1 (``p1 = p - (wd * p + u)``) and member e's parameters are
``p + r_e * (p1 - p)``: the lerp that restores a diverged member, with weight ``r_e`` (0 for a
diverged one) instead of 0 or 1. One rate for every member keeps the kernel at that rate.

About 25 kernel launches in all, whatever the number of parameter tensors.

Decayed parameters come first in the buffer, so weight decay is one op on a prefix.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Callable

import torch
from torch import Tensor, nn


def _segments(params: Sequence[Tensor], ensemble: int) -> list[int]:
    return [p.numel() // ensemble for p in params for _ in range(ensemble)]


class FlatMemberAdamW:
    """AdamW over a flattened ensemble model, with per-member clipping and divergence guard.

    Parameters must all have the leading member dimension ``E`` (as every `EnsembleModel`'s
    do), one dtype and one device. `decays(p)` says whether parameter p gets weight decay.
    """

    ALGORITHMS = ("adamw", "sgd")

    def __init__(self, model: nn.Module, ensemble: int, *, lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, decays: Callable[[Tensor], bool] = lambda p: True,
                 max_norm: float = 1.0, algorithm: str = "adamw", member_scales=None) -> None:
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
        self.algorithm = algorithm
        self.set_algorithm(algorithm)
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
            p.grad = None
            offset += n
        self.lengths = torch.tensor(_segments(self.params, ensemble), dtype=torch.long, device=device)
        self.exp_avg = torch.zeros_like(self.param)
        self.exp_avg_sq = torch.zeros_like(self.param)
        self.steps = 0  # AdamW's step count (also kept on the device for the fused kernel)
        self._step = torch.zeros((), dtype=torch.float32, device=device)
        self._zero = torch.zeros((), dtype=dtype, device=device)
        self._n_params = len(self.params)
        # per-member broadcasting through the parameters' [E, n_i] views (the CPU path, see step)
        self._broadcast = device.type == "cpu"
        self._param_views = self._member_views(self.param)
        # member e's rate over the step's lr (None: every member at lr, the kernel at lr itself)
        self.member_scales = None
        if member_scales is not None:
            scales = torch.as_tensor(member_scales, dtype=dtype, device=device).flatten()
            if scales.numel() != ensemble:
                raise ValueError(f"member_scales has {scales.numel()} values for an ensemble of {ensemble} members: "
                                 "one learning rate per member")
            if not bool(torch.isfinite(scales).all() and (scales > 0).all()):
                raise ValueError(f"member_scales must be finite and positive, got {scales.tolist()}")
            self.member_scales = scales

    def set_algorithm(self, algorithm: str) -> None:
        """'adamw' (default) or 'sgd': plain SGD, the same clipping and guard, no weight decay or
        momentum (the gradient-dynamics profiler's setting, where the update is -lr * gradient)."""
        if algorithm not in self.ALGORITHMS:
            raise ValueError(f"algorithm must be one of {self.ALGORITHMS}, got {algorithm!r}")
        self.algorithm = algorithm

    # -- per-member views
    def member_scale(self, per_member: Tensor) -> Tensor:
        """Expand per-member values [..., E] to one value per buffer element [..., N] (no host read)."""
        return torch.repeat_interleave(per_member.repeat(*([1] * (per_member.dim() - 1)), self._n_params),
                                       self.lengths, dim=-1, output_size=self.param.numel())

    def _member_views(self, flat: Tensor) -> list[Tensor]:
        """flat (the buffer's layout) as one [E, n_i] view per parameter."""
        views, offset = [], 0
        for p in self.params:
            n = p.numel()
            views.append(flat[offset:offset + n].view(self.ensemble, n // self.ensemble))
            offset += n
        return views

    def scale_members(self, flat: Tensor, per_member: Tensor) -> None:
        """flat *= per_member[e] on member e's elements, in place, by one foreach op over the
        [E, n_i] views (flat: a buffer-layout tensor, per_member: [E]); the CPU path of `step`."""
        torch._foreach_mul_(self._member_views(flat), [per_member.view(-1, 1)] * self._n_params)

    def restore_members(self, before: Tensor, dead: Tensor, flat: Tensor | None = None) -> None:
        """Put the members where `dead` ([E], 0 or 1) is 1 of `flat` (default: the parameters; a
        buffer-layout tensor) back to `before`, by one foreach lerp over the [E, n_i] views; the
        CPU path of `step`."""
        views = self._param_views if flat is None else self._member_views(flat)
        torch._foreach_lerp_(views, self._member_views(before), [dead.view(-1, 1)] * self._n_params)

    def member_grad_norms(self) -> Tensor:
        """Global L2 norm of each member's gradient over all its parameters: [E]."""
        if self.ensemble == 1:
            return torch.linalg.vector_norm(self.grad).view(1)
        seg = torch.segment_reduce(self.grad * self.grad, "sum", lengths=self.lengths)
        return seg.view(self._n_params, self.ensemble).sum(0).sqrt()

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def gather_grads(self) -> Tensor:
        """Concatenate the parameters' gradients (after backward) into the flat buffer, in one op;
        a parameter that got no gradient counts as zero. Returns the buffer."""
        grads = [p.grad.reshape(-1) if p.grad is not None
                 else torch.zeros(p.numel(), dtype=self.param.dtype, device=self.param.device) for p in self.params]
        self.grad = torch.cat(grads)
        return self.grad

    # -- the update
    @torch.no_grad()
    def step(self, lr: float, alive: Tensor, loss: Tensor, *, keep_state: bool = False) -> tuple[Tensor, Tensor]:
        """Clip each member and update those that are `alive` ([E] bool) and whose `loss` ([E])
        and gradient norm are finite; the others keep their parameters exactly (and, with
        `keep_state`, their AdamW moments too, at the cost of two more copies per step; without
        it a member left out sees its moments decay, which only matters if it were ever updated
        again). Gradients are read from the parameters' `.grad`. Returns (pre-clip norms [E], the
        members updated [E]), both on the device: nothing is read back to the host.
        """
        flat_grads = self.gather_grads()
        norms = self.member_grad_norms()
        both = norms + loss.detach().to(norms.dtype)
        ok = alive & ((both - both) == 0)  # x - x == 0 exactly when x is finite (nan and inf give nan)
        coef = (self.max_norm / (norms + 1e-6)).clamp_(max=1.0)  # torch.nn.utils.clip_grad_norm_'s rule
        coef = torch.where(ok, coef, self._zero)
        dead = (~ok).to(coef.dtype)
        dead_member = dead  # [E]; `dead` below may be expanded to every element
        if self._broadcast:
            self.scale_members(flat_grads, coef)
        else:  # both per-member values expanded in one pass (two kernels)
            scale, dead = self.member_scale(torch.stack([coef, dead]))
            flat_grads.mul_(scale)
        flat_grads.nan_to_num_(0.0, 0.0, 0.0)  # a diverged member's nan/inf gradient becomes 0
        if self.algorithm == "sgd":  # a zero gradient leaves a diverged member exactly where it is
            self.steps += 1
            self._step.add_(1)
            if self.member_scales is None:
                self.param.add_(flat_grads, alpha=-lr)
            else:
                rate = self.member_scales * -lr
                if self._broadcast:
                    self.scale_members(flat_grads, rate)
                else:
                    flat_grads.mul_(self.member_scale(rate))
                self.param.add_(flat_grads)
            return norms, ok
        before = self.param.clone()
        moments = (self.exp_avg.clone(), self.exp_avg_sq.clone()) if keep_state else ()
        self._step.add_(1)
        self.steps += 1
        beta1, beta2 = self.betas
        views = self._views(flat_grads)
        kernel_lr = lr if self.member_scales is None else 1.0  # per-member rates: the step at rate 1, then scaled
        for (params, grads, m, v), decay in zip(views, (self.weight_decay, 0.0)):
            if params:
                torch._fused_adamw_(params, grads, m, v, [], [self._step] * len(params), lr=kernel_lr, beta1=beta1,
                                    beta2=beta2, weight_decay=decay, eps=self.eps, amsgrad=False, maximize=False)
        if self.member_scales is not None:
            # member e moves r_e of the way from `before` to the rate-1 step (r_e = 0: a diverged member stays)
            rate = self.member_scales * lr * (1.0 - dead_member)
            if self._broadcast:
                torch._foreach_lerp_(self._member_views(before), self._param_views, [rate.view(-1, 1)] * self._n_params)
            else:
                before.lerp_(self.param, self.member_scale(rate))
            self.param.copy_(before)
            if self._broadcast:
                for flat, saved in zip((self.exp_avg, self.exp_avg_sq), moments):
                    self.restore_members(saved, dead, flat)
            else:
                for flat, saved in zip((self.exp_avg, self.exp_avg_sq), moments):
                    flat.lerp_(saved, dead)
            return norms, ok
        if self._broadcast:
            self.restore_members(before, dead)  # a diverged member exactly as it was
            for flat, saved in zip((self.exp_avg, self.exp_avg_sq), moments):
                self.restore_members(saved, dead, flat)
        else:
            self.param.lerp_(before, dead)  # per element: weight 1 restores exactly, weight 0 keeps the update
            for flat, saved in zip((self.exp_avg, self.exp_avg_sq), moments):
                flat.lerp_(saved, dead)
        return norms, ok

    def _views(self, g: Tensor) -> list[tuple[list[Tensor], list[Tensor], list[Tensor], list[Tensor]]]:
        """(params, grads, exp_avgs, exp_avg_sqs) of the decayed prefix and of the rest, as one
        flat tensor each (so the fused kernel is one launch per part)."""
        cut = self.n_decay
        parts = []
        for lo, hi in ((0, cut), (cut, self.param.numel())):
            if hi > lo:
                parts.append(([self.param[lo:hi]], [g[lo:hi]], [self.exp_avg[lo:hi]], [self.exp_avg_sq[lo:hi]]))
            else:
                parts.append(([], [], [], []))
        return parts

    # -- checkpoints
    def state_dict(self) -> dict:
        return {"kind": "flat-member-adamw", "algorithm": self.algorithm, "steps": self.steps, "exp_avg": self.exp_avg,
                "exp_avg_sq": self.exp_avg_sq, "shapes": [list(p.shape) for p in self.params],
                "n_decay": self.n_decay}

    def load_state_dict(self, state: dict) -> None:
        if state.get("kind") != "flat-member-adamw":
            raise ValueError("optimizer state was written by another optimizer (a checkpoint from an older "
                             "bayesbench, before the flat per-member AdamW): train this run from step 0")
        if state["shapes"] != [list(p.shape) for p in self.params] or state["n_decay"] != self.n_decay:
            raise ValueError("optimizer state does not match this model's parameters")
        self.set_algorithm(state.get("algorithm", "adamw"))
        self.steps = int(state["steps"])
        self._step.fill_(self.steps)
        self.exp_avg.copy_(state["exp_avg"])
        self.exp_avg_sq.copy_(state["exp_avg_sq"])


def select_members(state: dict, members: list[int], ensemble: int) -> dict:
    """The optimiser state (from `state_dict`) of an `ensemble`-member run restricted to some of
    its members, in the given order: to continue a subset of a run's seeds."""
    index = torch.tensor(members, dtype=torch.long)
    out = dict(state)
    for key in ("exp_avg", "exp_avg_sq"):
        flat, parts, offset = state[key], [], 0
        for shape in state["shapes"]:
            n = math.prod(shape)
            block = flat[offset:offset + n].view(ensemble, -1)
            parts.append(block.index_select(0, index.to(flat.device)).reshape(-1))
            offset += n
        out[key] = torch.cat(parts)
    out["shapes"] = [[len(members), *shape[1:]] for shape in state["shapes"]]
    out["n_decay"] = state["n_decay"] // ensemble * len(members)
    return out


# ---------------------------------------------------------------- per-parameter reference versions

def member_grad_norms(params: list[Tensor], ensemble: int) -> Tensor:
    """Global L2 gradient norm of each member over its slice of every parameter: [E]. The plain
    per-parameter loop (the reference `FlatMemberAdamW.member_grad_norms` is tested against, and
    what a hand-written loop over parameters with a leading member dimension can use)."""
    sq = torch.zeros(ensemble, device=params[0].device, dtype=torch.float32)
    for p in params:
        if p.grad is not None:
            sq += p.grad.float().pow(2).reshape(ensemble, -1).sum(1)
    return sq.sqrt()


def clip_per_member(params: list[Tensor], norms: Tensor, max_norm: float) -> None:
    """Scale member e's gradients by min(1, max_norm / (norm_e + 1e-6)) (torch's clip rule)."""
    coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    for p in params:
        if p.grad is not None:
            p.grad.mul_(coef.view(-1, *([1] * (p.dim() - 1))).to(p.grad.dtype))
