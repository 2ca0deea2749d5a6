"""Triton attention + routing-law probe against a float64 PyTorch reference.

On a CPU-only machine the kernels run under TRITON_INTERPRET=1 (set by conftest.py), so shapes
are small but awkward: T = 1, 37, 93 (partial blocks, diagonal tiles that straddle blocks of
unequal size) and D = 24, 64 (padded to a power of two inside the kernel). Kernel runs are cached
per case and shared by the focused tests below. Probe memory is poisoned with NaN before the
kernels run, so every value checked, masked zeros included, was written by a kernel.
"""

from __future__ import annotations

import contextlib
import functools
import sys

import pytest
import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from bayesbench.kernels import AttentionProbe, attention, eager_attention, reference_attention
from bayesbench.kernels.config import interpreting
from bayesbench.models.attention import causal_mask

CUDA = torch.cuda.is_available()
DEV = torch.device("cuda" if CUDA else "cpu")
TRITON_OK = CUDA or interpreting()
pytestmark = pytest.mark.skipif(not TRITON_OK, reason="needs CUDA or TRITON_INTERPRET=1")

TOL = 1e-3  # float32 relative error (max abs error / max abs reference)
SHAPES = [(1, 1, 1, 24), (2, 1, 37, 24), (1, 2, 93, 64), (2, 2, 37, 64)]
CASES = [(s, c) for s in SHAPES for c in (True, False)]
IDS = [f"B{b}H{h}T{t}D{d}-{'causal' if c else 'full'}" for (b, h, t, d), c in CASES]
FULL_ONLY = ("u", "b", "advantage", "alpha", "ds")  # b, ds derived from advantage and alpha
STORED = ("u", "advantage", "alpha")  # what the full probe's kernel writes by default
STATS = ("expected_b", "entropy", "mean_abs_advantage", "max_abs_advantage", "value_update_norm", "ds_norm")


def rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    """max |x - ref| / max |ref|; the denominator is floored at 1e-3 for all-zero references
    (T = 1: dq = dk = 0 exactly, float32 leaves ~1e-7) since inputs are O(1)."""
    x, ref = x.detach().double().cpu(), ref.detach().double().cpu()
    assert x.shape == ref.shape, (x.shape, ref.shape)
    assert torch.isfinite(x).all(), "non-finite values"
    return ((x - ref).abs().max() / ref.abs().max().clamp_min(1e-3)).item()


@contextlib.contextmanager
def poisoned_empty():
    """Make torch.empty calls from the kernels' wrappers return NaN-filled float tensors."""
    real = torch.empty

    def empty(*args, **kwargs):
        out = real(*args, **kwargs)
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.startswith("bayesbench.kernels") and out.is_floating_point():
            out.fill_(float("nan"))
        return out

    torch.empty = empty
    try:
        yield
    finally:
        torch.empty = real


def make_inputs(shape, dtype=torch.float32, seed=0, device=DEV):
    g = torch.Generator().manual_seed(seed)
    q, k, v, do = (torch.randn(shape, generator=g, dtype=torch.float64) for _ in range(4))
    return [x.to(device=device, dtype=dtype) for x in (q, k, v, do)]


def run(fn, q, k, v, do, *, causal, probe=None, **kw):
    """Forward + backward; returns (o, dq, dk, dv) detached."""
    q, k, v = (x.detach().clone().requires_grad_() for x in (q, k, v))
    o = fn(q, k, v, causal=causal, probe=probe, **kw)
    o.backward(do)
    return o.detach(), q.grad, k.grad, v.grad


@functools.lru_cache(maxsize=None)
def case(shape, causal, mode):
    """Triton run (mode None / 'full' / 'stats') and the float64 reference, same inputs."""
    seed = hash((shape, causal)) % 10_000
    q, k, v, do = make_inputs(shape, seed=seed)
    probe = AttentionProbe(mode) if mode else None
    with poisoned_empty():
        out = run(attention, q, k, v, do, causal=causal, probe=probe)
    ref_probe = AttentionProbe("full")
    ref = run(reference_attention, *(x.double() for x in (q, k, v, do)), causal=causal, probe=ref_probe)
    return out, probe, ref, ref_probe


def alpha_of(q, k, causal):
    """float64 attention weights."""
    s = q.double() @ k.double().transpose(-1, -2) * q.shape[-1] ** -0.5
    if causal:
        s = s.masked_fill(~causal_mask(q.shape[2], q.device), float("-inf"))
    return s.softmax(-1)


