"""Ensemble layers, the transformer and the MLP baselines: shapes, causality, per-member
initialisation, attention backends, parameter counts and capacity matching."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bayesbench.models import (
    EnsembleEmbedding,
    EnsembleLayerNorm,
    EnsembleLinear,
    TaskShape,
    build_model,
    count_params,
    get_model,
    list_models,
    match_mlp,
    mlp_param_count,
)
from bayesbench.models.mlp import MLPConfig
from bayesbench.models.registry import homes, model_options
from bayesbench.tasks import get_task

TINY = {
    "transformer": dict(n_layer=2, n_head=2, d_model=16, d_ffn=24),
    "mlp": dict(depth=3, width=20),
    "mlp-prefix": dict(depth=3, width=20, prefix_dim=6),
    "transformer-no-late-attention": dict(n_layer=3, n_head=2, d_model=16, d_ffn=24, attn_off_top=1),
}
# Every architecture the package's model files register is tested here (a new model file with no
# edit): at its TINY config, else capacity-matched to SMALL_COUNT parameters (`match_params`, the
# way presets size every architecture they name no config for), else at its builder's defaults.
ARCHS = sorted(homes())
SMALL_COUNT = 20_000


def tiny(arch: str) -> dict:
    if arch in TINY:
        return TINY[arch]
    return {"match_params": SMALL_COUNT} if "match_params" in model_options(arch) else {}


@pytest.fixture(scope="module")
def bij():
    return get_task("bijection", V=6)


@pytest.fixture(scope="module")
def hmm():
    return get_task("hmm", K=7)


def _tokens(task, E, B, seed=0, L=None):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, task.vocab_size, (E, B, L or task.seq_len), generator=g)


# ---------------------------------------------------------------- layers

def test_ensemble_linear_is_a_per_member_affine_map():
    lin = EnsembleLinear(3, 5, 7)
    for e in range(3):
        lin.reset_member(e, torch.Generator().manual_seed(e))
        with torch.no_grad():
            lin.bias[e].normal_()
    x = torch.randn(3, 2, 4, 5)
    y = lin(x)
    for e in range(3):
        torch.testing.assert_close(y[e], x[e] @ lin.weight[e] + lin.bias[e])
    assert EnsembleLinear(2, 5, 7, bias=False)(torch.randn(2, 3, 5)).shape == (2, 3, 7)


def test_ensemble_embedding_and_layernorm_per_member():
    emb = EnsembleEmbedding(2, 10, 4)
    for e in range(2):
        emb.reset_member(e, torch.Generator().manual_seed(10 + e))
    ids = torch.randint(0, 10, (2, 3, 5))
    out = emb(ids)
    for e in range(2):
        torch.testing.assert_close(out[e], emb.weight[e][ids[e]])
    ln = EnsembleLayerNorm(2, 4)
    with torch.no_grad():
        ln.weight.normal_()
        ln.bias.normal_()
    x = torch.randn(2, 3, 5, 4)
    y = ln(x)
    for e in range(2):
        torch.testing.assert_close(y[e], F.layer_norm(x[e], (4,), ln.weight[e], ln.bias[e]))


# ---------------------------------------------------------------- models

@pytest.mark.parametrize("arch", ARCHS)
def test_shapes_and_finite(arch, bij, hmm):
    model = get_model(arch, bij, seeds=[0, 1], **tiny(arch))
    out = model(_tokens(bij, 2, 3))
    assert out.shape == (2, 3, bij.seq_len, bij.num_classes)
    assert torch.isfinite(out).all()
    assert model(_tokens(bij, 2, 3, L=4)).shape == (2, 3, 4, bij.num_classes)  # shorter sequences work
    model = get_model(arch, hmm, seeds=[0, 1, 2], **tiny(arch))
    batch = hmm.sample(4, torch.Generator().manual_seed(0))
    tokens = batch.tokens.expand(3, -1, -1)
    header = batch.header.expand(3, -1, -1, -1)
    assert model(tokens, header).shape == (3, 4, hmm.seq_len, hmm.num_classes)
    with pytest.raises(ValueError, match="header"):
        model(tokens)


@pytest.mark.parametrize("arch", ARCHS)
def test_causal(arch, bij):
    """The output at position t does not depend on tokens after t."""
    model = get_model(arch, bij, seeds=[0, 1], **tiny(arch))
    base = _tokens(bij, 2, 4)
    ref = model(base)
    for t in (0, 5, bij.seq_len - 2):
        changed = base.clone()
        changed[:, :, t + 1:] = _tokens(bij, 2, 4, seed=t + 1)[:, :, t + 1:]
        out = model(changed)
        torch.testing.assert_close(out[:, :, : t + 1], ref[:, :, : t + 1], rtol=0, atol=1e-5)
        assert not torch.allclose(out[:, :, t + 1:], ref[:, :, t + 1:])  # ... and the later outputs do


@pytest.mark.parametrize("arch", ARCHS)
def test_member_equals_solo_model(arch, hmm):
    """Member e of an ensemble built with seeds [..] is a solo model built with seed s_e."""
    ens = get_model(arch, hmm, seeds=[3, 5, 7], **tiny(arch))
    solo = get_model(arch, hmm, seeds=[5], **tiny(arch))
    member = ens.member_state(1)
    for k, v in solo.state_dict().items():
        assert torch.equal(member[k], v), k
    batch = hmm.sample(4, torch.Generator().manual_seed(1))
    out = ens(batch.tokens.expand(3, -1, -1), batch.header.expand(3, -1, -1, -1))
    torch.testing.assert_close(out[1:2], solo(batch.tokens[None], batch.header[None]), rtol=1e-5, atol=1e-6)
    other = get_model(arch, hmm, seeds=[4], **tiny(arch))
    assert not torch.equal(other.state_dict()[next(iter(member))], member[next(iter(member))])


def test_members_are_independent(bij):
    """Member 0's gradients depend only on member 0's inputs."""
    model = get_model("transformer", bij, seeds=[0, 1], **TINY["transformer"])
    tokens = _tokens(bij, 2, 3)
    model(tokens)[0].sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    assert all(g[1].abs().max() == 0 for g in grads)


def test_attention_backends_agree(bij):
    model = get_model("transformer", bij, seeds=[0, 1], **TINY["transformer"])
    tokens = _tokens(bij, 2, 3)
    ref = model(tokens)
    model.set_attention("eager")
    torch.testing.assert_close(model(tokens), ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="backend"):
        model.set_attention("flash")
    with pytest.raises(ValueError, match="attention"):
        get_model("transformer", bij, attention="nope", **TINY["transformer"])


def test_triton_backend_is_lazy_and_clear(bij):
    model = get_model("transformer", bij, seeds=[0], attention="triton", **TINY["transformer"])
    tokens = _tokens(bij, 1, 2)
    try:
        from bayesbench.kernels import triton_available
    except ImportError:
        triton_available = lambda: False  # noqa: E731
    if not triton_available():
        with pytest.raises(RuntimeError, match="triton"):
            model(tokens)
        return
    out = model(tokens)
    model.set_attention("sdpa")
    torch.testing.assert_close(out, model(tokens), rtol=1e-4, atol=1e-4)


def test_triton_backend_trains_like_sdpa_and_fills_the_probe(bij):
    """Logits and every parameter gradient of the Triton path equal SDPA's; the probe attached
    to layer 1 holds that layer's routing quantities after backward (E folded into the batch)."""
    pytest.importorskip("triton")
    from bayesbench.kernels import AttentionProbe, triton_available

    if not triton_available():
        pytest.skip("triton present but neither CUDA nor TRITON_INTERPRET=1")
    tokens = _tokens(bij, 2, 3, seed=4)
    grads = {}
    for backend in ("sdpa", "triton"):
        model = get_model("transformer", bij, seeds=[0, 1], attention=backend, **TINY["transformer"])
        if backend == "triton":
            probe = AttentionProbe(mode="full")
            model.set_probe(probe, 1)
        logits = model(tokens)
        (logits.float().pow(2).mean()).backward()
        grads[backend] = (logits.detach(), [p.grad.clone() for p in model.parameters()])
    torch.testing.assert_close(grads["triton"][0], grads["sdpa"][0], rtol=1e-4, atol=1e-5)
    for g_t, g_s in zip(grads["triton"][1], grads["sdpa"][1]):
        torch.testing.assert_close(g_t, g_s, rtol=1e-3, atol=1e-6)
    E, B, H, T = 2, 3, TINY["transformer"]["n_head"], bij.seq_len
    assert probe.ds.shape == (E * B, H, T, T)
    assert (probe.ds.triu(1) == 0).all() and probe.ds.abs().sum() > 0
    # The CPU probe paths (reference backward, eager autograd hooks) record the same fields.
    for backend in ("reference", "eager"):
        model = get_model("transformer", bij, seeds=[0, 1], attention=backend, **TINY["transformer"])
        other = AttentionProbe(mode="full")
        model.set_probe(other, 1)
        model(tokens).float().pow(2).mean().backward()
        for name in other.field_names():
            torch.testing.assert_close(getattr(other, name), getattr(probe, name), rtol=1e-3, atol=1e-6,
                                       msg=f"{backend} {name}")


