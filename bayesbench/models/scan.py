"""Linear recurrences h_t = a_t * h_{t-1} + b_t over time, and Mamba's selective scan on top.

`linear_scan` runs the recurrence in a custom autograd Function whose backward is the adjoint
recurrence lam_t = g_t + a_{t+1} lam_{t+1} run in reverse, so training keeps only a_t and h_t
(no per-step or per-level autograd graph). Two kernels evaluate both directions:

- "parallel": a Hillis-Steele associative scan over the pairs (a_t, b_t), with (a1, b1) then
  (a2, b2) = (a2 a1, a2 b1 + b2): log2(L) elementwise passes, O(L log L) work. It multiplies
  the decays a_t = exp(delta_t A) in (0, 1] themselves and never exponentiates a positive
  number, so a long run of strong decays underflows to an exact 0 instead of overflowing (the
  failure of the exp(-cumsum(log a)) trick; no chunking is needed). The choice for GPUs.
- "sequential": the plain time loop, O(L) work and ~3 memory passes instead of ~2 log2(L): the
  faster choice on CPUs, where the elementwise passes are memory-bound.

`selective_scan` builds decay = exp(delta A) and inputs = delta B x as [M, L, D, N] tensors and
runs `linear_scan` on them. Its method "native" instead calls the fused CPU op of the compiled
extension (`bayesbench.ops.selective_scan`, csrc/selective_scan.h): one pass per (sequence,
channel block) with the state in a small buffer, the backward recomputing the states, so nothing
of size [M, L, D, N] exists; method "auto" takes it on CPUs when it is built.

`linear_scan_ref` and `selective_scan_ref` are step-by-step autograd references the tests
compare against.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from .. import ops

KERNELS = ("parallel", "sequential")
SCAN_METHODS = ("auto", "parallel", "sequential", "native", "reference")


def _check_pair(decay: Tensor, inputs: Tensor) -> None:
    if decay.shape != inputs.shape:
        raise ValueError(f"decay and inputs must have the same shape, got {list(decay.shape)} and {list(inputs.shape)}")
    if decay.dim() < 2 or decay.shape[1] < 1:
        raise ValueError(f"decay and inputs must be [M, L, ...] with L >= 1 (time on dim 1), got {list(decay.shape)}")


def _scan_parallel(a: Tensor, b: Tensor, reverse: bool = False) -> Tensor:
    """h_t = a_t h_{t-1} + b_t (reverse: h_t = a_t h_{t+1} + b_t) by Hillis-Steele; each level writes
    fresh h and a buffers (never into the inputs)."""
    L, o, h = b.shape[1], 1, b
    while o < L:
        # level o: h_t += A_t h_{t-o}, A_t *= A_{t-o} (mirrored when reverse); `keep` is already final
        cur, src = (slice(o, None), slice(None, -o)) if not reverse else (slice(None, -o), slice(o, None))
        keep = slice(None, o) if not reverse else slice(L - o, None)
        new_h = torch.empty_like(h)
        new_h[:, keep] = h[:, keep]
        torch.addcmul(h[:, cur], a[:, cur], h[:, src], out=new_h[:, cur])
        h = new_h
        if 2 * o < L:  # the last level needs no decays any more
            new_a = torch.empty_like(a)
            new_a[:, keep] = a[:, keep]
            torch.mul(a[:, cur], a[:, src], out=new_a[:, cur])
            a = new_a
        o *= 2
    return h.clone() if h is b else h


def _scan_sequential(a: Tensor, b: Tensor, reverse: bool = False) -> Tensor:
    """The same recurrences as `_scan_parallel`, one step at a time into one output buffer."""
    L = b.shape[1]
    h = torch.empty_like(b)
    steps = range(L) if not reverse else range(L - 1, -1, -1)
    prev = None
    for t in steps:
        if prev is None:
            h[:, t] = b[:, t]
        else:
            torch.addcmul(b[:, t], a[:, t], h[:, prev], out=h[:, t])
        prev = t
    return h


class _LinearScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, decay: Tensor, inputs: Tensor, kernel: str) -> Tensor:
        scan = _scan_parallel if kernel == "parallel" else _scan_sequential
        h = scan(decay, inputs)
        ctx.scan = scan
        ctx.save_for_backward(decay, h)
        return h

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_h: Tensor) -> tuple[Tensor, Tensor, None]:
        # lam_t = g_t + a_{t+1} lam_{t+1}: a reverse scan with decays shifted by one step;
        # dL/db_t = lam_t and dL/da_t = lam_t h_{t-1} (h_{-1} = 0).
        decay, h = ctx.saved_tensors
        shifted = torch.empty_like(decay)
        shifted[:, :-1] = decay[:, 1:]
        shifted[:, -1:] = 0
        lam = ctx.scan(shifted, grad_h.contiguous(), reverse=True)
        grad_decay = torch.empty_like(h)
        grad_decay[:, :1] = 0
        torch.mul(lam[:, 1:], h[:, :-1], out=grad_decay[:, 1:])
        return grad_decay, lam, None


def linear_scan(decay: Tensor, inputs: Tensor, kernel: str = "parallel") -> Tensor:
    """h_t = decay_t * h_{t-1} + inputs_t with h_{-1} = 0, along dim 1; differentiable in both.

    decay, inputs: [M, L, ...] of the same shape; returns h [M, L, ...]. kernel: "parallel"
    (associative scan, log-depth) or "sequential" (time loop); both give the same numbers up to
    rounding and the same gradients.
    """
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    _check_pair(decay, inputs)
    return _LinearScan.apply(decay, inputs, kernel)


def linear_scan_ref(decay: Tensor, inputs: Tensor) -> Tensor:
    """The same recurrence as a textbook loop under autograd (the reference for `linear_scan`)."""
    _check_pair(decay, inputs)
    h = torch.zeros_like(inputs[:, 0])
    out = []
    for t in range(inputs.shape[1]):
        h = decay[:, t] * h + inputs[:, t]
        out.append(h)
    return torch.stack(out, dim=1)


# Read once, when a model that scans is first built: a module constant is what torch.compile
# treats as fixed (a decorator such as torch.compiler.assume_constant_result would import
# torch._dynamo, about 3 s, for every command that builds a model).
_NATIVE_AVAILABLE = all(ops.available(op) for op in ops.SCAN_OPS)


def native_scan_available() -> bool:
    """Whether the compiled extension is built with the fused (CPU) selective-scan ops."""
    return _NATIVE_AVAILABLE


def resolve_method(method: str, device: torch.device) -> str:
    """'auto' is the parallel scan on CUDA, the native op on a CPU when it is built, else the
    sequential loop; 'native' where it cannot run raises RuntimeError saying why."""
    if method not in SCAN_METHODS:
        raise ValueError(f"method must be one of {SCAN_METHODS}, got {method!r}")
    if method == "auto":
        if device.type == "cuda":
            return "parallel"
        return "native" if device.type == "cpu" and native_scan_available() else "sequential"
    if method == "native":
        if not native_scan_available():
            raise RuntimeError("scan method 'native' needs the compiled extension bayesbench._C with the "
                               "selective_scan ops: build it with `pip install --no-build-isolation -e .`, "
                               "or use method='sequential'")
        if device.type != "cpu":
            raise RuntimeError(f"scan method 'native' has only a CPU kernel, got {device.type} tensors; "
                               "use 'parallel' (or 'auto') there")
    return method


def _check_selective(x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None) -> None:
    if x.dim() != 3 or delta.shape != x.shape:
        raise ValueError(f"x and delta must both be [M, L, D], got {list(x.shape)} and {list(delta.shape)}")
    M, L, Dn = x.shape
    if A.dim() not in (2, 3) or A.shape[-2] != Dn or (A.dim() == 3 and A.shape[0] != M):
        raise ValueError(f"A must be [D, N] or [M, D, N] with D = {Dn}, got {list(A.shape)}")
    N = A.shape[-1]
    for name, t in (("B", B), ("C", C)):
        if list(t.shape) != [M, L, N]:
            raise ValueError(f"{name} must be [M, L, N] = {[M, L, N]}, got {list(t.shape)}")
    if D is not None and D.shape[-1] != Dn:
        raise ValueError(f"D must end in the channel dim {Dn}, got {list(D.shape)}")


def selective_scan(x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None = None,
                   method: str = "auto") -> Tensor:
    """Mamba-1's selective SSM, y_t = C_t . h_t + D x_t with h_t = exp(delta_t A) h_{t-1} + delta_t B_t x_t.

    x, delta: [M, L, D] (delta > 0); A: [D, N] or [M, D, N] (negative, diagonal per channel);
    B, C: [M, L, N]; D: broadcastable to x, e.g. [D] or [M, 1, D] (skip weights). Returns y
    [M, L, D]. method: "parallel" / "sequential" (the `linear_scan` kernels), "native" (the fused
    CPU op of bayesbench._C), "auto" (parallel on CUDA, native on a CPU when built, else
    sequential) or "reference" (`linear_scan_ref`). All but "native" materialise the state h as
    [M, L, D, N] (the price of a pure-PyTorch scan).
    """
    method = resolve_method(method, x.device)
    _check_selective(x, delta, A, B, C, D)
    if method == "native":
        y = _native_selective_scan(x, delta, A, B, C)
        return y if D is None else y + x * D
    A = A if A.dim() == 3 else A.unsqueeze(0)
    decay = torch.exp(delta.unsqueeze(-1) * A.unsqueeze(1))  # [M, L, D, N]
    inputs = (delta * x).unsqueeze(-1) * B.unsqueeze(2)  # [M, L, D, N]
    h = linear_scan_ref(decay, inputs) if method == "reference" else linear_scan(decay, inputs, method)
    y = torch.einsum("mldn,mln->mld", h, C)
    return y if D is None else y + x * D


def _native_selective_scan(x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor) -> Tensor:
    """y without the skip term through the fused op, in the promoted dtype of the inputs (float32
    for half precisions, cast back)."""
    dtype = functools.reduce(torch.promote_types, (t.dtype for t in (delta, A, B, C)), x.dtype)
    work = dtype if dtype in (torch.float32, torch.float64) else torch.float32
    y = ops.selective_scan(*(t.to(work) for t in (x, delta, A, B, C)))
    return y.to(dtype)


def selective_scan_ref(x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Tensor | None = None) -> Tensor:
    """`selective_scan` written as the textbook time loop (mamba_ssm's selective_scan_ref)."""
    _check_selective(x, delta, A, B, C, D)
    A = A if A.dim() == 3 else A.unsqueeze(0)
    h = x.new_zeros(x.shape[0], x.shape[2], A.shape[-1])
    ys = []
    for t in range(x.shape[1]):
        dt = delta[:, t].unsqueeze(-1)  # [M, D, 1]
        h = torch.exp(dt * A) * h + dt * B[:, t].unsqueeze(1) * x[:, t].unsqueeze(-1)
        ys.append((h * C[:, t].unsqueeze(1)).sum(-1))
    y = torch.stack(ys, dim=1)
    return y if D is None else y + x * D


def inverse_softplus(y: Tensor) -> Tensor:
    """x with softplus(x) = y (y > 0), stable for small y: y + log(-expm1(-y))."""
    return y + torch.log(-torch.expm1(-y))
