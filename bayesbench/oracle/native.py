"""The compiled oracle ops of `bayesbench._C` (torch.ops.bayesbench.*) and their fake kernels.

Importing this module loads the extension (which registers the CPU and, if built, CUDA
kernels) and registers a fake (meta) implementation per op, so the ops trace under
torch.compile and pass `torch.library.opcheck`. The wrappers below take inputs already
validated by the public functions of `bayesbench.oracle`; layout (non-contiguous tensors) and
integer dtypes are handled inside the ops.
"""

from __future__ import annotations

import torch
from torch import Tensor

from bayesbench import _C  # noqa: F401  (importing registers the ops)

from .backend import ORACLE_OPS

SCAN_OPS = ("selective_scan_fwd", "selective_scan_bwd")  # Mamba's fused scan (models/scan.py)
OPS = ORACLE_OPS + SCAN_OPS


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


# Fake kernels: output shapes and dtypes only, for FakeTensor tracing (torch.compile, export).
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


# The fused selective scan of bayesbench.models.scan (method="native"; CPU kernels only). Its
# outputs are new contiguous tensors in x's dtype; dA has A's shape ([D, N] or [M, D, N]).
@torch.library.register_fake("bayesbench::selective_scan_fwd")
def _selective_scan_fwd_fake(x, delta, A, B, C):
    torch._check(x.dim() == 3 and delta.shape == x.shape, lambda: "x and delta must both be [M, L, D]")
    return x.new_empty(x.shape)


@torch.library.register_fake("bayesbench::selective_scan_bwd")
def _selective_scan_bwd_fake(x, delta, A, B, C, dy):
    torch._check(dy.shape == x.shape, lambda: "dy must have the shape of x")
    return (x.new_empty(x.shape), x.new_empty(x.shape), x.new_empty(A.shape), x.new_empty(B.shape),
            x.new_empty(C.shape))