def ref_alpha(shape, causal):
    q, k, _, _ = make_inputs(shape, seed=hash((shape, causal)) % 10_000)
    return alpha_of(q, k, causal)


@pytest.mark.parametrize("shape,causal", CASES, ids=IDS)
def test_output_and_gradients_match_float64_reference(shape, causal):
    out, _, ref, _ = case(shape, causal, None)
    for name, x, r in zip(("o", "dq", "dk", "dv"), out, ref):
        assert x.dtype == torch.float32
        assert rel_err(x, r) < TOL, name


@pytest.mark.parametrize("shape,causal", CASES, ids=IDS)
def test_full_probe_matches_float64_reference(shape, causal):
    _, probe, _, ref_probe = case(shape, causal, "full")
    B, H, T, D = shape
    expect = {"u": (B, H, T, D), **{n: (B, H, T, T) for n in ("b", "advantage", "alpha", "ds")}}
    for name in FULL_ONLY + STATS:
        x = getattr(probe, name)
        assert x.dtype == torch.float32 and x.device.type == DEV.type, name
        assert tuple(x.shape) == expect.get(name, (B, H, T)), name
        assert rel_err(x, getattr(ref_probe, name)) < TOL, name
    assert probe.causal is causal and probe.scale == pytest.approx(D**-0.5)


@pytest.mark.parametrize("shape,causal", CASES, ids=IDS)
def test_masked_entries_are_exactly_zero(shape, causal):
    _, probe, _, _ = case(shape, causal, "full")
    T = shape[2]
    above = ~causal_mask(T, probe.b.device)
    for name in ("b", "advantage", "alpha", "ds"):
        x = getattr(probe, name)
        if causal:
            assert torch.equal(x[..., above], torch.zeros_like(x[..., above])), name
        elif T > 1:  # nothing is masked without causality
            assert (x[..., above] != 0).float().mean() > 0.9, name


@pytest.mark.parametrize("shape,causal", CASES, ids=IDS)
def test_routing_law_identities(shape, causal):
    """ds = -alpha * A, E[b] = sum_j alpha_ij b_ij and A = E[b] - b, on the kernel's own fields."""
    _, probe, _, _ = case(shape, causal, "full")
    alpha = ref_alpha(shape, causal).to(probe.ds.device)
    ds, adv, b, eb = (getattr(probe, n).double() for n in ("ds", "advantage", "b", "expected_b"))
    assert (ds + alpha * adv).abs().max() <= TOL * ds.abs().max().clamp_min(1e-3)
    assert rel_err(eb, (alpha * b).sum(-1)) < TOL
    keep = causal_mask(shape[2], b.device) if causal else torch.ones_like(b, dtype=torch.bool)
    assert rel_err(adv, torch.where(keep, eb.unsqueeze(-1) - b, 0.0)) < TOL
    # The gradient of the scaled scores sums to zero over keys (softmax invariance).
    assert ds.sum(-1).abs().max() <= TOL * ds.abs().max().clamp_min(1e-3)


@pytest.mark.parametrize("shape,causal", CASES, ids=IDS)
def test_stats_mode_equals_reductions_of_full_mode(shape, causal):
    (_, _, _, dv), stats, _, _ = case(shape, causal, "stats")
    _, full, _, _ = case(shape, causal, "full")
    for name in FULL_ONLY:
        assert getattr(stats, name) is None, name
    T = shape[2]
    count = torch.arange(1, T + 1) if causal else torch.full((T,), T)
    abs_adv = full.advantage.abs()
    assert rel_err(stats.mean_abs_advantage, abs_adv.sum(-1) / count.to(abs_adv)) < TOL
    assert rel_err(stats.max_abs_advantage, abs_adv.amax(-1)) < TOL
    assert rel_err(stats.expected_b, full.expected_b) < TOL
    assert rel_err(stats.value_update_norm, dv.norm(dim=-1)) < TOL
    assert rel_err(stats.ds_norm, full.ds.norm(dim=-1)) < TOL
    alpha = ref_alpha(shape, causal)
    entropy_bits = -torch.special.xlogy(alpha, alpha).sum(-1) / torch.log(torch.tensor(2.0)).double()
    assert rel_err(stats.entropy, entropy_bits) < TOL
    if T > 1:  # causal row 0 sees one key: zero entropy; a later row sees several
        assert stats.entropy[..., -1].min() > 0.1


