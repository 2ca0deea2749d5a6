"""The compiled oracle ops (bayesbench._C) against the PyTorch reference
(docs/science.md#how-the-suite-is-built, rule 1).

Fresh random inputs of awkward sizes, both float dtypes, non-contiguous and oddly typed inputs,
the edge cases (B = 0, L = 0, L = 20000), identical errors through the public API, opcheck and
torch.compile. Runs on the CPU, and also on CUDA when the extension was built with it.
"""

from __future__ import annotations

import os

import pytest
import torch

_C = pytest.importorskip(
    "bayesbench._C",
    reason="the compiled extension bayesbench._C is not built (pip install --no-build-isolation -e .)",
)

from bayesbench import ops, oracle  # noqa: E402
from bayesbench.oracle import (  # noqa: E402
    bijection_posterior_reference,
    hmm_filter_reference,
    markov_predictive_reference,
)
from bayesbench.oracle.ctw import ctw_predictive, ctw_predictive_reference  # noqa: E402

# On the GPU check (BAYESBENCH_REQUIRE_CUDA=1, see conftest.py) the CUDA cases always run.
REQUIRE_CUDA = os.environ.get("BAYESBENCH_REQUIRE_CUDA", "") not in ("", "0")
DEVICES = ["cpu"] + (["cuda"] if (torch.cuda.is_available() and _C.WITH_CUDA) or REQUIRE_CUDA else [])
DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: dict(atol=2e-5, rtol=1e-4), torch.float64: dict(atol=1e-12, rtol=1e-10)}


@pytest.fixture(params=DEVICES)
def dev(request) -> torch.device:
    return torch.device(request.param)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _rows(shape, dtype, g, sparsity=0.0):
    """Random probability rows (last dim), optionally with exact zeros."""
    x = torch.rand(shape, generator=g, dtype=torch.float64) + 1e-3
    if sparsity:
        x = x * (torch.rand(shape, generator=g, dtype=torch.float64) >= sparsity)
        x[..., 0] += (x.sum(-1) == 0)  # keep every row a distribution
    return (x / x.sum(-1, keepdim=True)).to(dtype)


def _hmm(B, S, V, L, dtype, device, seed, init=False, sparsity=0.0):
    g = _gen(seed)
    trans = _rows((B, S, S), dtype, g, sparsity)
    emit = _rows((B, S, V), dtype, g, sparsity)
    obs = torch.randint(0, V, (B, L), generator=g)
    pi = _rows((B, S), dtype, g) if init else None
    to = lambda x: None if x is None else x.to(device)  # noqa: E731
    return to(trans), to(emit), to(obs), to(pi)


def _assert_hmm_equal(got, ref, dtype, L):
    post, loglik, dead = got
    rpost, rloglik, rdead = ref
    assert post.dtype == dtype and loglik.dtype == torch.float64 and dead.dtype == torch.int64
    assert post.shape == rpost.shape and loglik.shape == rloglik.shape == dead.shape
    torch.testing.assert_close(post, rpost, **TOL[dtype])
    # float32 normalisers differ in the last bit between backends: the log-likelihood drifts ~L ulps.
    atol = 1e-5 * max(L, 1) if dtype == torch.float32 else 1e-9
    torch.testing.assert_close(loglik, rloglik, atol=atol, rtol=1e-6 if dtype == torch.float32 else 1e-12)
    assert torch.equal(dead.cpu(), rdead.cpu())


# ---- hmm_filter ------------------------------------------------------------------------------

