"""Sliding-window attention (models/sliding_window.py): the band-masked SDPA against the windowed
KV cache step by step (float64, gradients) at awkward shapes and windows (1, below, at and above
the length), the window's meaning, the state, the leaderboard's build, matching, settings."""

from __future__ import annotations

import pytest
import torch
from recurrent_checks import check_awkward_shapes, leaderboard_model

from bayesbench.checks import SettingError
from bayesbench.models import TaskShape, count_params, get_model
from bayesbench.models.state import state_floats
from bayesbench.tasks import get_task

BASE = dict(n_layer=2, d_model=8, d_ffn=12)


@pytest.mark.parametrize("window", [1, 3, 16, 40])
def test_forward_equals_the_recurrent_reference_at_awkward_shapes(window):
    check_awkward_shapes("sliding-window", {**BASE, "window": window})


def test_a_window_as_long_as_the_sequence_is_the_transformer():
    task = get_task("bijection", V=6)
    sw = get_model("sliding-window", task, seeds=[4], n_head=2, window=task.seq_len, **BASE)
    tf = get_model("transformer", task, seeds=[4], n_head=2, **BASE)
    assert sw.num_params() == tf.num_params()
    tf.load_state_dict(sw.state_dict())
    tokens = torch.randint(0, task.vocab_size, (1, 3, task.seq_len), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(sw(tokens), tf(tokens), rtol=1e-5, atol=1e-6)


def test_the_output_at_t_ignores_positions_before_the_window():
    task = get_task("bijection", V=6)
    model = get_model("sliding-window", task, seeds=[0], n_head=2, window=3, **{**BASE, "n_layer": 1})
    tokens = torch.randint(0, task.vocab_size, (1, 2, 10), generator=torch.Generator().manual_seed(0))
    changed = tokens.clone()
    changed[..., 0] = (changed[..., 0] + 1) % task.vocab_size
    out, base = model(changed), model(tokens)
    torch.testing.assert_close(out[:, :, 3:], base[:, :, 3:])  # one layer: position t sees t-2..t
    assert not torch.allclose(out[:, :, 2], base[:, :, 2])


@pytest.mark.parametrize("window", [1, 4])
def test_state_is_the_window_of_keys_and_values(window):
    task = get_task("bijection", V=6)
    model = get_model("sliding-window", task, seeds=[0], n_head=2, window=window, **BASE)
    for L in (1, 2, task.seq_len):
        assert state_floats(model, L) == BASE["n_layer"] * 2 * min(window - 1, L) * BASE["d_model"]


def test_init_survives_the_leaderboard_build_path():
    model, _ = leaderboard_model("sliding-window")
    for block in model.blocks:
        assert abs(float(block.attn.qkv.weight.std()) - 0.02) < 0.004
        assert torch.equal(block.ln_1.weight, torch.ones_like(block.ln_1.weight))
        assert abs(float(block.attn.proj.weight.std()) - 0.02 / 2) < 0.003  # GPT-2's 1/sqrt(2 n_layer)


def test_capacity_matched_to_the_transformer():
    shape = TaskShape.from_task(get_task("bijection", V=8))
    target = count_params("transformer", shape, n_layer=2, n_head=2, d_model=64, d_ffn=128)
    assert abs(count_params("sliding-window", shape, match_params=target) - target) / target <= 0.01


@pytest.mark.parametrize("cfg,named", [(dict(window=0), "window"), (dict(window=-3), "window"),
                                       (dict(window=2.5), "window"), (dict(d_model=10, n_head=4), "d_model")])
def test_bad_settings_are_refused_naming_them(cfg, named):
    with pytest.raises(SettingError, match=f"^{named}\\b") as err:
        count_params("sliding-window", get_task("bijection", V=6), **cfg)
    assert named in err.value.fields
