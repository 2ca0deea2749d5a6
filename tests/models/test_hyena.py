"""Hyena (models/hyena.py): the FFT long convolution against the direct causal convolution step by
step (float64, gradients) at awkward shapes, its state (the convolution inputs' history, growing
with the length), its filter initialisation as the leaderboard builds it, matching, settings."""

from __future__ import annotations

import pytest
import torch
from recurrent_checks import check_awkward_shapes, leaderboard_model

from bayesbench.checks import SettingError
from bayesbench.models import TaskShape, count_params, get_model
from bayesbench.models.hyena import fft_causal_conv
from bayesbench.models.state import state_floats
from bayesbench.tasks import get_task

BASE = dict(n_layer=2, d_model=6, d_ffn=10, filter_order=8)


@pytest.mark.parametrize("order", [2, 3])
def test_forward_equals_the_recurrent_reference_at_awkward_shapes(order):
    check_awkward_shapes("hyena", {**BASE, "order": order}, heads=False)


def test_fft_convolution_is_the_direct_sum():
    g = torch.Generator().manual_seed(0)
    for L in (1, 2, 7, 16):
        v = torch.randn(2, 3, L, 4, generator=g, dtype=torch.float64)
        h = torch.randn(2, L, 4, generator=g, dtype=torch.float64)
        direct = torch.stack([sum(h[:, t - s, None] * v[:, :, s] for s in range(t + 1)) for t in range(L)], 2)
        torch.testing.assert_close(fft_causal_conv(v, h), direct, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("order", [2, 3])
def test_state_is_the_history_and_the_short_window(order):
    task = get_task("bijection", V=6)
    model = get_model("hyena", task, seeds=[0], **{**BASE, "order": order})
    d, k = BASE["d_model"], 3
    for L in (1, 4, task.seq_len):
        assert state_floats(model, L) == BASE["n_layer"] * ((order - 1) * L * d + (k - 1) * (order + 1) * d)


def test_init_survives_the_leaderboard_build_path():
    model, _ = leaderboard_model("hyena")
    for block in model.blocks:
        f = block.attn.filter
        assert torch.equal(f.act1.freq, torch.ones_like(f.act1.freq))
        bound = 1 / f.fc1.in_features ** 0.5
        assert f.fc1.weight.abs().max() <= bound and f.fc1.bias.abs().max() > 0  # torch's Linear default
        assert 0.5 < float(f.D.detach().std()) < 1.5  # N(0, 1) skip
        with torch.no_grad():
            h = f(model.shape.max_len).abs()
        assert float(h[:, -1].mean()) < float(h[:, 0].mean())  # the exponential window shrinks the far taps


def test_capacity_matched_to_the_transformer():
    shape = TaskShape.from_task(get_task("bijection", V=8))
    target = count_params("transformer", shape, n_layer=2, n_head=2, d_model=64, d_ffn=128)
    assert abs(count_params("hyena", shape, match_params=target) - target) / target <= 0.01


@pytest.mark.parametrize("cfg,named", [(dict(order=1), "order"), (dict(emb_dim=4), "emb_dim"),
                                       (dict(short_kernel=0), "short_kernel")])
def test_bad_settings_are_refused_naming_them(cfg, named):
    with pytest.raises(SettingError, match=f"^{named}\\b") as err:
        count_params("hyena", get_task("bijection", V=6), **cfg)
    assert named in err.value.fields