@pytest.mark.parametrize("shape,causal", CASES[2:6], ids=IDS[2:6])
def test_probe_does_not_change_output_or_gradients(shape, causal):
    plain, _, _, _ = case(shape, causal, None)
    for mode in ("full", "stats"):
        probed, _, _, _ = case(shape, causal, mode)
        for name, x, y in zip(("o", "dq", "dk", "dv"), plain, probed):
            if DEV.type == "cpu":
                assert torch.equal(x, y), (mode, name)
            else:  # separately compiled kernels may schedule arithmetic differently
                torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6, msg=f"{mode} {name}")


class _TensorBytes(TorchDispatchMode):
    """Records the size in bytes of every tensor an aten op returns while it is active (the
    Triton interpreter's byte copies of the kernel arguments included)."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.sizes += [t.numel() * t.element_size() for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
        return out


def test_probe_memory_is_what_the_mode_promises():
    """What the backward allocates, by probe mode: without a probe and with the stats probe no
    tensor of T x T per head ever exists (O(T D) memory, as FlashAttention), and the stats probe
    costs O(T) per head more than no probe; the full probe holds its [B, H, T, T] fields."""
    B, H, T, D = 1, 2, 128, 16
    q, k, v, do = make_inputs((B, H, T, D), seed=3)
    square = B * H * T * T * 4  # bytes of one float32 [B, H, T, T] tensor
    sizes = {}
    for mode in (None, "stats", "full"):
        qq, kk, vv = (x.detach().clone().requires_grad_() for x in (q, k, v))
        o = attention(qq, kk, vv, causal=True, probe=AttentionProbe(mode) if mode else None)
        with _TensorBytes() as seen:
            o.backward(do)
        sizes[mode] = seen.sizes
    for mode in (None, "stats"):
        assert max(sizes[mode]) < square, f"probe {mode}: a T x T tensor was allocated ({max(sizes[mode])} bytes)"
    extra = sum(sizes["stats"]) - sum(sizes[None])
    vectors = len(STATS) * B * H * T * 4  # bytes of the stats fields, [B, H, T] each
    assert vectors <= extra <= 8 * vectors, f"the stats probe added {extra} bytes, not O(B H T) ({vectors})"
    assert sum(n >= square for n in sizes["full"]) >= 2  # advantage, alpha (b, ds are derived)


def test_full_probe_stores_what_it_is_asked_to():
    """The full probe's T x T tensors: advantage and alpha (float32, or bf16 at half the bytes),
    plus b and ds only when `store` names them."""
    B, H, T, D = 1, 2, 20, 16
    q, k, v, do = make_inputs((B, H, T, D), seed=3)
    for store, dtype in (((), torch.float32), ((), torch.bfloat16), (("b", "ds"), torch.float32)):
        probe = AttentionProbe("full", store=store, matrix_dtype=dtype)
        run(attention, q, k, v, do, causal=True, probe=probe)
        square = {n: x for n, x in probe.tensors().items() if x.shape == (B, H, T, T)}
        assert sorted(square) == sorted(("advantage", "alpha") + store), store
        assert all(x.dtype == dtype for x in square.values()), dtype


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_stored_b_ds_and_bf16_matrices(causal):
    """store=("b", "ds") makes the kernel write them; they equal the derived ones and the
    reference. matrix_dtype=bfloat16 keeps advantage and alpha in bf16 (rounding only)."""
    shape = (2, 1, 37, 24)
    _, derived, _, ref = case(shape, causal, "full")
    q, k, v, do = make_inputs(shape, seed=hash((shape, causal)) % 10_000)
    stored = AttentionProbe("full", store=("b", "ds"))
    with poisoned_empty():
        run(attention, q, k, v, do, causal=causal, probe=stored)
    assert set(stored.tensors()) >= {"b", "ds"}
    for name in ("b", "ds"):
        assert rel_err(getattr(stored, name), getattr(ref, name)) < TOL, name
        assert rel_err(getattr(stored, name), getattr(derived, name)) < TOL, name
    assert "b" not in derived.tensors() and "ds" not in derived.tensors()
    half = AttentionProbe("full", matrix_dtype=torch.bfloat16)
    run(attention, q, k, v, do, causal=causal, probe=half)
    for name in ("advantage", "alpha"):
        x = getattr(half, name)
        assert x.dtype == torch.bfloat16, name
        assert rel_err(x.float(), getattr(ref, name)) < 1e-2, name
    assert half.u.dtype == half.expected_b.dtype == torch.float32
    assert rel_err(half.ds, ref.ds) < 2e-2 and rel_err(half.b, ref.b) < 2e-2


def test_probe_arguments_are_checked():
    with pytest.raises(ValueError, match="store must name"):
        AttentionProbe("full", store=("u",))
    with pytest.raises(ValueError, match="needs mode 'full'"):
        AttentionProbe("stats", store=("b",))
    with pytest.raises(ValueError, match="matrix_dtype"):
        AttentionProbe("full", matrix_dtype=torch.float16)


def test_probe_filled_only_by_backward_and_overwritten():
    q, k, v, do = make_inputs((1, 2, 19, 16), seed=5)
    probe = AttentionProbe("full")
    assert not probe.filled and probe.tensors() == {}
    qq = q.clone().requires_grad_()
    o = attention(qq, k, v, probe=probe)
    assert not probe.filled
    o.backward(do)
    first = probe.b.clone()
    assert probe.filled and set(probe.tensors()) == set(STORED + STATS)
    o = attention(qq, k, v, probe=probe)
    o.backward(2 * do)  # b is linear in the upstream gradient
    torch.testing.assert_close(probe.b, 2 * first)
    with pytest.raises(ValueError, match="mode"):
        AttentionProbe("everything")


def test_reference_backend_matches_autograd_and_sdpa():
    """The explicit reference backward against autograd through SDPA, and the eager probe."""
    q, k, v, do = (x.double().cpu() for x in make_inputs((2, 2, 23, 12), seed=11))
    for causal in (True, False):
        ref_probe, eager_probe = AttentionProbe("full"), AttentionProbe("full", store=("b", "ds"))
        ref = run(attention, q, k, v, do, causal=causal, probe=ref_probe, backend="reference")
        sdpa = run(
            lambda q, k, v, causal, probe: torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=causal
            ),
            q, k, v, do, causal=causal,
        )
        eager = run(eager_attention, q, k, v, do, causal=causal, probe=eager_probe)
        for x, y, z in zip(ref, sdpa, eager):
            assert rel_err(x, y) < 1e-10 and rel_err(z, y) < 1e-10
        for name in FULL_ONLY + STATS:
            assert getattr(ref_probe, name).dtype == torch.float64
            assert rel_err(getattr(eager_probe, name), getattr(ref_probe, name)) < 1e-10, name
        # Autograd's dL/ds (eager) against the routing law -alpha * A built from u . v_j.
        alpha = alpha_of(q, k, causal)
        torch.testing.assert_close(eager_probe.ds, -alpha * ref_probe.advantage, rtol=0, atol=1e-12)


def test_reference_compute_dtype():
    q, k, v, do = (x.cpu() for x in make_inputs((1, 1, 9, 8), seed=2))
    probe = AttentionProbe("stats")
    o64 = run(reference_attention, q, k, v, do, causal=True, probe=probe, compute_dtype=torch.float64)
    assert o64[0].dtype == torch.float32 and probe.entropy.dtype == torch.float64
    ref = run(reference_attention, *(x.double() for x in (q, k, v, do)), causal=True)
    for x, y in zip(o64, ref):
        assert rel_err(x, y) < 1e-6


def test_folded_ensemble_layout_and_broadcast_gradient():
    """The transformer's call: [B*E, H, T, D] views of a [B*E, T, 3, H, D] projection; o.sum()."""
    BE, T, H, D = 3, 29, 2, 20
    g = torch.Generator().manual_seed(7)
    qkv = torch.randn(BE, T, 3, H, D, generator=g).to(DEV).requires_grad_()
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    assert not q.is_contiguous()
    probe = AttentionProbe("stats")
    attention(q, k, v, causal=True, probe=probe).sum().backward()  # stride-0 upstream gradient
    qkv64 = qkv.detach().double().requires_grad_()
    q6, k6, v6 = (qkv64[:, :, i].transpose(1, 2) for i in range(3))
    ref_probe = AttentionProbe("stats")
    reference_attention(q6, k6, v6, causal=True, probe=ref_probe).sum().backward()
    assert rel_err(qkv.grad, qkv64.grad) < TOL
    for name in STATS:
        assert rel_err(getattr(probe, name), getattr(ref_probe, name)) < TOL, name


