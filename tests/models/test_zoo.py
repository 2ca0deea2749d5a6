"""The architecture zoo (lstm, gru, mamba, linear-attention, toy-attention): shapes, causality,
ensemble members equal solo runs (forward and gradients), capacity matching, header inputs, and
each fast path against its reference (parallel scan, cumulative-sum linear attention, the
ensemble LSTM/GRU against torch.nn.LSTM/GRU)."""

from __future__ import annotations

import math

import pytest
import torch

from bayesbench.models import TaskShape, count_params, get_model
from bayesbench.models.gru import GRU
from bayesbench.models.linear_attention import (
    causal_linear_attention,
    causal_linear_attention_ref,
    match_linear_attention,
)
from bayesbench.models.lstm import LSTM
from bayesbench.models.mamba import match_mamba
from bayesbench.models.recurrent import match_rnn
from bayesbench.models.scan import linear_scan, linear_scan_ref, selective_scan, selective_scan_ref
from bayesbench.models.toy_attention import match_toy_attention
from bayesbench.tasks import get_task


def match_lstm(shape, target, **kw):
    """An LSTM config of `target` parameters (what `build_lstm(match_params=...)` fits)."""
    return match_rnn(LSTM, shape, target, **kw)


def match_gru(shape, target, **kw):
    return match_rnn(GRU, shape, target, **kw)

TINY = {
    "lstm": dict(n_layer=2, d_model=12, d_embed=10),
    "gru": dict(n_layer=2, d_model=12, d_embed=10),
    "mamba": dict(n_layer=2, d_model=12, d_state=4),
    "linear-attention": dict(n_layer=2, n_head=2, d_model=12, d_ffn=20),
    "toy-attention": dict(d_model=12, d_head=6),
}
ARCHS = sorted(TINY)
# (name, config) cases for the causality and ensemble tests: every arch, and Mamba with each scan kernel
CASES = [(name, TINY[name]) for name in ARCHS] + [("mamba", {**TINY["mamba"], "scan": "parallel"}),
                                                  ("mamba", {**TINY["mamba"], "scan": "sequential"})]
CASE_IDS = ARCHS + ["mamba-parallel", "mamba-sequential"]
QUICK_TRANSFORMER = dict(n_layer=2, n_head=2, d_model=64, d_ffn=256)  # config.presets QUICK transformer
MATCHERS = {"lstm": match_lstm, "gru": match_gru, "mamba": match_mamba,
            "linear-attention": match_linear_attention, "toy-attention": match_toy_attention}
MATCH_KW = {"mamba": dict(n_layer=4), "linear-attention": dict(n_layer=2, n_head=2)}


@pytest.fixture(scope="module")
def bij() -> TaskShape:
    return TaskShape.from_task(get_task("bijection", V=8))  # vocab 16, C 8, L 16


def tokens_for(shape: TaskShape, E: int, B: int, L: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, shape.vocab_size, (E, B, L), generator=g)


@pytest.mark.parametrize("name", ARCHS)
def test_output_shape_and_finite(name, bij, device):
    model = get_model(name, bij, seeds=[0, 1], device=device, **TINY[name])
    logits = model(tokens_for(bij, 2, 3, 16).to(device))
    assert logits.shape == (2, 3, 16, bij.num_classes)
    assert torch.isfinite(logits).all()
    assert logits.std() > 0
    short = model(tokens_for(bij, 2, 3, 5).to(device))  # shorter than max_len works too
    assert short.shape == (2, 3, 5, bij.num_classes)


@pytest.mark.parametrize("name,cfg", CASES, ids=CASE_IDS)
def test_causal(name, cfg, bij):
    model = get_model(name, bij, seeds=[0, 1], **cfg)
    tokens = tokens_for(bij, 2, 3, 16)
    base = model(tokens)
    for t in (0, 6, 14):
        changed = tokens.clone()
        changed[..., t + 1:] = (changed[..., t + 1:] + 1 + torch.arange(15 - t)) % bij.vocab_size
        out = model(changed)
        torch.testing.assert_close(out[:, :, :t + 1], base[:, :, :t + 1], atol=1e-6, rtol=0)
        assert (out[:, :, t + 1:] - base[:, :, t + 1:]).abs().max() > 1e-6  # later positions do change


