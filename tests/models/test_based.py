"""Based (models/based.py): the Taylor kernel computed from q.k against the recurrent reference in
feature space, and its sliding-window layers against their KV window (float64, gradients) at
awkward shapes; the state; the leaderboard's build; matching; settings."""

from __future__ import annotations

import math

import pytest
import torch
from recurrent_checks import check_awkward_shapes, leaderboard_model

from bayesbench.checks import SettingError
from bayesbench.models import TaskShape, count_params, get_model
from bayesbench.models.based import taylor_features
from bayesbench.models.state import state_floats
from bayesbench.tasks import get_task

BASE = dict(n_layer=3, d_model=8, d_ffn=12, feature_dim=3)


@pytest.mark.parametrize("window", [1, 2, 5])
def test_forward_equals_the_recurrent_reference_at_awkward_shapes(window):
    check_awkward_shapes("based", {**BASE, "window": window})


def test_taylor_features_give_the_second_order_expansion_of_exp():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(5, 4, generator=g, dtype=torch.float64), torch.randn(5, 4, generator=g, dtype=torch.float64)
    s = (q * k).sum(-1) / math.sqrt(4)
    torch.testing.assert_close((taylor_features(q) * taylor_features(k)).sum(-1), 1 + s + s * s / 2)
    assert taylor_features(q).shape[-1] == 1 + 4 + 16


def test_state_is_the_feature_state_plus_the_window():
    task = get_task("bijection", V=6)
    H, d, Df, W = 2, BASE["d_model"], BASE["feature_dim"], 4
    model = get_model("based", task, seeds=[0], **{**BASE, "n_head": H, "window": W})
    F = 1 + Df + Df * Df
    linear = H * F * (d // H) + H * F  # S and z, per Taylor layer (layers 0 and 2)
    for L in (1, 3, task.seq_len):
        assert state_floats(model, L) == 2 * linear + 2 * min(W - 1, L) * d


def test_init_survives_the_leaderboard_build_path():
    model, _ = leaderboard_model("based")
    assert type(model.blocks[0].attn).__name__ == "TaylorLinearAttention"
    assert type(model.blocks[1].attn).__name__ == "SlidingWindowAttention"
    for block in model.blocks:
        assert abs(float(block.attn.qkv.weight.std() if hasattr(block.attn, "qkv") else block.attn.qk.weight.std())
                   - 0.02) < 0.005
    assert model.cfg.feature_dim == 16 and model.cfg.window == 64  # the paper's sizes


def test_capacity_matched_to_the_transformer():
    shape = TaskShape.from_task(get_task("bijection", V=8))
    target = count_params("transformer", shape, n_layer=2, n_head=2, d_model=64, d_ffn=128)
    assert abs(count_params("based", shape, match_params=target) - target) / target <= 0.01


@pytest.mark.parametrize("cfg,named", [(dict(window=0), "window"), (dict(d_model=10, n_head=4), "d_model"),
                                       (dict(feature_dim=0), "feature_dim"), (dict(eps=0.0), "eps")])
def test_bad_settings_are_refused_naming_them(cfg, named):
    with pytest.raises(SettingError, match=f"^{named}\\b") as err:
        count_params("based", get_task("bijection", V=6), **cfg)
    assert named in err.value.fields
