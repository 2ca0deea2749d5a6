"""Every binding of the compiled extension `bayesbench._C` (torch.ops.bayesbench.*), in one place.

The C++ side (csrc/register.cpp) defines the op schemas and their CPU (and, if built, CUDA)
kernels; this module is the Python side, as pytorch/extension-cpp keeps it in `ops.py`:

- loading the extension (`load`, `available`, `has_cuda`, `extension_status`);
- the compiled-op lists: `ORACLE_OPS` (exact posteriors, used by `bayesbench.oracle`) and
  `SCAN_OPS` (Mamba's fused selective scan, used by `bayesbench.models.scan`);
- fake (meta) kernels, so the ops trace under torch.compile and pass `torch.library.opcheck`
  (the C++ library names this module with `set_python_module`, so torch imports it when it needs
  them);
- the autograd formula of the selective scan (its backward op recomputes the states);
- thin typed wrappers. They take inputs already validated by the public functions of
  `bayesbench.oracle` / `bayesbench.models.scan`; layout (non-contiguous tensors) and integer
  dtypes are handled inside the ops.

Importing this module never fails: without the extension, `load()` is None and the callers use
their PyTorch references.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

# The oracle ops bayesbench._C compiles. Others (the sticky predictive: a cumulative sum,
# already vectorised in PyTorch) have no compiled kernel by design and use the reference.
ORACLE_OPS = ("hmm_filter", "bijection_posterior", "markov_predictive", "ctw_predictive")
SCAN_OPS = ("selective_scan_fwd", "selective_scan_bwd")  # CPU kernels only
OPS = ORACLE_OPS + SCAN_OPS


@functools.cache
def load():
    """The `torch.ops.bayesbench` namespace when the extension is built, else None."""
    try:
        from bayesbench import _C  # noqa: F401  (importing registers the ops)
    except ImportError:
        return None
    return torch.ops.bayesbench


def available(op: str) -> bool:
    """Whether the built extension has the op `op` (any device)."""
    return load() is not None and hasattr(torch.ops.bayesbench, op)


def has_cuda() -> bool:
    """Whether the extension is built with its CUDA kernels."""
    if load() is None:
        return False
    from bayesbench import _C

    return bool(getattr(_C, "WITH_CUDA", False))


def extension_status() -> str:
    """Say whether the compiled extension `bayesbench._C` is importable, and with which devices."""
    try:
        from bayesbench import _C  # noqa: F401  (importing registers the ops)
    except ImportError as err:  # not built: everything falls back to the PyTorch reference
        return f"not built ({err}); using the PyTorch reference"
    return "built (cpu" + (", cuda)" if available("hmm_filter") and has_cuda() else ")")


# ---------------------------------------------------------------- wrappers

def hmm_filter(trans: Tensor, emit: Tensor, obs: Tensor, init: Tensor | None = None
               ) -> tuple[Tensor, Tensor, Tensor]:
    """(posteriors [B, L, S] in trans' dtype, loglik [B] float64, first dead step [B] int64 or -1)."""
    return torch.ops.bayesbench.hmm_filter(trans, emit, obs, init)


def bijection_posterior(keys: Tensor, values: Tensor, V: int, dtype: torch.dtype = torch.float32) -> Tensor:
    """Posterior over pi(keys[b, k]) given the pairs before k: [B, L, V] in `dtype`."""
    return torch.ops.bayesbench.bijection_posterior(keys, values, V, dtype)


def markov_predictive(seq: Tensor, V: int, alpha: float, dtype: torch.dtype = torch.float32) -> Tensor:
    """Predictive of the next symbol of an in-context Markov chain: [B, L, V] in `dtype`."""
    return torch.ops.bayesbench.markov_predictive(seq, V, float(alpha), dtype)


def ctw_predictive(seq: Tensor, V: int, depth: int, alpha: float, leaf_prob: float,
                   dtype: torch.dtype = torch.float32) -> Tensor:
    """Context-tree weighting's predictive of the next symbol (a variable-order chain of depth
    <= `depth`): [B, L, V] in `dtype`, accumulated in float64 (csrc/ctw.h)."""
    return torch.ops.bayesbench.ctw_predictive(seq, V, int(depth), float(alpha), float(leaf_prob), dtype)


def selective_scan(x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor) -> Tensor:
    """Mamba's selective scan without the skip term, y [M, L, D] (CPU, float32 or float64 inputs
    of one dtype); differentiable in every input through the registered autograd formula."""
    return torch.ops.bayesbench.selective_scan_fwd(x, delta, A, B, C)


# ---------------------------------------------------------------- registrations (extension built)

def _register() -> None:
    """Fake kernels (output shapes and dtypes only, for FakeTensor tracing: torch.compile, export)
    and the selective scan's autograd formula."""

    @torch.library.register_fake("bayesbench::hmm_filter")
    def _hmm_filter_fake(trans, emit, obs, init):
        B, L = obs.shape
        S = trans.shape[1]
        return (trans.new_empty((B, L, S)), trans.new_empty((B,), dtype=torch.float64),
                trans.new_empty((B,), dtype=torch.int64))

    @torch.library.register_fake("bayesbench::bijection_posterior")
    def _bijection_posterior_fake(keys, values, V, dtype):
        B, L = keys.shape
        return keys.new_empty((B, L, V), dtype=dtype)

    @torch.library.register_fake("bayesbench::markov_predictive")
    def _markov_predictive_fake(seq, V, alpha, dtype):
        B, L = seq.shape
        return seq.new_empty((B, L, V), dtype=dtype)

    @torch.library.register_fake("bayesbench::ctw_predictive")
    def _ctw_predictive_fake(seq, V, depth, alpha, leaf_prob, dtype):
        B, L = seq.shape
        return seq.new_empty((B, L, V), dtype=dtype)

    # The selective scan's outputs are new contiguous tensors in x's dtype; dA has A's shape
    # ([D, N] or [M, D, N]).
    @torch.library.register_fake("bayesbench::selective_scan_fwd")
    def _selective_scan_fwd_fake(x, delta, A, B, C):
        torch._check(x.dim() == 3 and delta.shape == x.shape, lambda: "x and delta must both be [M, L, D]")
        return x.new_empty(x.shape)

    @torch.library.register_fake("bayesbench::selective_scan_bwd")
    def _selective_scan_bwd_fake(x, delta, A, B, C, dy):
        torch._check(dy.shape == x.shape, lambda: "dy must have the shape of x")
        return (x.new_empty(x.shape), x.new_empty(x.shape), x.new_empty(A.shape), x.new_empty(B.shape),
                x.new_empty(C.shape))

    # The forward saves only its inputs; the backward op recomputes the states, so nothing of
    # size [M, L, D, N] is ever kept.
    def _scan_setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def _scan_backward(ctx, grad_y):
        grads = torch.ops.bayesbench.selective_scan_bwd(*ctx.saved_tensors, grad_y)
        return tuple(g if need else None for g, need in zip(grads, ctx.needs_input_grad))

    torch.library.register_autograd("bayesbench::selective_scan_fwd", _scan_backward,
                                    setup_context=_scan_setup_context)


if load() is not None:
    _register()
