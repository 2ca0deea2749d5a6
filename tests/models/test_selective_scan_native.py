"""The fused CPU selective scan of bayesbench._C (scan method "native") against the references.

Forward and every gradient against `selective_scan_ref` (computed in float64) on fresh random
inputs of awkward sizes, both float dtypes, A shared ([D, N]) and per sequence ([M, D, N]);
against the other scan methods; non-contiguous inputs; edge cases (L = 1, empty batches, strong
decays); opcheck on both ops; a float64 gradcheck; a whole Mamba model against scan="reference".
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

_C = pytest.importorskip(
    "bayesbench._C",
    reason="the compiled extension bayesbench._C is not built (pip install --no-build-isolation -e .)",
)

from bayesbench.models import get_model  # noqa: E402
from bayesbench.models.scan import (  # noqa: E402
    native_scan_available,
    resolve_method,
    selective_scan,
    selective_scan_ref,
)
from bayesbench.tasks import get_task  # noqa: E402

TOL = {torch.float32: 1e-4, torch.float64: 1e-10}


@pytest.fixture(autouse=True)
def _ops_built():
    if not native_scan_available():
        pytest.fail("bayesbench._C is built but lacks the selective_scan ops: it is stale, rebuild it "
                    "with `pip install --no-build-isolation -e .`")


def _inputs(M, L, Dn, N, dtype, seed, per_member=False, skip=True, strong=False):
    """Mamba-like inputs: delta > 0, A < 0 (dt * A down to about -30, or -300 when strong)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, L, Dn, generator=g, dtype=torch.float64)
    delta = F.softplus(torch.randn(M, L, Dn, generator=g, dtype=torch.float64))
    A_shape = (M, Dn, N) if per_member else (Dn, N)
    A = -torch.exp(torch.randn(A_shape, generator=g, dtype=torch.float64)) * (100 if strong else 2)
    B = torch.randn(M, L, N, generator=g, dtype=torch.float64)
    C = torch.randn(M, L, N, generator=g, dtype=torch.float64)
    D = torch.randn(Dn, generator=g, dtype=torch.float64) if skip else None
    return tuple(None if t is None else t.to(dtype) for t in (x, delta, A, B, C, D))


def _grads(y, inputs, grad_out):
    wrt = [t for t in inputs if t is not None]
    return torch.autograd.grad(y, wrt, grad_out)


def _close(got, want, dtype, what):
    tol = TOL[dtype]
    scale = want.abs().max().item() if want.numel() else 0.0
    torch.testing.assert_close(got.to(want.dtype), want, rtol=tol, atol=tol * max(scale, 1.0),
                               msg=lambda m: f"{what}: {m}")


