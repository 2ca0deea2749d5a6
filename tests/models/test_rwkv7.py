"""RWKV-7 (models/rwkv7.py): the fast form against the recurrent reference at awkward shapes
(float64, gradients), the state it carries (H Dh^2 + 2 d per layer, zoology #34), its own
initialisation as the leaderboard builds it, capacity matching and refused settings."""

from __future__ import annotations

import math

import pytest
import torch
from recurrent_checks import check_awkward_shapes, leaderboard_model

from bayesbench.checks import SettingError
from bayesbench.models import TaskShape, count_params, get_model
from bayesbench.models.state import state_floats
from bayesbench.tasks import get_task

BASE = dict(n_layer=2, d_model=8, d_ffn=12)


def test_forward_equals_the_recurrent_reference_at_awkward_shapes():
    check_awkward_shapes("rwkv7", BASE)


@pytest.mark.parametrize("n_head", [1, 2, 4])
def test_state_is_the_heads_matrices_and_two_shifts(n_head):
    task = get_task("bijection", V=6)
    model = get_model("rwkv7", task, seeds=[0, 1], **{**BASE, "n_head": n_head})
    d, L = BASE["d_model"], BASE["n_layer"]
    per_layer = n_head * (d // n_head) ** 2 + 2 * d  # not d^2 per head: that is zoology #34's overcount
    assert state_floats(model, 1) == state_floats(model, task.seq_len) == L * per_layer


def test_init_survives_the_leaderboard_build_path():
    model, job = leaderboard_model("rwkv7")
    d, n_layer = model.cfg.d_model, model.cfg.n_layer
    for i, block in enumerate(model.blocks):
        att = block.att
        r01 = i / max(n_layer - 1, 1)
        n = torch.arange(d) / (d - 1)
        torch.testing.assert_close(att.w0[1], -7 + 5 * n ** (0.85 + r01 ** 0.5) + 0.5)
        assert torch.equal(att.w_o, torch.zeros_like(att.w_o)) and torch.equal(att.w1, torch.zeros_like(att.w1))
        assert torch.equal(att.k_k, torch.full_like(att.k_k, 0.85)) and torch.equal(att.r_k, torch.zeros_like(att.r_k))
        assert att.w_k.abs().max() <= 0.05 / math.sqrt(d) and att.w_r.abs().max() > 0.4 / math.sqrt(d)
        w2 = att.w2[0].double()
        torch.testing.assert_close(w2 @ w2.T, 0.01 * torch.eye(w2.shape[0], dtype=torch.float64), atol=1e-6, rtol=0)
        assert torch.equal(block.ffn.value, torch.zeros_like(block.ffn.value))
    assert not torch.equal(model.blocks[0].att.w_r[0], model.blocks[0].att.w_r[1])  # two seeds, two members
    decay = torch.exp(-torch.exp(torch.tensor(-0.5)))  # the decay's floor, exp(-e^-0.5)
    assert 0.5 < float(decay) < 0.55


def test_capacity_matched_to_the_transformer():
    shape = TaskShape.from_task(get_task("bijection", V=8))
    target = count_params("transformer", shape, n_layer=2, n_head=2, d_model=64, d_ffn=128)
    assert abs(count_params("rwkv7", shape, match_params=target) - target) / target <= 0.01


@pytest.mark.parametrize("cfg,named", [(dict(d_model=10, n_head=3), "d_model"), (dict(n_head=0), "n_head"),
                                       (dict(d_ffn=1.5), "d_ffn")])
def test_bad_settings_are_refused_naming_them(cfg, named):
    with pytest.raises(SettingError, match=f"^{named}\\b") as err:
        count_params("rwkv7", get_task("bijection", V=6), **cfg)
    assert named in err.value.fields


@pytest.mark.parametrize("chunk", [1, 3, 16])
def test_chunked_delta_rule_equals_the_update_looped(chunk):
    """The fast form's chunks against TimeMix.update one position at a time, float64, with gradients,
    at lengths below, at and past a chunk's (decays down to the paper's floor exp(-e^-0.5))."""
    from bayesbench.models.rwkv7 import TimeMix, chunked_delta_rule

    g = torch.Generator().manual_seed(chunk)
    for L in (1, 7, 20):
        shape = (2, 3, 2, L, 4)  # [E, B, H, L, Dh]
        q, k, v = (torch.randn(shape, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
        decay = (0.545 + 0.45 * torch.rand(shape, generator=g, dtype=torch.float64)).requires_grad_()
        kappa = torch.nn.functional.normalize(torch.randn(shape, generator=g, dtype=torch.float64), dim=-1)
        b = (kappa * torch.rand(shape, generator=g, dtype=torch.float64)).requires_grad_()
        fast = chunked_delta_rule(q, decay, kappa, b, k, v, chunk=chunk)
        S = torch.zeros(2, 3, 2, 4, 4, dtype=torch.float64)
        ys = []
        for t in range(L):
            S = TimeMix.update(S, decay[..., t, :], kappa[..., t, :], b[..., t, :], k[..., t, :], v[..., t, :])
            ys.append(torch.einsum("...vk,...k->...v", S, q[..., t, :]))
        ref = torch.stack(ys, -2)
        torch.testing.assert_close(fast, ref, rtol=1e-10, atol=1e-11)
        w = torch.randn(fast.shape, generator=g, dtype=torch.float64)
        for a, r in zip(torch.autograd.grad((fast * w).sum(), [q, decay, b, k, v]),
                        torch.autograd.grad((ref * w).sum(), [q, decay, b, k, v])):
            torch.testing.assert_close(a, r, rtol=1e-9, atol=1e-10)
