"""The shared chunked kernel of GLA, RetNet and Mamba-2 (models/gated_recurrence.py) against its
recurrent reference: vector and scalar decays, heads broadcast (Mamba-2's shared B and C), awkward
lengths and chunks, gradients, and strong decay in float32 (no overflow)."""

from __future__ import annotations

import pytest
import torch

from bayesbench.models.gated_recurrence import (
    EnsembleHeadNorm,
    conv_step,
    gated_recurrence_chunked,
    gated_recurrence_ref,
)
from bayesbench.models.mamba import CausalDepthwiseConv

CASES = [  # (lead dims, L, chunk, decay width): length 1, L not a multiple of the chunk, one chunk, chunk 1
    ((1, 1), 1, 4, 1), ((2, 3), 7, 4, 1), ((2, 3), 7, 4, 5), ((1, 2), 16, 16, 5), ((3, 1), 10, 3, 5),
    ((2, 2), 9, 1, 1), ((2, 1), 5, 64, 5),
]


def _inputs(lead, L, width, seed, dtype=torch.float64, strength=1.0):
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(*lead, L, 5, generator=g, dtype=dtype) for _ in range(2))
    v = torch.randn(*lead, L, 3, generator=g, dtype=dtype)
    log_decay = -strength * torch.rand(*lead, L, width, generator=g, dtype=dtype)
    return [t.requires_grad_() for t in (q, k, v, log_decay)]


def grads(out, R, inputs):
    """d<out, R>/d inputs; an input the output does not depend on (the decay at length 1 in the
    recurrence) gets zeros."""
    return torch.autograd.grad((out * R).sum(), inputs, allow_unused=True, materialize_grads=True)


@pytest.mark.parametrize("lead,L,chunk,width", CASES)
def test_chunked_equals_the_recurrence_outputs_and_gradients(lead, L, chunk, width):
    inputs = _inputs(lead, L, width, seed=L + chunk)
    fast, ref = gated_recurrence_chunked(*inputs, chunk), gated_recurrence_ref(*inputs)
    torch.testing.assert_close(fast, ref, rtol=1e-10, atol=1e-12)
    R = torch.randn(ref.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for a, b in zip(grads(fast, R, inputs), grads(ref, R, inputs)):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)


def test_the_exact_and_the_factorised_forms_of_a_vector_decay_agree(monkeypatch):
    """Past FACTOR_LIMIT a vector decay's chunk forms every exp(b_t - b_s) (no exp(-b) factor); within
    it, the matmul of (q exp(b)) and (k exp(-b)): both equal the recurrence."""
    import bayesbench.models.gated_recurrence as kernel

    inputs = [t.detach() for t in _inputs((2, 3), 13, 5, seed=4, strength=4.0)]
    ref = gated_recurrence_ref(*inputs)
    for limit in ({}, {torch.float64: 1e9}):  # {}: the limit 5 for every dtype, below these chunks' decay
        monkeypatch.setattr(kernel, "FACTOR_LIMIT", limit)
        torch.testing.assert_close(gated_recurrence_chunked(*inputs, 8), ref, rtol=1e-10, atol=1e-12)


def test_heads_broadcast_from_shared_keys_and_queries():
    """Mamba-2's one group: q, k [.., 1, L, N] read by every head of v [.., H, L, P]."""
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, 1, 11, 4, generator=g, dtype=torch.float64) for _ in range(2))
    v = torch.randn(2, 3, 11, 6, generator=g, dtype=torch.float64)
    log_decay = -torch.rand(2, 3, 11, 1, generator=g, dtype=torch.float64)
    fast = gated_recurrence_chunked(q, k, v, log_decay, 4)
    ref = gated_recurrence_ref(q.expand(2, 3, 11, 4), k.expand(2, 3, 11, 4), v, log_decay)
    torch.testing.assert_close(fast, ref, rtol=1e-10, atol=1e-12)


def test_strong_decay_stays_finite_in_float32():
    """Decays near zero (log decay ~ -30 per step) would overflow an exp(-cumsum) factorisation."""
    q, k, v, g = (t.detach() for t in _inputs((2, 2), 40, 5, seed=3, strength=30.0))
    fast = gated_recurrence_chunked(q.float(), k.float(), v.float(), g.float(), 16)
    ref = gated_recurrence_ref(q, k, v, g)
    assert torch.isfinite(fast).all()
    torch.testing.assert_close(fast.double(), ref, rtol=1e-4, atol=1e-4)


def test_conv_step_equals_the_causal_conv():
    conv = CausalDepthwiseConv(2, 5, 4).double()
    for e in range(2):
        conv.reset_member(e, torch.Generator().manual_seed(e))
    x = torch.randn(2, 3, 6, 5, dtype=torch.float64)
    state, out = None, []
    for t in range(6):
        y, carried = conv_step(conv.weight, conv.bias, x[:, :, t], state)
        state = {"conv": carried}
        out.append(y)
    torch.testing.assert_close(torch.stack(out, 2), conv(x), rtol=1e-12, atol=1e-12)
    assert state["conv"].shape == (2, 3, 3, 5)


def test_head_norm_normalises_each_head():
    norm = EnsembleHeadNorm(2, 3, 4, centre=True).double()
    x = 5 * torch.randn(2, 7, 12, dtype=torch.float64) + 2
    y = norm(x).unflatten(-1, (3, 4))
    torch.testing.assert_close(y.mean(-1), torch.zeros(2, 7, 3, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(y.var(-1, unbiased=False), torch.ones(2, 7, 3, dtype=torch.float64), atol=1e-4, rtol=0)