@pytest.mark.parametrize("name,cfg", CASES, ids=CASE_IDS)
def test_ensemble_members_equal_solo_models(name, cfg, bij):
    seeds = [5, 6, 7]
    ens = get_model(name, bij, seeds=seeds, **cfg)
    tokens = tokens_for(bij, 3, 4, 16, seed=1)
    weights = torch.randn(3, 4, 16, bij.num_classes, generator=torch.Generator().manual_seed(2))
    logits = ens(tokens)
    (logits * weights).sum().backward()
    grads = {k: p.grad for k, p in ens.named_parameters()}
    for e, seed in enumerate(seeds):
        solo = get_model(name, bij, seeds=[seed], **cfg)
        for k, v in solo.state_dict().items():
            assert torch.equal(ens.member_state(e)[k], v), f"member {e} init differs from solo seed {seed} at {k}"
        solo_logits = solo(tokens[e:e + 1])
        torch.testing.assert_close(logits[e], solo_logits[0], atol=1e-6, rtol=0)
        (solo_logits * weights[e:e + 1]).sum().backward()
        for k, p in solo.named_parameters():
            torch.testing.assert_close(grads[k][e], p.grad[0], atol=1e-5, rtol=1e-5, msg=f"grad of {k}, member {e}")
    assert not torch.equal(ens.member_state(0)[next(iter(ens.state_dict()))],
                           ens.member_state(1)[next(iter(ens.state_dict()))])  # seeds give different members


@pytest.mark.parametrize("name", ARCHS)
def test_header_inputs(name):
    task = get_task("hmm")  # "rows" encoding: 10 header vectors of width 5
    shape = TaskShape.from_task(task)
    batch = task.sample(3, torch.Generator().manual_seed(0))
    model = get_model(name, shape, seeds=[0, 1], **TINY[name])
    tokens = batch.tokens.expand(2, -1, -1)
    header = batch.header.expand(2, -1, -1, -1)
    logits = model(tokens, header)
    assert logits.shape == (2, 3, task.seq_len, task.num_classes) and torch.isfinite(logits).all()
    other = model(tokens, header.flip(1))  # the header is read: different rows, different logits
    assert (other - logits).abs().max() > 1e-5
    with pytest.raises(ValueError, match="header must be given"):
        model(tokens)


@pytest.mark.parametrize("name", ARCHS)
def test_capacity_matching(name, bij):
    target = count_params("transformer", bij, **QUICK_TRANSFORMER)
    cfg = MATCHERS[name](bij, target, **MATCH_KW.get(name, {}))
    got = count_params(name, bij, **vars(cfg))
    assert abs(got - target) / target <= 0.01
    model = get_model(name, bij, match_params=target, **MATCH_KW.get(name, {}))  # the builder's route
    assert model.num_params() == got
    assert model.num_params() == sum(p.numel() for p in model.parameters())  # E = 1


def test_capacity_matching_paper_scale():
    shape = TaskShape.from_task(get_task("bijection"))
    target = count_params("transformer", shape, size="paper-bijection")
    for cfg, name in ((match_lstm(shape, target), "lstm"), (match_mamba(shape, target, n_layer=12), "mamba")):
        assert abs(count_params(name, shape, **vars(cfg)) - target) / target <= 0.01


def test_matching_errors(bij):
    with pytest.raises(ValueError, match="target must be a positive integer"):
        match_lstm(bij, 0)
    with pytest.raises(ValueError, match="no toy attention within"):
        match_toy_attention(bij, 10)  # smaller than the smallest toy (43)
    with pytest.raises(ValueError, match="do not also give"):
        get_model("lstm", bij, match_params=10_000, d_model=8)


def test_bad_configs(bij):
    with pytest.raises(ValueError, match="d_model must be a positive integer"):
        get_model("lstm", bij, d_model=0)
    with pytest.raises(ValueError, match="divisible by n_head"):
        get_model("linear-attention", bij, n_head=5, d_model=12)
    with pytest.raises(ValueError, match="scan must be one of"):
        get_model("mamba", bij, scan="fast")
    with pytest.raises(ValueError, match="init_std must be a positive finite number"):
        get_model("toy-attention", bij, init_std=0.0)


# ---------------------------------------------------------------------------------------------
# LSTM / GRU


