"""Choosing between the PyTorch reference and the compiled ops of `bayesbench._C`."""

from __future__ import annotations

import functools
import warnings

import torch

BACKENDS = ("auto", "reference", "native")
# The oracle ops bayesbench._C compiles. Others (the sticky predictive: a cumulative sum,
# already vectorised in PyTorch) have no compiled kernel by design and use the reference.
ORACLE_OPS = ("hmm_filter", "bijection_posterior", "markov_predictive")
_warned: set[str] = set()


@functools.cache
def native_ops():
    """The `torch.ops.bayesbench` namespace when the extension is built, else None."""
    try:
        from bayesbench import _C  # noqa: F401  (importing registers the ops)
    except ImportError:
        return None
    return torch.ops.bayesbench


def native_supports(op: str, device: torch.device) -> bool:
    """Whether the built extension has `op` with a kernel for `device`'s type."""
    ops = native_ops()
    if op not in ORACLE_OPS or ops is None or not hasattr(ops, op):
        return False
    if device.type == "cpu":
        return True
    if device.type == "cuda":
        from bayesbench import _C

        return bool(getattr(_C, "WITH_CUDA", False))
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
                   if native_ops() is None else f"bayesbench._C has no {op} kernel for {device.type}")
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
    why = "is not built" if native_ops() is None else f"was built without {device.type} kernels"
    warnings.warn(
        f"bayesbench: the compiled oracle bayesbench._C {why}; exact posteriors on {device.type} "
        "use the PyTorch reference (correct, slower). This warning is shown once.",
        RuntimeWarning,
        stacklevel=4,
    )