# (M, L, Dn, N, A per sequence, skip term D): every awkward size appears at least once
CASES = [
    (1, 1, 1, 1, False, True),
    (2, 2, 3, 8, True, False),
    (3, 17, 33, 16, False, True),
    (7, 50, 3, 8, True, True),
    (4, 17, 1, 16, True, False),
    (5, 50, 33, 1, False, False),
    (6, 2, 33, 16, True, True),
    (1, 50, 1, 8, False, True),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("M,L,Dn,N,per_member,skip", CASES, ids=[f"M{c[0]}L{c[1]}D{c[2]}N{c[3]}" +
                                                                 ("-AM" if c[4] else "") for c in CASES])
def test_native_matches_reference(M, L, Dn, N, per_member, skip, dtype):
    seed = 1000 * M + 100 * L + 10 * Dn + N
    ref_in = tuple(None if t is None else t.requires_grad_() for t in
                   _inputs(M, L, Dn, N, torch.float64, seed, per_member, skip))
    nat_in = tuple(None if t is None else t.detach().to(dtype).requires_grad_() for t in ref_in)
    y_ref = selective_scan_ref(*ref_in)
    y = selective_scan(*nat_in, method="native")
    assert y.dtype == dtype and y.shape == (M, L, Dn)
    _close(y, y_ref, dtype, "y")
    assert y_ref.abs().max() > 0.1
    grad_out = torch.randn(M, L, Dn, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    names = [n for n, t in zip("x delta A B C D".split(), ref_in) if t is not None]
    for name, got, want in zip(names, _grads(y, nat_in, grad_out.to(dtype)), _grads(y_ref, ref_in, grad_out)):
        assert got.shape == want.shape, name
        _close(got, want, dtype, f"d{name}")


@pytest.mark.parametrize("method", ["sequential", "parallel"])
def test_native_matches_the_other_methods(method):
    inputs = tuple(t.requires_grad_() for t in _inputs(3, 17, 33, 8, torch.float64, 7, per_member=True))
    y, y_other = selective_scan(*inputs, method="native"), selective_scan(*inputs, method=method)
    _close(y, y_other, torch.float64, "y")
    grad_out = torch.randn_like(y)
    for got, want in zip(_grads(y, inputs, grad_out), _grads(y_other, inputs, grad_out)):
        _close(got, want, torch.float64, "grad")


def test_strong_decays_and_large_values():
    # exp(delta A) underflows to exact zeros (float32 and float64); the states stay finite
    for dtype in (torch.float32, torch.float64):
        inputs = tuple(t.requires_grad_() for t in _inputs(2, 50, 33, 16, dtype, 3, strong=True))
        y = selective_scan(*inputs, method="native")
        ref_in = tuple(t.detach().double().requires_grad_() for t in inputs)
        y_ref = selective_scan_ref(*ref_in)
        _close(y, y_ref, dtype, "y")
        for got, want in zip(_grads(y, inputs, torch.ones_like(y)), _grads(y_ref, ref_in, torch.ones_like(y_ref))):
            assert torch.isfinite(got).all()
            _close(got, want, dtype, "grad")
    # no decay at all (A = 0): h is a running sum, y grows with t
    x, delta, A, B, C, _ = _inputs(1, 50, 3, 8, torch.float32, 4)
    torch.testing.assert_close(selective_scan(x, delta, A * 0, B, C, method="native"),
                               selective_scan_ref(x, delta, A * 0, B, C), rtol=1e-4, atol=1e-4)


def test_baseline_loops_without_avx2():
    # BAYESBENCH_NO_AVX2=1 makes the op take its baseline (SSE2) loops instead of the AVX2 clones
    code = (
        "import torch\n"
        "from bayesbench.models.scan import selective_scan, selective_scan_ref\n"
        "g = torch.Generator().manual_seed(0)\n"
        "for dtype, tol in ((torch.float32, 1e-4), (torch.float64, 1e-10)):\n"
        "    M, L, Dn, N = 3, 17, 33, 8\n"
        "    x, B, C = (torch.randn(s, generator=g, dtype=torch.float64) for s in ((M, L, Dn), (M, L, N), (M, L, N)))\n"
        "    delta = torch.rand(M, L, Dn, generator=g, dtype=torch.float64) * 2\n"
        "    A = -torch.rand(M, Dn, N, generator=g, dtype=torch.float64) * 5\n"
        "    ref = [t.clone().requires_grad_() for t in (x, delta, A, B, C)]\n"
        "    nat = [t.to(dtype).requires_grad_() for t in (x, delta, A, B, C)]\n"
        "    y_ref, y = selective_scan_ref(*ref), selective_scan(*nat, method='native')\n"
        "    torch.testing.assert_close(y.double(), y_ref, rtol=tol, atol=tol * y_ref.abs().max().item())\n"
        "    y_ref.square().sum().backward(); y.square().sum().backward()\n"
        "    for a, b in zip(nat, ref):\n"
        "        torch.testing.assert_close(a.grad.double(), b.grad, rtol=tol, atol=tol * b.grad.abs().max().item())\n"
        "print('ok')\n"
    )
    env = dict(os.environ, BAYESBENCH_NO_AVX2="1")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_non_contiguous_inputs_give_the_same_numbers():
    M, L, Dn, N = 4, 17, 33, 8
    g = torch.Generator().manual_seed(11)
    x = torch.randn(M, Dn, L, generator=g).transpose(1, 2)  # [M, L, Dn], time not innermost
    delta = F.softplus(torch.randn(M, L, 2 * Dn, generator=g))[..., ::2]  # strided channels
    A = -torch.rand(M, N, Dn, generator=g).transpose(1, 2) * 3  # [M, Dn, N] transposed
    BC = torch.randn(M, L, 2 * N + 3, generator=g)
    B, C = BC[..., :N], BC[..., N:2 * N]  # the model's split of x_proj
    noncontig = [t.requires_grad_() for t in (x, delta, A, B, C)]
    contig = [t.detach().contiguous().requires_grad_() for t in noncontig]
    assert not any(t.is_contiguous() for t in noncontig)
    y1, y2 = selective_scan(*noncontig, method="native"), selective_scan(*contig, method="native")
    assert torch.equal(y1, y2)
    grad_out = torch.randn(M, 1, Dn, generator=g).expand(M, L, Dn)  # a stride-0 upstream gradient
    for a, b in zip(_grads(y1, noncontig, grad_out), _grads(y2, contig, grad_out.contiguous())):
        assert torch.equal(a, b)


def test_threads_do_not_change_the_numbers():
    inputs = _inputs(7, 17, 33, 8, torch.float32, 5)[:5]
    dy = torch.randn(7, 17, 33, generator=torch.Generator().manual_seed(6))
    ops = torch.ops.bayesbench
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = (ops.selective_scan_fwd(*inputs), *ops.selective_scan_bwd(*inputs, dy))
        torch.set_num_threads(2)
        two = (ops.selective_scan_fwd(*inputs), *ops.selective_scan_bwd(*inputs, dy))
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(one, two):
        assert torch.equal(a, b)


def test_empty_and_degenerate_shapes():
    ops = torch.ops.bayesbench
    for M, L, Dn, N in ((0, 5, 3, 2), (2, 0, 3, 2), (2, 5, 0, 2), (2, 5, 3, 0)):
        x = torch.randn(M, L, Dn)
        A, BC = -torch.rand(Dn, N), torch.randn(M, L, N)
        y = ops.selective_scan_fwd(x, x.abs(), A, BC, BC)
        assert y.shape == (M, L, Dn) and not y.any()
        dx, ddelta, dA, dB, dC = ops.selective_scan_bwd(x, x.abs(), A, BC, BC, torch.ones_like(x))
        assert (dx.shape, dA.shape, dB.shape) == ((M, L, Dn), (Dn, N), (M, L, N))
        for t in (dx, ddelta, dA, dB, dC):
            assert not t.any()


def test_op_errors():
    ops = torch.ops.bayesbench
    x, A, B = torch.rand(2, 4, 3), -torch.rand(3, 5), torch.rand(2, 4, 5)
    with pytest.raises(RuntimeError, match="A must be"):
        ops.selective_scan_fwd(x, x, -torch.rand(4, 5), B, B)
    with pytest.raises(RuntimeError, match="B must be"):
        ops.selective_scan_fwd(x, x, A, B[:, :3], B)
    with pytest.raises(RuntimeError, match="one dtype"):
        ops.selective_scan_fwd(x, x.double(), A, B, B)
    with pytest.raises(RuntimeError, match="float32 or float64"):
        ops.selective_scan_fwd(x.half(), x.half(), A.half(), B.half(), B.half())
    with pytest.raises(RuntimeError, match="dy must have the shape"):
        ops.selective_scan_bwd(x, x, A, B, B, x[:, :2])


def test_method_resolution():
    assert resolve_method("auto", torch.device("cpu")) == "native"
    assert resolve_method("auto", torch.device("cuda")) == "parallel"
    with pytest.raises(RuntimeError, match="only a CPU kernel"):
        resolve_method("native", torch.device("cuda"))
    # other dtypes are promoted: float16/bfloat16 run in float32 and come back in their dtype
    x, delta, A, B, C, D = _inputs(2, 17, 3, 8, torch.float32, 9)
    y = selective_scan(x.bfloat16(), delta, A, B, C, method="native")
    assert y.dtype == torch.float32  # promoted with float32 delta, A, B, C
    y16 = selective_scan(*(t.bfloat16() for t in (x, delta, A, B, C)), method="native")
    assert y16.dtype == torch.bfloat16
    torch.testing.assert_close(y16.float(), selective_scan_ref(x, delta, A, B, C), rtol=0.05, atol=0.05)


def test_opcheck():
    ops = torch.ops.bayesbench
    for dtype, per_member in ((torch.float32, False), (torch.float64, True)):
        x, delta, A, B, C, _ = _inputs(3, 5, 4, 2, dtype, 12, per_member=per_member)
        dy = torch.randn_like(x)
        torch.library.opcheck(ops.selective_scan_fwd.default, (x, delta, A, B, C))
        torch.library.opcheck(ops.selective_scan_bwd.default, (x, delta, A, B, C, dy))
    # non-contiguous inputs
    x, delta, A, B, C, _ = _inputs(3, 5, 4, 2, torch.float32, 13, per_member=True)
    args = (x.transpose(0, 1).contiguous().transpose(0, 1), delta, A.mT.contiguous().mT, B, C)
    torch.library.opcheck(ops.selective_scan_fwd.default, args)


def test_gradcheck():
    inputs = tuple(t.requires_grad_() for t in _inputs(2, 5, 3, 2, torch.float64, 14, per_member=True))
    assert torch.autograd.gradcheck(lambda *a: selective_scan(*a, method="native"), inputs)
    shared = tuple(t.requires_grad_() for t in _inputs(2, 4, 3, 2, torch.float64, 15, skip=False)[:5])
    assert torch.autograd.gradcheck(lambda *a: selective_scan(*a, method="native"), shared)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-4)], ids=["f64", "f32"])
