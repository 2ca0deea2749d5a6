"""The fused LSTM/GRU layers (torch.autograd.Function with a hand-written backward-through-time,
models/lstm.py LSTMScan and models/gru.py GRUScan) against the autograd reference loop
(`forward_reference`) and torch.nn.LSTM/GRU: outputs and every gradient, at awkward sizes,
in float32 and float64; gradcheck; ensemble members stay independent."""

from __future__ import annotations

import itertools

import pytest
import torch

from bayesbench.models import TaskShape, get_model
from bayesbench.models.gru import GRULayer, GRUScan
from bayesbench.models.lstm import LSTMLayer, LSTMScan
from bayesbench.tasks import get_task

LAYERS = {"lstm": LSTMLayer, "gru": GRULayer}
TOL = {torch.float32: 1e-5, torch.float64: 1e-12}  # relative to the largest |reference| entry (see assert_close_rel)
SIZES = list(itertools.product((1, 2, 17), (1, 3), (1, 5), (1, 7, 33)))  # (L, E, B, h): all combinations


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny tensors gain nothing from intra-op threads, and on a busy 2-core machine the reference
    loop's thread hand-offs made this file ~10x slower; restore the setting afterwards."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def make_layer(name: str, E: int, d_in: int, h: int, dtype: torch.dtype, seed: int = 0):
    """A layer with per-member init plus non-trivial biases (every bias path matters)."""
    layer = LAYERS[name](E, d_in, h)
    g = torch.Generator().manual_seed(seed)
    for e in range(E):
        layer.reset_member(e, g)
    with torch.no_grad():
        layer.bias.copy_(torch.randn(layer.bias.shape, generator=g))
        layer.w_hh.mul_(1.5)  # a little beyond orthogonal: saturated and unsaturated gates both occur
        if name == "gru":
            layer.bias_hn.copy_(torch.randn(layer.bias_hn.shape, generator=g))
    return layer.to(dtype)


def run(layer, x, weights, fused: bool):
    """Output and gradients (input first, then every parameter) of sum(layer(x) * weights)."""
    layer.fused = fused
    out = layer(x)
    grads = torch.autograd.grad((out * weights).sum(), [x] + list(layer.parameters()))
    return out.detach(), grads