def test_no_late_attention_ablation(bij):
    cfg = dict(TINY["transformer"], n_layer=3)
    full = count_params("transformer", bij, **cfg)
    ablated = get_model("transformer-no-late-attention", bij, seeds=[0], **cfg)
    attn_params = sum(p.numel() for p in ablated.blocks[0].attn.parameters()) + \
        sum(p.numel() for p in ablated.blocks[0].ln_1.parameters())
    assert ablated.num_params() == full - 2 * attn_params  # top 2 of 3 blocks lose attention
    assert ablated.blocks[0].attn is not None and ablated.blocks[1].attn is None and ablated.blocks[2].attn is None
    # with attention off everywhere, position t sees only its own token (and position)
    none = get_model("transformer", bij, seeds=[0], attn_off_top=3, **cfg)
    tokens = _tokens(bij, 1, 2)
    changed = tokens.clone()
    changed[..., :5] = (changed[..., :5] + 1) % bij.vocab_size
    torch.testing.assert_close(none(changed)[..., 5:, :], none(tokens)[..., 5:, :])
    with pytest.raises(ValueError, match=r"attn_off_top must be an integer in \[0, n_layer=3\]"):
        get_model("transformer", bij, attn_off_top=4, **cfg)
    with pytest.raises(ValueError, match="layer 2 has no attention"):
        ablated.set_probe(object(), 2)