def test_mamba_native_matches_reference(dtype, tol):
    task = get_task("bijection", V=8)
    model = get_model("mamba", task, seeds=[0, 1], n_layer=2, d_model=12, d_state=4).to(dtype)
    with torch.no_grad():  # make the mixers matter (as test_models_zoo does)
        for block in model.blocks:
            block.out_proj.weight.mul_(50)
    tokens = torch.randint(0, 16, (2, 3, 16), generator=torch.Generator().manual_seed(0))
    results = {}
    for method in ("native", "reference"):
        model.set_scan(method)
        model.zero_grad(set_to_none=True)
        logits = model(tokens)
        (logits.square().mean() + logits[..., 0].sum()).backward()
        results[method] = (logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()})
    (lo_n, gr_n), (lo_r, gr_r) = results["native"], results["reference"]
    torch.testing.assert_close(lo_n, lo_r, rtol=tol, atol=tol)
    assert gr_n.keys() == gr_r.keys()
    for name in gr_r:
        scale = max(gr_r[name].abs().max().item(), 1.0)
        torch.testing.assert_close(gr_n[name], gr_r[name], rtol=tol, atol=tol * scale, msg=lambda m: f"{name}: {m}")
    assert gr_r["blocks.0.ssm.A_log"].abs().max() > 0  # the scan's parameters do get gradients