def test_custom_scale_and_head_dim_128():
    q, k, v, do = make_inputs((1, 1, 21, 128), seed=4)
    out = run(attention, q, k, v, do, causal=False, scale=0.3)
    ref = run(reference_attention, *(x.double() for x in (q, k, v, do)), causal=False, scale=0.3)
    for x, y in zip(out, ref):
        assert rel_err(x, y) < TOL


LOW = [
    pytest.param(dev, dt, id=f"{dev}-{str(dt)[6:]}")
    for dev in ("cpu", "cuda")
    for dt in (torch.float16, torch.bfloat16)
]


@pytest.mark.parametrize("device,dtype", LOW)
def test_low_precision_matches_reference(device, dtype):
    if device == "cuda" and not CUDA:
        pytest.skip("needs CUDA")
    if device == "cpu" and not interpreting():
        pytest.skip("CPU Triton needs TRITON_INTERPRET=1")
    tol = 2e-2 if dtype == torch.float16 else 6e-2
    shape = (2, 2, 93, 64) if device == "cuda" else (1, 2, 37, 24)
    for causal in (True, False):
        q, k, v, do = make_inputs(shape, dtype=dtype, seed=13, device=torch.device(device))
        probe, ref_probe = AttentionProbe("full"), AttentionProbe("full")
        out = run(attention, q, k, v, do, causal=causal, probe=probe)
        ref = run(reference_attention, *(x.double() for x in (q, k, v, do)), causal=causal, probe=ref_probe)
        for name, x, y in zip(("o", "dq", "dk", "dv"), out, ref):
            assert x.dtype == dtype
            assert rel_err(x, y) < tol, name
        for name in FULL_ONLY + STATS:
            assert getattr(probe, name).dtype == torch.float32
            assert rel_err(getattr(probe, name), getattr(ref_probe, name)) < tol, name
        if causal:
            above = ~causal_mask(shape[2], probe.ds.device)
            assert (probe.ds[..., above] == 0).all() and (probe.advantage[..., above] == 0).all()


