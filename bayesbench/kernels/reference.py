"""Plain PyTorch attention with the same interface, probe and errors as the Triton kernels.

`reference_attention` is the numerical truth the tests compare against (run it in float64) and a
backend of `attention`: forward materialises alpha, backward applies the routing-law formulas
explicitly and fills the probe. `eager_attention` gets the same probe tensors the slow, generic
way (autograd with hooks on the scores, weights and output), as a user without the kernel would;
the benchmarks compare against it.
"""

from __future__ import annotations

import math

import torch
from torch.autograd.function import once_differentiable

from bayesbench.models.attention import attention_weights, causal_mask

from .probe import AttentionProbe

LN2 = math.log(2.0)


def probe_dtype(compute_dtype: torch.dtype) -> torch.dtype:
    """Probe fields are float32, or float64 when the computation itself is float64."""
    return torch.float64 if compute_dtype == torch.float64 else torch.float32


def key_counts(t: int, causal: bool, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """Number of keys each query attends to: i + 1 (causal) or T."""
    if causal:
        return torch.arange(1, t + 1, device=device, dtype=dtype)
    return torch.full((t,), float(t), device=device, dtype=dtype)


def fill_probe(
    probe: AttentionProbe,
    alpha: torch.Tensor,
    u: torch.Tensor,
    b: torch.Tensor,
    dv: torch.Tensor,
    causal: bool,
    scale: float,
    ds: torch.Tensor | None = None,
) -> None:
    """Write every probe field from alpha, u, b (masked entries of b need not be zero) and dv;
    `ds`, when the caller already has dL/ds, is stored as is instead of -alpha * advantage."""
    out = probe_dtype(alpha.dtype)
    alpha, u, b, dv = (x.to(out) for x in (alpha, u, b, dv))
    t = alpha.shape[-1]
    keep = causal_mask(t, alpha.device) if causal else torch.ones(t, t, dtype=torch.bool, device=alpha.device)
    zero = torch.zeros((), dtype=out, device=alpha.device)
    b = torch.where(keep, b, zero)
    expected_b = (alpha * b).sum(-1)
    advantage = torch.where(keep, expected_b.unsqueeze(-1) - b, zero)
    probe.causal, probe.scale = causal, scale
    probe.expected_b = expected_b
    abs_adv = advantage.abs()
    probe.entropy = -torch.special.xlogy(alpha, alpha).sum(-1) / LN2
    probe.mean_abs_advantage = abs_adv.sum(-1) / key_counts(t, causal, alpha.device, out)
    probe.max_abs_advantage = abs_adv.amax(-1)
    probe.value_update_norm = dv.norm(dim=-1)
    ds = torch.where(keep, -alpha * advantage, zero) if ds is None else ds.to(out)
    probe.ds_norm = ds.norm(dim=-1)
    if probe.full:
        # T x T matrices in the probe's matrix dtype (float32 means the compute's float type).
        mat = out if probe.matrix_dtype == torch.float32 else probe.matrix_dtype
        probe.u = u
        probe.advantage = advantage.to(mat)
        probe.alpha = torch.where(keep, alpha, zero).to(mat)
        probe.b = b.to(mat) if "b" in probe.store else None
        probe.ds = ds.to(mat) if "ds" in probe.store else None


class _ReferenceAttention(torch.autograd.Function):
    """Materialised attention with an explicit routing-law backward."""

    @staticmethod
    def forward(ctx, q, k, v, causal, scale, probe):
        alpha = attention_weights(q, k, causal=causal, scale=scale)
        ctx.save_for_backward(q, k, v, alpha)
        ctx.causal, ctx.scale, ctx.probe = causal, scale, probe
        return torch.matmul(alpha, v)

    @staticmethod
    @once_differentiable
    def backward(ctx, do):
        q, k, v, alpha = ctx.saved_tensors
        do = do.to(q.dtype)
        b = torch.matmul(do, v.transpose(-1, -2))  # b_ij = u_i . v_j
        expected_b = (alpha * b).sum(-1, keepdim=True)
        ds = alpha * (b - expected_b)  # dL/ds_ij; zero where alpha is (masked)
        dq = torch.matmul(ds, k) * ctx.scale
        dk = torch.matmul(ds.transpose(-1, -2), q) * ctx.scale
        dv = torch.matmul(alpha.transpose(-1, -2), do)
        if ctx.probe is not None:
            fill_probe(ctx.probe, alpha, do, b, dv, ctx.causal, ctx.scale)
        return dq, dk, dv, None, None, None


def reference_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = True,
    scale: float | None = None,
    probe: AttentionProbe | None = None,
    compute_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Reference attention on any device, in `compute_dtype` (default: the input dtype).

    The output has the input dtype; gradients flow back through the casts. Probe fields are
    float32 (float64 when computing in float64).
    """
    if scale is None:
        scale = q.shape[-1] ** -0.5
    dtype = q.dtype
    cd = compute_dtype or dtype
    o = _ReferenceAttention.apply(q.to(cd), k.to(cd), v.to(cd), causal, float(scale), probe)
    return o.to(dtype)


def eager_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = True,
    scale: float | None = None,
    probe: AttentionProbe | None = None,
) -> torch.Tensor:
    """Attention by generic autograd; the probe is filled from hooks on s, alpha and o.

    This is the slow way: scores and weights are materialised and kept, b is read off
    alpha.grad (dL/dalpha_ij = u_i . v_j), ds off s.grad, u off o.grad, and the advantage and
    the stats are then computed from them.
    """
    if scale is None:
        scale = q.shape[-1] ** -0.5
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    t = q.shape[-2]
    masked = s.masked_fill(~causal_mask(t, q.device), float("-inf")) if causal else s
    alpha = torch.softmax(masked, dim=-1)
    o = torch.matmul(alpha, v)
    if probe is None or not o.requires_grad:
        return o
    if not s.requires_grad:
        raise ValueError("eager_attention with a probe needs q or k to require grad (the probe reads "
                         "the scores' gradient); only v does here")
    grads: dict[str, torch.Tensor] = {}
    o.register_hook(lambda g: grads.__setitem__("u", g))
    alpha.register_hook(lambda g: grads.__setitem__("b", g))

    def finish(ds: torch.Tensor) -> None:
        # s's gradient arrives last: everything needed is there now.
        a = alpha.detach()
        u = grads["u"]
        dv = torch.matmul(a.transpose(-1, -2), u)
        fill_probe(probe, a, u, grads["b"], dv, causal, float(scale), ds=ds.detach())

    s.register_hook(finish)
    return o
