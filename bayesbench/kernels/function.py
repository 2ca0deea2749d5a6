"""`attention`: the public entry point, input validation and the Triton autograd.Function."""

from __future__ import annotations

import importlib.util
import math
import sys

import torch
from torch.autograd.function import once_differentiable

from .config import interpreting
from .probe import AttentionProbe
from .reference import reference_attention

MAX_HEAD_DIM = 128
BACKENDS = ("triton", "reference")
TRITON_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
REFERENCE_DTYPES = TRITON_DTYPES + (torch.float64,)


def validate(q, k, v, *, causal, scale, probe, backend) -> None:
    """Raise ValueError naming the argument and the rule when the inputs are not usable."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != 4:
            raise ValueError(f"{name} must have rank 4 [B, H, T, D], got shape {tuple(x.shape)}")
    if not (q.shape == k.shape == v.shape):
        raise ValueError(
            "q, k and v must have the same shape [B, H, T, D], got "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    B, H, T, D = q.shape
    if min(B, H, T, D) < 1:
        raise ValueError(f"q: every dimension of [B, H, T, D] must be >= 1, got {tuple(q.shape)}")
    if D > MAX_HEAD_DIM:
        raise ValueError(f"q: head dim D must be <= {MAX_HEAD_DIM}, got D={D}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k and v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    allowed = TRITON_DTYPES if backend == "triton" else REFERENCE_DTYPES
    if q.dtype not in allowed:
        hint = " (float64 only with backend='reference')" if q.dtype == torch.float64 else ""
        raise ValueError(f"q: dtype must be one of {allowed} for backend={backend!r}, got {q.dtype}{hint}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k and v must be on one device, got {q.device}, {k.device}, {v.device}")
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be a bool, got {causal!r}")
    if scale is not None and not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a finite positive number or None, got {scale!r}")
    if probe is not None and not isinstance(probe, AttentionProbe):
        raise ValueError(f"probe must be an AttentionProbe or None, got {type(probe).__name__}")
    if probe is not None and probe.full and T * T >= 2**31:
        raise ValueError(
            f"probe: mode 'full' stores T x T matrices and needs T*T < 2**31, got T={T}; "
            "use AttentionProbe(mode='stats') for long sequences"
        )
    if backend == "triton":
        # The kernels index rows within one (batch, head) with 32-bit offsets: row * stride_t.
        for name, x in (("q", q), ("k", k), ("v", v)):
            if T * max(abs(x.stride(2)), abs(x.stride(3))) >= 2**31:
                raise ValueError(f"{name}: T * (its time or feature stride) must be < 2**31 for the Triton "
                                 f"kernels, got T={T}, strides {tuple(x.stride())}; pass a contiguous tensor")
    if backend == "triton" and sys.modules.get("triton") is None and importlib.util.find_spec("triton") is None:
        raise ValueError("backend='triton' needs the triton package; use backend='reference' instead")
    if backend == "triton" and q.device.type != "cuda":
        if not interpreting():
            raise ValueError(
                f"q: backend='triton' needs a CUDA tensor or TRITON_INTERPRET=1 (set before triton "
                f"is imported), got device {q.device}; use backend='reference' instead"
            )


class TritonAttention(torch.autograd.Function):
    """Triton forward (saves o and the base-2 LSE) and backward (fills the probe if any)."""

    @staticmethod
    def forward(ctx, q, k, v, causal, scale, probe):
        from .attention_fwd import attention_forward
        from .config import choose_config

        cfg = choose_config(q)
        o, lse = attention_forward(q, k, v, causal, scale, cfg)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.scale, ctx.probe, ctx.cfg = causal, scale, probe, cfg
        return o

    @staticmethod
    @once_differentiable
    def backward(ctx, do):
        from .attention_bwd import attention_backward

        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = attention_backward(
            do, q, k, v, o, lse, ctx.causal, ctx.scale, ctx.cfg, ctx.probe
        )
        return dq, dk, dv, None, None, None


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = True,
    scale: float | None = None,
    probe: AttentionProbe | None = None,
    backend: str = "triton",
) -> torch.Tensor:
    """softmax(scale * q k^T [causal mask]) v for q, k, v of shape [B, H, T, D] (strides free).

    scale defaults to 1/sqrt(D). With `probe`, the backward pass records Paper II's routing
    quantities into it (see AttentionProbe). backend "triton" runs the fused kernels (CUDA, or
    CPU under TRITON_INTERPRET=1); "reference" runs plain PyTorch on any device and dtype.
    """
    validate(q, k, v, causal=causal, scale=scale, probe=probe, backend=backend)
    scale = float(q.shape[-1] ** -0.5 if scale is None else scale)
    if backend == "reference":
        return reference_attention(q, k, v, causal=causal, scale=scale, probe=probe)
    return TritonAttention.apply(q, k, v, causal, scale, probe)


def triton_available() -> bool:
    """True when the Triton backend can run here (a GPU, or the interpreter on CPU)."""
    try:
        import triton  # noqa: F401  (only whether it imports)
    except ImportError:
        return False
    return torch.cuda.is_available() or interpreting()
