"""Choosing between the PyTorch reference and the compiled ops (`bayesbench.ops`) for one call."""

from __future__ import annotations

import warnings

import torch

from .. import ops
from ..ops import ORACLE_OPS

BACKENDS = ("auto", "reference", "native")
_warned: set[str] = set()


def native_supports(op: str, device: torch.device) -> bool:
    """Whether the built extension has the oracle op `op` with a kernel for `device`'s type."""
    if op not in ORACLE_OPS or not ops.available(op):
        return False
    if device.type == "cpu":
        return True
    if device.type == "cuda":
        return ops.has_cuda()
    return False


def use_native(op: str, backend: str, device: torch.device) -> bool:
    """Resolve `backend` for one call: True means the compiled op, False the reference."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "reference":
        return False
    supported = native_supports(op, device)
    if backend == "native":
        if not supported:
            why = ("the compiled extension bayesbench._C is not built"
                   if ops.load() is None else f"bayesbench._C has no {op} kernel for {device.type}")
            raise RuntimeError(
                f"backend='native' for {op} is unavailable: {why}. Build it with "
                "`pip install --no-build-isolation -e .` (see README), or use backend='reference'."
            )
        return True
    if not supported and op in ORACLE_OPS:  # a degraded mode, unlike an op with no compiled kernel
        _warn_fallback(device)
    return supported


def _warn_fallback(device: torch.device) -> None:
    """Warn once per device type when the extension is missing or lacks that device."""
    if device.type not in ("cpu", "cuda"):
        return
    key = device.type
    if key in _warned:
        return
    _warned.add(key)
    why = "is not built" if ops.load() is None else f"was built without {device.type} kernels"
    warnings.warn(
        f"bayesbench: the compiled oracle bayesbench._C {why}; exact posteriors on {device.type} "
        "use the PyTorch reference (correct, slower). This warning is shown once.",
        RuntimeWarning,
        stacklevel=4,
    )
