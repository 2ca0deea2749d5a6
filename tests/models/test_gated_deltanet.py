"""Gated DeltaNet (models/gated_deltanet.py; Yang, Kautz, Hatamizadeh 2024, arXiv 2412.06464):
the layer's chunkwise forward equals its recurrent_step (float64, outputs and gradients, awkward
shapes; the kernel itself, gated and not, is tested in test_deltanet.py), the gate's Mamba-2
initialisation survives the leaderboard's build, its capacity match, and its settings' rules."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from recurrent_checks import TASK, check_capacity_matched, check_forward_equals_recurrent, leaderboard_model, mixers_of

from bayesbench.checks import SettingError
from bayesbench.models import count_params

SHAPES = [(1, 1, 1, 1, 4), (1, 2, 7, 1, 4), (3, 2, 10, 2, 4), (2, 1, 9, 2, 16), (2, 2, 6, 3, 1)]


@pytest.mark.parametrize("E,B,L,H,chunk", SHAPES)
def test_chunked_forward_equals_the_recurrent_reference(E, B, L, H, chunk):
    d = 2 * H
    for mixer in mixers_of("gated-deltanet", list(range(E)), n_layer=2, n_head=H, d_model=d, d_ffn=8, d_conv=2,
                        chunk=chunk):
        state = check_forward_equals_recurrent(mixer, d, E, B, L, seed=L)
        assert state["S"].shape == (E, B, H, 2, 2) and state["conv"].shape == (E, B, 1, 3 * d)


def test_gate_initialisation_survives_the_leaderboard_build():
    """A ~ U(0, 16) (A_log = log A), dt = softplus(dt_bias) in [1e-3, 1e-1]; so the initial decay
    alpha = exp(-A dt) lies in [exp(-1.6), 1); both kept out of weight decay; members differ."""
    model, _ = leaderboard_model("gated-deltanet", seeds=(0, 1))  # the trainer's model, as the leaderboard builds it
    x = torch.randn(2, 3, 5, model.cfg.d_model, generator=torch.Generator().manual_seed(0))
    for block in model.blocks:
        m = block.mixer
        A = torch.exp(m.A_log)
        assert A.min() > 0 and A.max() <= 16.0 + 1e-5
        dt = F.softplus(m.dt_bias)
        assert dt.min() >= 1e-3 * (1 - 1e-4) and dt.max() <= 1e-1 * (1 + 1e-4)
        alpha = torch.exp(m.log_decay(x))
        assert alpha.max() < 1 and alpha.min() > torch.exp(torch.tensor(-16 * 0.1 * 1.1))
        assert all(getattr(p, "_no_weight_decay", False) for p in (m.A_log, m.dt_bias))
        assert not torch.equal(m.A_log[0], m.A_log[1])


def test_capacity_matched_to_the_transformer():
    check_capacity_matched("gated-deltanet")


@pytest.mark.parametrize("cfg,fields,match", [
    (dict(n_head=5, d_model=12), ("d_model", "n_head"), r"d_model \(12\) must be divisible by n_head \(5\)"),
    (dict(chunk=0), ("chunk",), "chunk must be a positive integer"),
    (dict(dt_min=0.5), ("dt_min", "dt_max"), "dt_min must be <= dt_max"),
    (dict(dt_max=0.0), ("dt_max",), "dt_max must be a positive finite number"),
])
def test_bad_settings_are_refused_naming_them(cfg, fields, match):
    with pytest.raises(SettingError, match=match) as err:
        count_params("gated-deltanet", TASK, **cfg)
    assert set(fields) <= set(err.value.fields)