def test_lstm_init_forget_bias_and_orthogonal(bij):
    model = get_model("lstm", bij, seeds=[3, 4], **TINY["lstm"])
    h = TINY["lstm"]["d_model"]
    for layer in model.layers:
        for e in range(2):
            bias = layer.bias[e]
            assert torch.equal(bias[h:2 * h], torch.ones(h))
            assert torch.equal(torch.cat([bias[:h], bias[2 * h:]]), torch.zeros(3 * h))
            for g in range(4):
                block = layer.w_hh[e, :, g * h:(g + 1) * h].double()
                torch.testing.assert_close(block.T @ block, torch.eye(h, dtype=torch.float64), atol=1e-6, rtol=0)
    w = model.layers[0].w_ih[0]
    bound = math.sqrt(6 / (w.shape[0] + w.shape[1]))
    assert w.abs().max() <= bound and w.abs().max() > 0.8 * bound  # Glorot uniform


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_recurrent_layer_matches_torch(name, bij):
    """Each member of the first layer equals torch.nn.LSTM/GRU with the same weights."""
    torch.manual_seed(0)
    model = get_model(name, bij, seeds=[0, 1], **TINY[name])
    layer = model.layers[0]
    with torch.no_grad():  # non-trivial biases so every bias path is exercised
        layer.bias.normal_()
        if name == "gru":
            layer.bias_hn.normal_()
    x = torch.randn(2, 3, 9, layer.d_in)
    out = layer(x)
    for e in range(2):
        ref = layer.member_as_torch(e)
        assert type(ref) is (torch.nn.LSTM if name == "lstm" else torch.nn.GRU)
        torch.testing.assert_close(out[e], ref(x[e])[0], atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# Mamba and its scan


@pytest.mark.parametrize("kernel", ["parallel", "sequential"])
@pytest.mark.parametrize("dtype,atol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
@pytest.mark.parametrize("L", [1, 7, 33, 130])
def test_linear_scan_matches_reference(L, dtype, atol, kernel, device):
    g = torch.Generator().manual_seed(L)
    decay = torch.rand(2, L, 5, 3, generator=g, dtype=dtype).to(device).requires_grad_()
    inputs = torch.randn(2, L, 5, 3, generator=g, dtype=dtype).to(device).requires_grad_()
    grad_out = torch.randn(2, L, 5, 3, generator=g, dtype=dtype).to(device)
    fast, ref = linear_scan(decay, inputs, kernel), linear_scan_ref(decay, inputs)
    torch.testing.assert_close(fast, ref, atol=atol, rtol=0)
    assert ref.abs().max() > 1.0
    for a, b in zip(torch.autograd.grad(fast, (decay, inputs), grad_out),
                    torch.autograd.grad(ref, (decay, inputs), grad_out)):
        torch.testing.assert_close(a, b, atol=10 * atol, rtol=0)


@pytest.mark.parametrize("method", ["parallel", "sequential"])
@pytest.mark.parametrize("dtype,atol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
@pytest.mark.parametrize("L", [1, 7, 33, 130])
def test_selective_scan_matches_reference(L, dtype, atol, method, device):
    g = torch.Generator().manual_seed(100 + L)
    M, D, N = 3, 6, 4
    x = torch.randn(M, L, D, generator=g, dtype=dtype)
    delta = torch.nn.functional.softplus(torch.randn(M, L, D, generator=g, dtype=dtype))
    A = -torch.arange(1, N + 1, dtype=dtype).expand(D, N) * torch.rand(D, 1, generator=g, dtype=dtype) * 4
    B = torch.randn(M, L, N, generator=g, dtype=dtype)
    C = torch.randn(M, L, N, generator=g, dtype=dtype)
    Dskip = torch.randn(D, generator=g, dtype=dtype)
    inputs = tuple(t.to(device).requires_grad_() for t in (x, delta, A, B, C, Dskip))
    fast, ref = selective_scan(*inputs, method=method), selective_scan_ref(*inputs)
    torch.testing.assert_close(fast, ref, atol=atol, rtol=0)
    assert ref.abs().max() > 0.5  # the comparison is not between near-zero tensors
    grad_out = torch.randn(fast.shape, generator=g, dtype=dtype).to(device)
    for a, b in zip(torch.autograd.grad(fast, inputs, grad_out), torch.autograd.grad(ref, inputs, grad_out)):
        torch.testing.assert_close(a, b, atol=20 * atol, rtol=10 * atol)


@pytest.mark.parametrize("kernel", ["parallel", "sequential"])
def test_linear_scan_gradcheck_and_strong_decay(kernel):
    g = torch.Generator().manual_seed(0)
    decay = torch.rand(2, 6, 3, generator=g, dtype=torch.float64).requires_grad_()
    inputs = torch.randn(2, 6, 3, generator=g, dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: linear_scan(a, b, kernel), (decay, inputs))
    # decays that underflow (exp(-200) per step) give exact zeros, never inf/nan
    tiny = torch.full((1, 64, 2), math.exp(-200.0), dtype=torch.float32)
    out = linear_scan(tiny, torch.ones(1, 64, 2), kernel)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, torch.ones(1, 64, 2))


def test_scan_errors():
    with pytest.raises(ValueError, match="same shape"):
        linear_scan(torch.rand(2, 3, 4), torch.rand(2, 3, 5))
    with pytest.raises(ValueError, match="kernel must be one of"):
        linear_scan(torch.rand(2, 3), torch.rand(2, 3), "fft")
    with pytest.raises(ValueError, match="B must be"):
        x = torch.rand(1, 4, 3)
        selective_scan(x, x, -torch.rand(3, 2), torch.rand(1, 4, 5), torch.rand(1, 4, 2))


def test_mamba_init_and_scan_switch(bij):
    model = get_model("mamba", bij, seeds=[0], **TINY["mamba"]).double()
    ssm = model.blocks[0].ssm
    N = TINY["mamba"]["d_state"]
    torch.testing.assert_close(-torch.exp(ssm.A_log[0, 3]), -torch.arange(1, N + 1, dtype=torch.float64))  # S4D-real
    assert torch.equal(ssm.D, torch.ones_like(ssm.D))
    dt = torch.nn.functional.softplus(ssm.dt_bias)
    assert dt.min() >= 1e-3 - 1e-9 and dt.max() <= 1e-1 + 1e-9
    with torch.no_grad():  # make the mixers matter so the comparison is not dominated by the embedding
        for block in model.blocks:
            block.out_proj.weight.mul_(50)
    tokens = tokens_for(bij, 1, 2, 16)
    outputs = {}
    for method in ("parallel", "sequential", "reference"):
        model.set_scan(method)
        outputs[method] = model(tokens)
    torch.testing.assert_close(outputs["parallel"], outputs["reference"], atol=1e-10, rtol=0)
    torch.testing.assert_close(outputs["sequential"], outputs["reference"], atol=1e-10, rtol=0)
    without_mixers = model.head(model.ln_f(model.embed(tokens)))
    assert (outputs["reference"] - without_mixers).abs().max() > 1e-3  # the comparison sees the mixers


# ---------------------------------------------------------------------------------------------
# linear attention, toy attention


@pytest.mark.parametrize("L", [1, 7, 33])
def test_linear_attention_cumsum_matches_quadratic(L):
    g = torch.Generator().manual_seed(L)
    q, k, v = (torch.randn(2, 3, L, 5, generator=g, dtype=torch.float64) for _ in range(3))
    torch.testing.assert_close(causal_linear_attention(q, k, v), causal_linear_attention_ref(q, k, v),
                               atol=1e-12, rtol=0)


def test_linear_attention_is_the_transformer_with_linear_attention(bij):
    """Same config and seed as the transformer: identical parameters (only the attention map differs)."""
    a = get_model("transformer", bij, seeds=[3], **QUICK_TRANSFORMER)
    b = get_model("linear-attention", bij, seeds=[3], **QUICK_TRANSFORMER)
    assert a.num_params() == b.num_params()
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(va, vb), (ka, kb)


def test_toy_attention_structure(bij):
    model = get_model("toy-attention", bij, seeds=[0], d_model=48)
    assert not any("LayerNorm" in type(m).__name__ for m in model.modules())
    names = {k for k, _ in model.named_parameters()}
    assert names == {"embed.tok.weight", "embed.pos.weight", "W_Q.weight", "W_K.weight", "W_V.weight", "W_O.weight"}
    assert abs(model.W_Q.weight.std().item() - 0.1) < 0.01  # N(0, 0.1^2) by default
    tokens = tokens_for(bij, 1, 2, 16)
    parts = model.internals(tokens)
    alpha = parts["alpha"]
    torch.testing.assert_close(alpha.sum(-1), torch.ones(1, 2, 16))
    assert torch.equal(alpha.triu(1), torch.zeros_like(alpha))
    x = model.embed(tokens)  # no residual: logits are W_O applied to the attention output only
    expected = model.W_O(alpha @ model.W_V(x))
    torch.testing.assert_close(parts["logits"], expected)
    torch.testing.assert_close(model(tokens), expected)


def test_set_scan_checks_the_name_and_switches_every_block(bij):
    model = get_model("mamba", bij, seeds=[0], **TINY["mamba"])
    with pytest.raises(ValueError, match="scan must be one of"):
        model.set_scan("fast")
    model.set_scan("sequential")
    assert model.cfg.scan == "sequential" and all(b.ssm.cfg.scan == "sequential" for b in model.blocks)