def test_torch_compile_fullgraph():
    inputs = tuple(t.requires_grad_() for t in _inputs(3, 17, 5, 4, torch.float32, 16))
    compiled = torch.compile(lambda *a: selective_scan(*a, method="auto"), backend="aot_eager", fullgraph=True)
    y, y_eager = compiled(*inputs), selective_scan(*inputs, method="native")
    torch.testing.assert_close(y, y_eager)
    grad_out = torch.randn_like(y)
    for got, want in zip(_grads(y, inputs, grad_out), _grads(y_eager, inputs, grad_out)):
        torch.testing.assert_close(got, want)


def test_mamba_causal_conv_matches_conv1d():
    # CausalDepthwiseConv (time-shifted addcmuls) against the grouped F.conv1d it replaced
    from bayesbench.models.mamba import CausalDepthwiseConv

    E, Bsz, Dn, k = 2, 3, 5, 4
    conv = CausalDepthwiseConv(E, Dn, k).double()
    for e in range(E):
        conv.reset_member(e, torch.Generator().manual_seed(e))
    for L in (1, 2, 9):
        x = torch.randn(E, Bsz, L, Dn, dtype=torch.float64, generator=torch.Generator().manual_seed(L))
        x.requires_grad_()
        xc = x.permute(1, 0, 3, 2).reshape(Bsz, E * Dn, L)
        ref = F.conv1d(xc, conv.weight.reshape(E * Dn, 1, k), conv.bias.reshape(E * Dn), padding=k - 1,
                       groups=E * Dn)[..., :L].reshape(Bsz, E, Dn, L).permute(1, 0, 3, 2)
        out = conv(x)
        torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
        grad_out = torch.randn_like(ref)
        wrt = (x, conv.weight, conv.bias)
        for got, want in zip(torch.autograd.grad(out, wrt, grad_out), torch.autograd.grad(ref, wrt, grad_out)):
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