def _bad_inputs():
    x = torch.zeros(1, 1, 4, 8)
    yield "rank", (torch.zeros(1, 4, 8), x, x), {}, "rank 4"
    yield "shape", (x, torch.zeros(1, 1, 5, 8), x), {}, "same shape"
    yield "head dim", (torch.zeros(1, 1, 4, 130),) * 3, {}, "D must be <= 128"
    yield "dtype mismatch", (x, x.half(), x), {}, "share one dtype"
    yield "int dtype", (x.long(),) * 3, {}, "dtype must be one of"
    yield "float64 triton", (x.double(),) * 3, {}, "backend='reference'"
    yield "empty", (torch.zeros(1, 1, 0, 8),) * 3, {}, ">= 1"
    yield "not tensor", (x.tolist(), x, x), {}, "q must be a torch.Tensor"
    yield "backend", (x, x, x), {"backend": "cuda"}, "backend must be one of"
    yield "probe", (x, x, x), {"probe": "full"}, "probe must be an AttentionProbe"
    yield "scale", (x, x, x), {"scale": -1.0}, "scale must be"
    yield "causal", (x, x, x), {"causal": "yes"}, "causal must be a bool"
    if CUDA:
        yield "devices", (x.cuda(), x.cpu(), x.cuda()), {}, "one device"
    long = torch.zeros(1, 1, 46341, 1)
    yield "full probe too long", (long,) * 3, {"probe": AttentionProbe("full")}, "mode='stats'"


@pytest.mark.parametrize("args,kwargs,match", [c[1:] for c in _bad_inputs()], ids=[c[0] for c in _bad_inputs()])
def test_invalid_inputs_raise(args, kwargs, match):
    if "one device" not in match:
        args = tuple(a.to(DEV) if isinstance(a, torch.Tensor) else a for a in args)
    with pytest.raises(ValueError, match=match):
        attention(*args, **kwargs)


def test_reference_backend_validates_too():
    x = torch.zeros(1, 1, 4, 8, dtype=torch.float64)
    assert attention(x, x, x, backend="reference").dtype == torch.float64
    with pytest.raises(ValueError, match="same shape"):
        attention(x, x[..., :3, :], x, backend="reference")
