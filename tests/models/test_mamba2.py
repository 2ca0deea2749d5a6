"""Mamba-2 (models/mamba2.py; Dao and Gu 2024, arXiv 2405.21060): the chunked SSD forward equals
the recurrent reference (float64, outputs and gradients, awkward shapes), its initialisation of A,
dt and D survives the leaderboard's build (the wrapper must not re-initialise it: mad-lab #3,
flash-linear-attention #739), its capacity match, and its settings' rules."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from recurrent_checks import TASK, check_capacity_matched, check_forward_equals_recurrent, leaderboard_model, mixers_of

from bayesbench.checks import SettingError
from bayesbench.models import count_params, get_model

SHAPES = [(1, 1, 1, 1, 4), (1, 2, 7, 1, 4), (3, 2, 10, 2, 4), (2, 1, 9, 2, 16), (2, 2, 6, 3, 1)]


@pytest.mark.parametrize("E,B,L,H,chunk", SHAPES)
def test_chunked_forward_equals_the_recurrent_reference(E, B, L, H, chunk):
    d, N = 4, 3
    for mixer in mixers_of("mamba2", list(range(E)), n_layer=2, n_head=H, d_model=d, d_inner=2 * H, d_state=N,
                        d_conv=3, chunk=chunk):
        state = check_forward_equals_recurrent(mixer, d, E, B, L, seed=L)
        assert state["S"].shape == (E, B, H, N, 2) and state["conv"].shape == (E, B, 2, 2 * H + 2 * N)


def test_initialisation_survives_the_leaderboard_build():
    """A ~ U(1, 16), dt = softplus(dt_bias) in [1e-3, 1e-1], D = 1, each member its own draws,
    and A_log, D, dt_bias kept out of weight decay."""
    model, _ = leaderboard_model("mamba2", seeds=(0, 1, 2))  # the trainer's model, as the leaderboard builds it
    for block in model.blocks:
        m = block.mixer
        A = torch.exp(m.A_log)
        assert A.min() >= 1.0 - 1e-6 and A.max() <= 16.0 + 1e-5
        dt = F.softplus(m.dt_bias)
        assert dt.min() >= 1e-3 * (1 - 1e-4) and dt.max() <= 1e-1 * (1 + 1e-4)
        assert torch.equal(m.D, torch.ones_like(m.D))
        assert not torch.equal(m.A_log[0], m.A_log[1]) and not torch.equal(m.dt_bias[0], m.dt_bias[2])
        assert all(getattr(p, "_no_weight_decay", False) for p in (m.A_log, m.D, m.dt_bias))
        bound = 1 / math.sqrt(m.cfg.d_conv)  # torch's Conv1d default
        assert m.conv.weight.abs().max() <= bound and m.conv.weight.abs().max() > 0.5 * bound


def test_capacity_matched_to_the_transformer():
    check_capacity_matched("mamba2")


def test_matching_keeps_the_state_size_when_d_inner_can():
    target = count_params("transformer", TASK, n_layer=2, n_head=2, d_model=64, d_ffn=128)
    model = get_model("mamba2", TASK, match_params=target)
    assert model.cfg.d_state == 16 and abs(model.num_params() - target) / target <= 0.01


@pytest.mark.parametrize("cfg,fields,match", [
    (dict(n_head=3, d_model=8), ("d_inner", "n_head"), r"d_inner \(16\) must be divisible by n_head \(3\)"),
    (dict(n_head=4, d_inner=10), ("d_inner", "n_head"), r"d_inner \(10\) must be divisible by n_head \(4\)"),
    (dict(chunk=0), ("chunk",), "chunk must be a positive integer"),
    (dict(dt_min=0.5), ("dt_min", "dt_max"), "dt_min must be <= dt_max"),
    (dict(d_state=0), ("d_state",), "d_state must be a positive integer"),
])
def test_bad_settings_are_refused_naming_them(cfg, fields, match):
    with pytest.raises(SettingError, match=match) as err:
        count_params("mamba2", TASK, **cfg)
    assert set(fields) <= set(err.value.fields)