# (B, S, V, L): S in 2..16 (fixed-size kernels) and beyond (generic path), V up to 32, odd L.
HMM_SIZES = [(1, 2, 2, 1), (3, 3, 7, 2), (33, 5, 5, 17), (1, 16, 32, 50), (257, 7, 3, 50),
             (9, 11, 17, 17), (5, 17, 4, 17), (4, 24, 6, 2), (16, 3, 70, 9)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("B,S,V,L", HMM_SIZES)
def test_hmm_filter_matches_reference(dev, B, S, V, L, dtype):
    args = _hmm(B, S, V, L, dtype, dev, seed=B * 1000 + S * 10 + V, init=S % 2 == 1)
    _assert_hmm_equal(ops.hmm_filter(*args), hmm_filter_reference(*args), dtype, L)


@pytest.mark.parametrize("dtype", DTYPES)
def test_hmm_filter_large_batch(dev, dtype):
    args = _hmm(4099, 5, 5, 50, dtype, dev, seed=7)  # not a multiple of any lane or block width
    _assert_hmm_equal(ops.hmm_filter(*args), hmm_filter_reference(*args), dtype, 50)


@pytest.mark.parametrize("S", [3, 5, 20])
def test_hmm_filter_impossible_steps_match(dev, S):
    """Sparse matrices make many sequences impossible; dead steps and the rows after agree."""
    args = _hmm(300, S, 4, 30, torch.float64, dev, seed=S, sparsity=0.6)
    ref = hmm_filter_reference(*args)
    assert 0 < int((ref[2] >= 0).sum()) < 300  # both kinds present
    _assert_hmm_equal(ops.hmm_filter(*args), ref, torch.float64, 30)


@pytest.mark.parametrize("dtype", DTYPES)
def test_hmm_filter_long_sequence_is_stable(dev, dtype):
    L = 20000
    args = _hmm(3, 5, 5, L, dtype, dev, seed=11)
    post, loglik, dead = ops.hmm_filter(*args)
    assert torch.isfinite(post).all() and torch.isfinite(loglik).all() and (dead == -1).all()
    assert (loglik < -L * 0.1).all()  # far below what an unscaled float product could represent
    _assert_hmm_equal((post, loglik, dead), hmm_filter_reference(*args), dtype, L)


def test_hmm_filter_non_contiguous(dev):
    trans, emit, obs, init = _hmm(40, 6, 9, 23, torch.float32, dev, seed=3, init=True)
    want = hmm_filter_reference(trans, emit, obs, init)
    # Same values, other strides: transposed storage, a batch-strided slice, a column slice.
    t_nc = trans.transpose(1, 2).contiguous().transpose(1, 2)
    e_nc = torch.stack([emit, emit], 1)[:, 0]
    o_nc = torch.stack([obs, obs], -1)[..., 0]
    i_nc = torch.stack([init, init], -1)[..., 1]
    assert not any(x.is_contiguous() for x in (t_nc, e_nc, o_nc, i_nc))
    _assert_hmm_equal(ops.hmm_filter(t_nc, e_nc, o_nc, i_nc), want, torch.float32, 23)


@pytest.mark.parametrize("obs_dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
def test_hmm_filter_obs_dtypes(dev, obs_dtype):
    trans, emit, obs, _ = _hmm(10, 4, 6, 12, torch.float64, dev, seed=5)
    want = hmm_filter_reference(trans, emit, obs)
    _assert_hmm_equal(ops.hmm_filter(trans, emit, obs.to(obs_dtype)), want, torch.float64, 12)


@pytest.mark.parametrize("B,L", [(0, 5), (4, 0), (0, 0)])
def test_hmm_filter_empty(dev, B, L):
    args = _hmm(B, 3, 4, L, torch.float32, dev, seed=1)
    post, loglik, dead = ops.hmm_filter(*args)
    assert post.shape == (B, L, 3) and loglik.shape == dead.shape == (B,)
    assert (loglik == 0).all() and (dead == -1).all()
    _assert_hmm_equal((post, loglik, dead), hmm_filter_reference(*args), torch.float32, L)


def test_hmm_filter_backend_auto_uses_native(dev, monkeypatch):
    calls = []
    real = ops.hmm_filter
    monkeypatch.setattr(ops, "hmm_filter", lambda *a: calls.append(1) or real(*a))
    trans, emit, obs, _ = _hmm(2, 3, 3, 4, torch.float32, dev, seed=2)
    oracle.hmm_filter(trans, emit, obs)
    assert calls == [1]
    oracle.hmm_filter(trans, emit, obs, backend="reference")
    assert calls == [1]


# ---- bijection_posterior and markov_predictive -----------------------------------------------

def _pairs(B, L, V, seed, device):
    """Keys with repeats and the values of one random bijection per row."""
    g = _gen(seed)
    keys = torch.randint(0, V, (B, L), generator=g)
    perm = torch.argsort(torch.rand(B, V, generator=g), dim=1)
    return keys.to(device), perm.gather(1, keys).to(device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("B,L,V", [(1, 1, 1), (3, 2, 2), (17, 17, 5), (64, 50, 20), (5, 50, 32), (2, 0, 3), (0, 4, 3)])
def test_bijection_matches_reference(dev, B, L, V, dtype):
    keys, values = _pairs(B, L, V, seed=B + L + V, device=dev)
    got = ops.bijection_posterior(keys, values, V, dtype)
    want = bijection_posterior_reference(keys, values, V, dtype)
    assert got.dtype == dtype and got.shape == (B, L, V)
    assert torch.equal(got, want)  # same arithmetic, bit for bit


def test_bijection_non_contiguous_and_int_dtypes(dev):
    keys, values = _pairs(12, 19, 20, seed=4, device=dev)
    want = bijection_posterior_reference(keys, values, 20)
    k_nc, v_nc = keys.t().contiguous().t(), values.t().contiguous().t()
    assert torch.equal(ops.bijection_posterior(k_nc, v_nc, 20), want)
    assert torch.equal(ops.bijection_posterior(keys.to(torch.uint8), values.to(torch.int32), 20), want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("B,L,V,alpha", [(1, 1, 2, 1.0), (7, 2, 3, 0.5), (33, 17, 5, 1.0), (9, 50, 32, 0.1),
                                         (2, 2000, 4, 2.5), (3, 0, 4, 1.0), (0, 3, 4, 1.0)])
def test_markov_matches_reference(dev, B, L, V, alpha, dtype):
    seq = torch.randint(0, V, (B, L), generator=_gen(B + L)).to(dev)
    got = ops.markov_predictive(seq, V, alpha, dtype)
    assert got.dtype == dtype and got.shape == (B, L, V)
    assert torch.equal(got, markov_predictive_reference(seq, V, alpha, dtype))  # bit for bit


def test_markov_non_contiguous_and_int_dtypes(dev):
    seq = torch.randint(0, 6, (8, 40), generator=_gen(9)).to(dev)
    want = markov_predictive_reference(seq, 6, 1.0)
    assert torch.equal(ops.markov_predictive(seq.t().contiguous().t(), 6, 1.0), want)
    assert torch.equal(ops.markov_predictive(seq.to(torch.int8), 6, 1.0), want)


# ---- ctw_predictive (context-tree weighting, csrc/ctw.h) --------------------------------------

# (B, L, V, depth, leaf_prob): alphabet 2, depth 0, length 1, depth = length, depth > length,
# leaf_prob at both ends (0: the full tree, the order-D chain; 1: the root alone), B = 0, L = 0.
CTW_SIZES = [(3, 1, 2, 0, 0.5), (4, 9, 2, 2, 0.5), (5, 12, 3, 3, 0.3), (3, 4, 2, 4, 0.5), (3, 3, 2, 6, 0.5),
             (4, 10, 4, 1, 0.0), (4, 10, 3, 2, 1.0), (2, 1, 2, 1, 0.5), (0, 5, 2, 1, 0.5), (3, 0, 2, 1, 0.5)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("B,L,V,depth,q", CTW_SIZES)
def test_ctw_matches_the_float64_reference(dev, B, L, V, depth, q, dtype):
    """Against the plain float64 reference (P_w of the root recomputed from counts) and the
    batched PyTorch path, both rounded once to `dtype`."""
    seq = torch.randint(0, V, (B, L), generator=_gen(B + L + V + depth)).to(dev)
    got = ops.ctw_predictive(seq, V, depth, 0.5, q, dtype)
    assert got.dtype == dtype and got.shape == (B, L, V) and got.device == seq.device
    want = ctw_predictive_reference(seq.cpu(), V, depth, 0.5, q, dtype)
    torch.testing.assert_close(got.cpu(), want, **TOL[dtype])
    torch.testing.assert_close(got, ctw_predictive(seq, V, depth, 0.5, q, backend="reference", dtype=dtype),
                               **TOL[dtype])


def test_ctw_long_and_wide_against_the_batched_path(dev):
    """Many sequences, a long one and a deep tree: the compiled op and the PyTorch path agree."""
    seq = torch.randint(0, 3, (40, 120), generator=_gen(21)).to(dev)
    for depth, q in ((3, 0.5), (5, 0.2)):
        torch.testing.assert_close(ops.ctw_predictive(seq, 3, depth, 0.7, q, torch.float64),
                                   ctw_predictive(seq, 3, depth, 0.7, q, backend="reference",
                                                         dtype=torch.float64), atol=1e-12, rtol=1e-10)


def test_ctw_non_contiguous_and_int_dtypes(dev):
    seq = torch.randint(0, 2, (6, 20), generator=_gen(22)).to(dev)
    want = ops.ctw_predictive(seq, 2, 2, 0.5, 0.5, torch.float64)
    assert torch.equal(ops.ctw_predictive(seq.t().contiguous().t(), 2, 2, 0.5, 0.5, torch.float64), want)
    assert torch.equal(ops.ctw_predictive(seq.to(torch.int8), 2, 2, 0.5, 0.5, torch.float64), want)
    assert torch.equal(ops.ctw_predictive(seq.int(), 2, 2, 0.5, 0.5, torch.float64), want)


def test_ctw_backend_auto_uses_native(dev, monkeypatch):
    calls = []
    real = ops.ctw_predictive
    monkeypatch.setattr(ops, "ctw_predictive", lambda *a: calls.append(1) or real(*a))
    seq = torch.randint(0, 2, (2, 5), generator=_gen(23)).to(dev)
    ctw_predictive(seq, 2, 1)
    assert calls == [1]
    ctw_predictive(seq, 2, 1, backend="reference")
    assert calls == [1]


def test_ctw_op_refuses_a_tree_too_deep_for_its_memory(dev):
    """The op's own checks (the Python API checks the settings first): a tree of more than 2^27
    doubles per sequence is refused; deeper than the sequence is long needs no tree at all."""
    seq = torch.zeros((1, 40), dtype=torch.long, device=dev)
    with pytest.raises(RuntimeError, match="V\\^depth is too large"):
        ops.ctw_predictive(seq, 2, 30, 0.5, 0.5, torch.float32)
    assert torch.equal(ops.ctw_predictive(seq[:, :5], 2, 30, 0.5, 0.5, torch.float32),
                       torch.full((1, 5, 2), 0.5, device=dev))


# ---- identical errors through the public API --------------------------------------------------

def _same_error(fn, *args, **kwargs):
    with pytest.raises(ValueError) as ref:
        fn(*args, backend="reference", **kwargs)
    with pytest.raises(ValueError) as nat:
        fn(*args, backend="native", **kwargs)
    assert str(nat.value) == str(ref.value)


def _bad_hmm_inputs(device):
    trans, emit, obs, init = _hmm(4, 3, 5, 6, torch.float32, device, seed=8, init=True)
    nan_t = trans.clone()
    nan_t[1, 2, 0] = float("nan")
    neg_e = emit.clone()
    neg_e[2, 1, 3] = -0.5
    neg_e[2, 1, 4] += 0.5
    unnorm = trans * 1.1
    oob = obs.clone()
    oob[3, 5] = 5
    dead_e = emit.clone()
    dead_e[:, :, 0] = 0
    dead_e[:, :, 1] += emit[:, :, 0]  # symbol 0 cannot be emitted at all
    dead_o = obs.clone()
    dead_o[1, 4] = 0
    dead_o[2, 2] = 0
    return {
        "nan": (nan_t, emit, obs, init),
        "negative": (trans, neg_e, obs, init),
        "not normalised": (unnorm, emit, obs, init),
        "obs out of range": (trans, emit, oob, init),
        "obs float": (trans, emit, obs.float(), init),
        "shape": (trans, emit[:, :2], obs, init),
        "dtype mismatch": (trans, emit.double(), obs, init),
        "init": (trans, emit, obs, init * 2),
        "impossible": (trans, dead_e, dead_o, init),
    }


@pytest.mark.parametrize("case", list(_bad_hmm_inputs("cpu")))
def test_hmm_filter_errors_identical(dev, case):
    _same_error(oracle.hmm_filter, *_bad_hmm_inputs(dev)[case])


def test_bijection_and_markov_errors_identical(dev):
    keys, values = _pairs(3, 6, 5, seed=1, device=dev)
    _same_error(oracle.bijection_posterior, keys, values, 4)  # keys out of range
    _same_error(oracle.bijection_posterior, keys.float(), values, 5)
    _same_error(oracle.bijection_posterior, keys, values, 5, dtype=torch.float16)
    k = torch.tensor([[0, 1, 0], [3, 1, 2]], device=dev)
    _same_error(oracle.bijection_posterior, k, torch.tensor([[2, 3, 4], [0, 1, 4]], device=dev), 5)  # 0 -> 2, 4
    _same_error(oracle.bijection_posterior, k, torch.tensor([[2, 3, 2], [0, 1, 1]], device=dev), 5)  # 1, 2 -> 1
    seq = torch.randint(0, 4, (2, 7), generator=_gen(2)).to(dev)
    _same_error(oracle.markov_predictive, seq, 3)
    _same_error(oracle.markov_predictive, seq, 4, alpha=0.0)
    _same_error(oracle.markov_predictive, seq, 1)
    _same_error(ctw_predictive, seq, 3, 1)
    _same_error(ctw_predictive, seq, 4, -1)
    _same_error(ctw_predictive, seq, 4, 1, alpha=0.0)
    _same_error(ctw_predictive, seq, 4, 1, leaf_prob=1.5)


# ---- op registration: opcheck, torch.compile, module flags ------------------------------------

def test_opcheck(dev):
    trans, emit, obs, init = _hmm(6, 3, 4, 7, torch.float64, dev, seed=12, init=True)
    ops = torch.ops.bayesbench
    torch.library.opcheck(ops.hmm_filter.default, (trans, emit, obs, init))
    torch.library.opcheck(ops.hmm_filter.default, (trans.float(), emit.float(), obs.int(), None))
    keys, values = _pairs(4, 9, 6, seed=3, device=dev)
    torch.library.opcheck(ops.bijection_posterior.default, (keys, values, 6, torch.float32))
    torch.library.opcheck(ops.markov_predictive.default, (keys, 6, 0.5, torch.float64))
    torch.library.opcheck(ops.ctw_predictive.default, (keys, 6, 2, 0.5, 0.5, torch.float32))


def test_torch_compile_fullgraph(dev):
    trans, emit, obs, init = _hmm(5, 4, 3, 9, torch.float32, dev, seed=13, init=True)
    keys, values = _pairs(5, 9, 7, seed=5, device=dev)

    def fn(trans, emit, obs, init, keys, values):
        post, loglik, _ = ops.hmm_filter(trans, emit, obs, init)
        bij = ops.bijection_posterior(keys, values, 7, torch.float32)
        mk = ops.markov_predictive(keys, 7, 1.0, torch.float32)
        ctw = ops.ctw_predictive(keys, 7, 1, 0.5, 0.5, torch.float32)
        return post.sum(-1) + loglik[:, None], bij * 2, mk + 1, ctw * 3

    compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)
    for got, want in zip(compiled(trans, emit, obs, init, keys, values), fn(trans, emit, obs, init, keys, values)):
        torch.testing.assert_close(got, want)


def test_module_flags():
    assert isinstance(_C.WITH_CUDA, bool) and isinstance(_C.WITH_OPENMP, bool)
    assert _C.WITH_OPENMP, "the CPU kernels were built without OpenMP (missing -fopenmp)"
    missing = [op for op in ops.OPS if not hasattr(torch.ops.bayesbench, op)]  # dir() lists only ops used so far
    assert not missing, f"ops not registered by bayesbench._C: {missing}"