# ---------------------------------------------------------------- parameter counts

def test_paper_parameter_counts():
    """Per member, every tensor once; V = 20 bijection (vocab 40, 40 positions, 20 classes);
    HMM rows encoding (vocab 15, header width 5, 5 classes) with positions for K = 50 (60)."""
    bij = get_task("bijection", V=20)
    model = build_model("transformer", bij, size="paper-bijection")
    assert model.param_breakdown() == {"embed": 15_360, "blocks": 2_669_184, "ln_f": 384, "head": 3_860}
    assert model.num_params() == 2_688_788 == count_params("transformer", bij, size="paper-bijection")
    hmm = get_task("hmm", K=20)
    with torch.device("meta"):
        m = build_model("transformer", hmm, size="paper-hmm", max_len=60)
    assert m.param_breakdown() == {"embed": 20_480, "blocks": 7_107_840, "ln_f": 512, "head": 1_285}
    assert m.num_params() == 7_130_117


@pytest.mark.parametrize("prefix", [False, True])
def test_mlp_count_formula_and_matching(prefix):
    shape = TaskShape.from_task(get_task("bijection", V=20))
    target = count_params("transformer", shape, size="paper-bijection")
    cfg = match_mlp(shape, target, prefix=prefix)
    n = mlp_param_count(shape, cfg)
    assert abs(n - target) / target <= 0.01
    name = "mlp-prefix" if prefix else "mlp"
    with torch.device("meta"):
        assert build_model(name, shape, depth=cfg.depth, width=cfg.width).num_params() == n
        assert build_model(name, shape, match_params=target).num_params() == n
    if not prefix:
        assert cfg == MLPConfig(depth=18, width=384)  # the paper's 18-20 layers, width 384-400
    small = match_mlp(shape, 100_000, depths=(4,), prefix=prefix)  # quick-size targets leave the paper ranges
    assert small.depth == 4 and abs(mlp_param_count(shape, small) - 100_000) <= 1000


