"""RetNet (models/retnet.py; Sun et al. 2023, arXiv 2307.08621): the chunkwise forward equals the
recurrent form (float64, outputs and gradients, awkward shapes), the fixed multi-scale decays and
the GroupNorm survive the leaderboard's build, its capacity match, and its settings' rules."""

from __future__ import annotations

import pytest
import torch
from recurrent_checks import TASK, check_capacity_matched, check_forward_equals_recurrent, leaderboard_model, mixers_of

from bayesbench.checks import SettingError
from bayesbench.models import count_params
from bayesbench.models.retnet import retention_decays

SHAPES = [(1, 1, 1, 1, 4), (1, 2, 7, 1, 4), (3, 2, 10, 2, 4), (2, 1, 9, 2, 16), (2, 2, 6, 3, 1)]


@pytest.mark.parametrize("E,B,L,H,chunk", SHAPES)
def test_chunkwise_forward_equals_the_recurrent_form(E, B, L, H, chunk):
    d = 2 * H
    for mixer in mixers_of("retnet", list(range(E)), n_layer=2, n_head=H, d_model=d, d_ffn=8, chunk=chunk):
        state = check_forward_equals_recurrent(mixer, d, E, B, L, seed=L)
        assert set(state) == {"S"} and state["S"].shape == (E, B, H, d // H, 2 * d // H)


def test_decays_and_group_norm_survive_the_leaderboard_build():
    """gamma_h = 1 - 2^(-5 - h) (Sec. 2.2), not parameters (no optimiser or init touches them); the
    GroupNorm starts as the identity affine."""
    model, _ = leaderboard_model("retnet", seeds=(0, 1))  # the trainer's model, as the leaderboard builds it
    H = model.cfg.n_head
    expected = torch.tensor([1 - 2.0 ** (-5 - h) for h in range(H)], dtype=torch.float64)
    torch.testing.assert_close(retention_decays(H), expected, rtol=0, atol=0)
    assert not any("decay" in name or "gamma" in name for name, _ in model.named_parameters())
    for block in model.blocks:
        x = torch.zeros(1, model.cfg.d_model)
        torch.testing.assert_close(torch.exp(block.mixer.log_decay(x)).squeeze(-1).double(), expected,
                                   rtol=0, atol=1e-7)
        assert torch.equal(block.mixer.norm.weight, torch.ones_like(block.mixer.norm.weight))
        assert torch.equal(block.mixer.norm.bias, torch.zeros_like(block.mixer.norm.bias))


def test_capacity_matched_to_the_transformer():
    check_capacity_matched("retnet")


@pytest.mark.parametrize("cfg,fields,match", [
    (dict(n_head=5, d_model=12), ("d_model", "n_head"), r"d_model \(12\) must be divisible by n_head \(5\)"),
    (dict(chunk=0), ("chunk",), "chunk must be a positive integer"),
    (dict(chunk=-2), ("chunk",), "chunk must be a positive integer"),
])
def test_bad_settings_are_refused_naming_them(cfg, fields, match):
    with pytest.raises(SettingError, match=match) as err:
        count_params("retnet", TASK, **cfg)
    assert set(fields) <= set(err.value.fields)