def assert_close_rel(actual, expected, tol, msg=""):
    """|actual - expected| <= tol (|expected| + max(max|expected|, 0.01)): relative to the tensor's
    scale, floored at 0.01 because the fused tanh (2 sigmoid(2x) - 1) is accurate to ~1 ulp of 1
    in absolute terms, so the tiny gradients of saturated gates agree absolutely, not relatively."""
    scale = expected.abs().max().item() if expected.numel() else 0.0
    torch.testing.assert_close(actual, expected, rtol=tol, atol=tol * max(scale, 0.01), msg=msg)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_fused_layer_matches_reference(name, dtype):
    for L, E, B, h in SIZES:
        d_in = 6
        layer = make_layer(name, E, d_in, h, dtype, seed=L * 100 + E * 10 + B + h)
        g = torch.Generator().manual_seed(h)
        x = (2 * torch.randn(E, B, L, d_in, generator=g, dtype=torch.float64)).to(dtype).requires_grad_()
        weights = torch.randn(E, B, L, h, generator=g, dtype=torch.float64).to(dtype)
        out_f, grads_f = run(layer, x, weights, fused=True)
        out_r, grads_r = run(layer, x, weights, fused=False)
        where = f"{name} L={L} E={E} B={B} h={h}"
        assert out_f.shape == (E, B, L, h)
        assert_close_rel(out_f, out_r, TOL[dtype], msg=f"output, {where}")
        names = ["input"] + [k for k, _ in layer.named_parameters()]
        for k, a, b in zip(names, grads_f, grads_r):
            assert_close_rel(a, b, TOL[dtype], msg=f"grad of {k}, {where}")


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_fused_model_matches_reference_all_parameters(name):
    """Whole model (embedding, two layers, LayerNorm, head): logits and every parameter's gradient."""
    shape = TaskShape.from_task(get_task("bijection", V=8))
    tokens = torch.randint(0, shape.vocab_size, (3, 5, 16), generator=torch.Generator().manual_seed(0))
    weights = torch.randn(3, 5, 16, shape.num_classes, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    results = {}
    for fused in (True, False):
        model = get_model(name, shape, seeds=[0, 1, 2], n_layer=2, d_model=13, d_embed=9).double()
        with torch.no_grad():
            for layer in model.layers:
                layer.bias.normal_(generator=torch.Generator().manual_seed(2))
        model.set_fused(fused)
        assert all(layer.fused == fused for layer in model.layers)
        logits = model(tokens)
        (logits * weights).sum().backward()
        results[fused] = (logits.detach(), {k: p.grad for k, p in model.named_parameters()})
    (lf, gf), (lr, gr) = results[True], results[False]
    assert_close_rel(lf, lr, 1e-12)
    assert set(gf) == set(gr) and {"embed.tok.weight", "embed.pos.weight", "layers.0.w_ih", "layers.1.w_hh"} <= set(gf)
    for k in gr:
        assert gr[k].abs().max() > 0, k
        assert_close_rel(gf[k], gr[k], 1e-12, msg=f"grad of {k}")


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_gradcheck(name):
    E, B, L, d, h = 2, 2, 3, 3, 2
    layer = make_layer(name, E, d, h, torch.float64)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(E, B, L, d, generator=g, dtype=torch.float64)
    if name == "lstm":
        fn, params = LSTMScan.apply, (layer.w_ih, layer.bias, layer.w_hh)
    else:
        fn, params = GRUScan.apply, (layer.w_ih, layer.bias, layer.w_hh, layer.bias_hn)
    inputs = tuple(t.detach().clone().requires_grad_() for t in (x, *params))
    assert torch.autograd.gradcheck(fn, inputs)


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_fused_matches_torch_nn_with_gradients(name):
    """Each member of a fused layer equals torch.nn.LSTM/GRU with copied weights, gradients included."""
    E, B, L, d, h = 2, 3, 9, 5, 7
    layer = make_layer(name, E, d, h, torch.float64, seed=3)
    x = torch.randn(E, B, L, d, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    weights = torch.randn(E, B, L, h, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    out = layer(x)
    (out * weights).sum().backward()
    for e in range(E):
        ref = layer.member_as_torch(e)
        assert type(ref) is (torch.nn.LSTM if name == "lstm" else torch.nn.GRU)
        assert ref.weight_ih_l0.dtype == torch.float64
        ref_out = ref(x[e])[0]
        torch.testing.assert_close(out[e], ref_out, atol=1e-12, rtol=1e-12)
        (ref_out * weights[e]).sum().backward()
        torch.testing.assert_close(layer.w_ih.grad[e], ref.weight_ih_l0.grad.T, atol=1e-11, rtol=1e-11)
        torch.testing.assert_close(layer.w_hh.grad[e], ref.weight_hh_l0.grad.T, atol=1e-11, rtol=1e-11)
        torch.testing.assert_close(layer.bias.grad[e], ref.bias_ih_l0.grad, atol=1e-11, rtol=1e-11)
        if name == "gru":
            torch.testing.assert_close(layer.bias_hn.grad[e], ref.bias_hh_l0.grad[2 * h:], atol=1e-11, rtol=1e-11)


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_members_independent(name):
    """Member e's output and gradients depend only on member e's parameters and inputs."""
    E, B, L, d, h = 3, 4, 6, 5, 8
    layer = make_layer(name, E, d, h, torch.float64)
    x = torch.randn(E, B, L, d, generator=torch.Generator().manual_seed(0), dtype=torch.float64, requires_grad=True)
    out = layer(x)
    grads = torch.autograd.grad(out[0].sum(), [x] + list(layer.parameters()))
    for gr in grads:  # a loss on member 0 only reaches member 0's slices
        assert gr[0].abs().max() > 0 and torch.equal(gr[1:], torch.zeros_like(gr[1:]))
    with torch.no_grad():  # changing members 1.. (parameters and inputs) leaves member 0 bit-identical
        for p in layer.parameters():
            p[1:].mul_(-0.7).add_(0.3)
        x2 = x.detach().clone()
        x2[1:] = x2[1:].flip(1)
        assert torch.equal(layer(x2)[0], out[0].detach())


def test_fused_is_default_and_parameters_unchanged():
    shape = TaskShape.from_task(get_task("bijection", V=8))
    lstm = get_model("lstm", shape, seeds=[0], n_layer=2, d_model=12, d_embed=10)
    gru = get_model("gru", shape, seeds=[0], n_layer=2, d_model=12, d_embed=10)
    assert all(layer.fused for layer in [*lstm.layers, *gru.layers])
    assert {k for k, _ in lstm.layers[0].named_parameters()} == {"w_ih", "bias", "w_hh"}
    assert {k for k, _ in gru.layers[0].named_parameters()} == {"w_ih", "bias", "w_hh", "bias_hn"}
    assert lstm.layers[0].w_hh.shape == (1, 12, 48) and gru.layers[1].w_ih.shape == (1, 12, 36)
    tokens = torch.randint(0, shape.vocab_size, (1, 2, 16), generator=torch.Generator().manual_seed(0))
    for model in (lstm, gru):  # no-grad evaluation goes through the same Function
        with torch.no_grad():
            fast = model(tokens)
            model.set_fused(False)
            ref = model(tokens)
        torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-5)