def test_registry_errors(bij):
    assert {"transformer", "mlp", "mlp-prefix"} <= set(list_models())
    with pytest.raises(ValueError, match="unknown model"):
        get_model("nope", bij)
    with pytest.raises(ValueError, match="bad configuration"):
        get_model("transformer", bij, n_layers=2)
    with pytest.raises(ValueError, match="seeds"):
        get_model("mlp", bij, ensemble=3, seeds=[0, 1])
    with pytest.raises(ValueError, match="divisible"):
        get_model("transformer", bij, n_head=3, d_model=16)
    with pytest.raises(ValueError, match="max_len"):
        get_model("mlp", bij, **TINY["mlp"])(_tokens(bij, 1, 2, L=bij.seq_len + 1))
    with pytest.raises(ValueError, match="tokens"):
        get_model("mlp", bij, seeds=[0, 1], **TINY["mlp"])(_tokens(bij, 1, 2))


def test_inputs_outside_the_vocabulary_or_header_shape_are_refused(bij, hmm):
    model = get_model("transformer", bij, seeds=[0, 1], **TINY["transformer"])
    tokens = _tokens(bij, 2, 3)
    tokens[0, 0, 0] = bij.vocab_size  # unchecked, member 0 would read a row of member 1's table
    with pytest.raises(ValueError, match=rf"tokens must lie in \[0, {bij.vocab_size - 1}\]"):
        model(tokens)
    with pytest.raises(ValueError, match="built for a task without a continuous header"):
        model(_tokens(bij, 2, 3), torch.zeros(2, 3, 10, 5))
    h_model = get_model("transformer", hmm, seeds=[0], **TINY["transformer"])
    with pytest.raises(ValueError, match=r"header must have shape \[E, B, H=10, D=5\]"):
        h_model(_tokens(hmm, 1, 2), torch.zeros(1, 2, 9, 5))


def test_triton_backend_refuses_dropout_and_probes_need_it(bij):
    with pytest.raises(ValueError, match="attention='triton' has no attention dropout"):
        get_model("transformer", bij, attention="triton", dropout=0.1, **TINY["transformer"])
    model = get_model("transformer", bij, seeds=[0], dropout=0.1, **TINY["transformer"])
    with pytest.raises(ValueError, match="has no attention dropout"):
        model.set_attention("triton")
    with pytest.raises(ValueError, match=r"probes are filled by the \('eager', 'triton', 'reference'\)"):
        model.set_probe(object(), 0)
    model.set_attention("eager")
    with pytest.raises(ValueError, match="probes need dropout=0"):
        model.set_probe(object(), 0)
    plain = get_model("transformer", bij, seeds=[0], attention="triton", **TINY["transformer"])
    plain.set_probe(object(), 1)
    with pytest.raises(ValueError, match="layer 1 would use 'sdpa'"):  # the probe would silently stay empty
        plain.set_attention("sdpa")
    assert plain.blocks[1].attn.backend == "triton"
    plain.set_probe(None, 1)
    plain.set_attention("sdpa")
    assert plain.blocks[1].attn.probe is None and plain.blocks[0].attn.backend == "sdpa"
