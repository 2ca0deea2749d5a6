"""DeltaNet (models/deltanet.py; Yang et al. 2024, arXiv 2406.06484): the chunkwise (WY) delta
rule equals its recurrence (float64, outputs and gradients, awkward shapes, with and without the
gate Gated DeltaNet adds), the delta rule's retrieval property, the layer's forward against its
recurrent_step, its initialisation through the leaderboard's build, and its settings' rules."""

from __future__ import annotations

import pytest
import torch
from recurrent_checks import TASK, check_capacity_matched, check_forward_equals_recurrent, leaderboard_model, mixers_of

from bayesbench.checks import SettingError
from bayesbench.models import count_params
from bayesbench.models.deltanet import delta_rule_chunked, delta_rule_ref, delta_rule_step
from bayesbench.models.gated_recurrence import l2_normalise

SHAPES = [(1, 1, 1, 1, 4), (1, 2, 7, 1, 4), (3, 2, 10, 2, 4), (2, 1, 9, 2, 16), (2, 2, 6, 3, 1)]
KERNEL_CASES = [((1,), 1, 4), ((2, 3), 7, 4), ((2, 1), 16, 16), ((1, 2), 10, 3), ((2, 2), 9, 1), ((2,), 5, 64)]


@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("lead,L,chunk", KERNEL_CASES)
def test_chunkwise_delta_rule_equals_the_recurrence(lead, L, chunk, gated):
    g = torch.Generator().manual_seed(L + chunk)
    q = torch.randn(*lead, L, 4, generator=g, dtype=torch.float64)
    k = l2_normalise(torch.randn(*lead, L, 4, generator=g, dtype=torch.float64))
    v = torch.randn(*lead, L, 3, generator=g, dtype=torch.float64)
    beta = torch.rand(*lead, L, generator=g, dtype=torch.float64)
    log_decay = -torch.rand(*lead, L, generator=g, dtype=torch.float64) if gated else None
    inputs = [t.requires_grad_() for t in (q, k, v, beta) + ((log_decay,) if gated else ())]

    def run(fn, *args):
        return fn(*inputs[:4], inputs[4] if gated else None, *args)

    fast, ref = run(delta_rule_chunked, chunk), run(delta_rule_ref)
    torch.testing.assert_close(fast, ref, rtol=1e-10, atol=1e-12)
    R = torch.randn(ref.shape, generator=g, dtype=torch.float64)
    for a, b in zip(*(torch.autograd.grad((out * R).sum(), inputs, allow_unused=True, materialize_grads=True)
                      for out in (fast, ref))):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)


def test_the_delta_rule_replaces_a_key_value_where_linear_attention_adds():
    """With beta = 1 and a unit key, writing (k, v1) then (k, v2) leaves k -> v2 in the state (the
    content-based retrieval the bijection's elimination needs); a plain sum would give v1 + v2."""
    k = torch.tensor([0.6, 0.8], dtype=torch.float64)
    v1, v2 = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), torch.tensor([-1.0, 0.5, 4.0], dtype=torch.float64)
    one = torch.tensor(1.0, dtype=torch.float64)
    _, state = delta_rule_step(k, k, v1, one, None, None)
    out, state = delta_rule_step(k, k, v2, one, None, state)
    torch.testing.assert_close(out, v2)
    other = torch.tensor([-0.8, 0.6], dtype=torch.float64)  # orthogonal: untouched, recalls nothing
    out, _ = delta_rule_step(other, other, torch.zeros(3, dtype=torch.float64), torch.tensor(0.0), None, state)
    torch.testing.assert_close(out, torch.zeros(3, dtype=torch.float64), atol=1e-12, rtol=0)


@pytest.mark.parametrize("E,B,L,H,chunk", SHAPES)
def test_chunked_forward_equals_the_recurrent_reference(E, B, L, H, chunk):
    d = 2 * H
    for mixer in mixers_of("deltanet", list(range(E)), n_layer=2, n_head=H, d_model=d, d_ffn=8, d_conv=3, chunk=chunk):
        state = check_forward_equals_recurrent(mixer, d, E, B, L, seed=L)
        assert state["S"].shape == (E, B, H, 2, 2) and state["conv"].shape == (E, B, 2, 3 * d)


def test_initialisation_survives_the_leaderboard_build():
    """beta = sigmoid(x W_beta) starts near 1/2 (no bias), the output RMSNorm as the identity
    affine, the short conv at torch's Conv1d default, and members differ."""
    model, _ = leaderboard_model("deltanet", seeds=(0, 1))  # the trainer's model, as the leaderboard builds it
    x = torch.randn(2, 3, 5, model.cfg.d_model, generator=torch.Generator().manual_seed(0))
    for block in model.blocks:
        m = block.mixer
        assert m.b_proj.bias is None
        beta = torch.sigmoid(m.b_proj(x))
        bound = 5 * 0.02 * m.cfg.d_model ** 0.5 / 4  # logits N(0, 0.02^2 d) at unit inputs, sigmoid' <= 1/4
        assert (beta - 0.5).abs().max() < bound
        assert torch.equal(m.o_norm.weight, torch.ones_like(m.o_norm.weight))
        assert m.conv.weight.abs().max() <= m.cfg.d_conv ** -0.5
        assert not torch.equal(m.qkv.weight[0], m.qkv.weight[1])


def test_capacity_matched_to_the_transformer():
    check_capacity_matched("deltanet")


@pytest.mark.parametrize("cfg,fields,match", [
    (dict(n_head=5, d_model=12), ("d_model", "n_head"), r"d_model \(12\) must be divisible by n_head \(5\)"),
    (dict(chunk=0), ("chunk",), "chunk must be a positive integer"),
    (dict(d_conv=0), ("d_conv",), "d_conv must be a positive integer"),
])
def test_bad_settings_are_refused_naming_them(cfg, fields, match):
    with pytest.raises(SettingError, match=match) as err:
        count_params("deltanet", TASK, **cfg)
    assert set(fields) <= set(err.value.fields)
