"""The hybrid (models/hybrid.py): its layers' kinds by the ratio, every mixer against its recurrent
reference (float64, gradients) at awkward shapes for both recurrent mixers, the state (the
attention layers' caches plus the mixers' states), the leaderboard's build, matching, settings."""

from __future__ import annotations

import pytest
import torch
from recurrent_checks import check_awkward_shapes, leaderboard_model

from bayesbench.checks import SettingError
from bayesbench.models import TaskShape, count_params, get_model
from bayesbench.models.state import state_floats
from bayesbench.tasks import get_task

BASE = dict(n_layer=4, d_model=8, d_ffn=12)


@pytest.mark.parametrize("mixer", ["mamba", "linear-attention"])
def test_forward_equals_the_recurrent_reference_at_awkward_shapes(mixer):
    check_awkward_shapes("hybrid", {**BASE, "mixer": mixer, "attn_every": 3})


@pytest.mark.parametrize("attn_every,kinds", [(2, "MTMT"), (3, "MMTM"), (4, "MMMT")])
def test_one_attention_layer_every_k(attn_every, kinds):
    model = get_model("hybrid", get_task("bijection", V=6), seeds=[0], n_head=2, attn_every=attn_every, **BASE)
    assert "".join("T" if type(b).__name__ == "Block" and hasattr(b, "mlp") else "M" for b in model.blocks) == kinds


@pytest.mark.parametrize("mixer", ["mamba", "linear-attention"])
def test_state_is_the_attention_caches_plus_the_mixers_states(mixer):
    task = get_task("bijection", V=6)
    H, d = 2, BASE["d_model"]
    model = get_model("hybrid", task, seeds=[0], n_head=H, attn_every=2, mixer=mixer, **BASE)
    fixed = (2 * d * (4 - 1) + 2 * d * 16) if mixer == "mamba" else H * ((d // H) ** 2 + d // H)
    for L in (1, 6):
        assert state_floats(model, L) == 2 * (2 * L * d) + 2 * fixed


def test_init_survives_the_leaderboard_build_path():
    model, _ = leaderboard_model("hybrid")
    mamba = model.blocks[0]
    N = mamba.ssm.cfg.d_state
    assert torch.equal(mamba.ssm.A_log[1], torch.log(torch.arange(1, N + 1.0)).expand_as(mamba.ssm.A_log[1]))
    assert torch.equal(mamba.ssm.D, torch.ones_like(mamba.ssm.D))
    attn = model.blocks[1]
    assert abs(float(attn.attn.qkv.weight.std()) - 0.02) < 0.004


def test_capacity_matched_to_the_transformer():
    shape = TaskShape.from_task(get_task("bijection", V=8))
    target = count_params("transformer", shape, n_layer=2, n_head=2, d_model=64, d_ffn=128)
    for mixer in ("mamba", "linear-attention"):
        got = count_params("hybrid", shape, match_params=target, mixer=mixer)
        assert abs(got - target) / target <= 0.01


@pytest.mark.parametrize("cfg,named", [(dict(attn_every=1), "attn_every"), (dict(attn_every=5), "attn_every"),
                                       (dict(attn_every=True), "attn_every"), (dict(mixer="lstm"), "mixer"),
                                       (dict(d_model=10, n_head=4), "d_model")])
def test_bad_settings_are_refused_naming_them(cfg, named):
    with pytest.raises(SettingError, match=f"^{named}\\b") as err:
        count_params("hybrid", get_task("bijection", V=6), **cfg)
    assert named in err.value.fields
    with pytest.raises(SettingError, match="^attn_every must be"):  # through the matching path too
        count_params("hybrid", get_task("bijection", V=6), match_params=20_000, attn_every=9)
