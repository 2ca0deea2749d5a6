"""Triton attention with Paper II's routing-law probe (installed as `bayesbench.kernels`).

    from bayesbench.kernels import attention, AttentionProbe
    probe = AttentionProbe(mode="stats")            # or "full", or no probe at all
    o = attention(q, k, v, causal=True, probe=probe)  # q, k, v: [B, H, T, D]
    loss(o).backward()                               # probe.entropy, ... are now filled

Backends: "triton" (fused kernels; CUDA, or CPU under TRITON_INTERPRET=1) and "reference"
(plain PyTorch). `eager_attention` gets the same probe the slow autograd way. Triton is imported
only when the Triton backend is first used, so the reference works without it.
"""

from .function import MAX_HEAD_DIM, attention, triton_available, validate
from .probe import AttentionProbe
from .reference import eager_attention, reference_attention

__all__ = [
    "AttentionProbe",
    "MAX_HEAD_DIM",
    "attention",
    "eager_attention",
    "reference_attention",
    "triton_available",
    "validate",
]
