"""GLA (models/gla.py; Yang et al. 2023, arXiv 2312.06635): the chunked forward equals the
recurrent reference (float64, outputs and gradients, awkward shapes), its gate initialisation
survives the leaderboard's build, its capacity match, and its settings' rules."""

from __future__ import annotations

import pytest
import torch
from recurrent_checks import TASK, check_capacity_matched, check_forward_equals_recurrent, leaderboard_model, mixers_of

from bayesbench.checks import SettingError
from bayesbench.models import count_params

# (E, B, L, n_head, chunk): length 1, L not a multiple of the chunk, one head, E = 1 and E > 1, chunk 1
SHAPES = [(1, 1, 1, 1, 4), (1, 2, 7, 1, 4), (3, 2, 10, 2, 4), (2, 1, 9, 2, 16), (2, 2, 6, 3, 1)]


@pytest.mark.parametrize("E,B,L,H,chunk", SHAPES)
def test_chunked_forward_equals_the_recurrent_reference(E, B, L, H, chunk):
    d = 4 * H
    for mixer in mixers_of("gla", list(range(E)), n_layer=2, n_head=H, d_model=d, d_ffn=8, gate_rank=3, chunk=chunk):
        state = check_forward_equals_recurrent(mixer, d, E, B, L, seed=L)
        assert set(state) == {"S"} and state["S"].shape == (E, B, H, d // 2 // H, d // H)


def test_gate_initialisation_survives_the_leaderboard_build():
    """Slow forgetting at init (Sec. 4.4): alpha = sigmoid(~0)^(1/16) ~ 0.958 for every channel."""
    model, _ = leaderboard_model("gla", seeds=(0, 1, 2))  # the trainer's model, as the leaderboard builds it
    cfg = model.cfg
    assert cfg.gate_temperature == 16.0 and cfg.gate_rank == 16
    x = torch.randn(3, 4, 5, cfg.d_model, generator=torch.Generator().manual_seed(0))
    for block in model.blocks:
        mixer = block.mixer
        assert torch.equal(mixer.gate_up.bias, torch.zeros_like(mixer.gate_up.bias))
        alpha = torch.exp(mixer.gates(x))
        torch.testing.assert_close(alpha, torch.full_like(alpha, 0.5 ** (1 / 16)), atol=2e-3, rtol=0)
        assert not torch.equal(mixer.gate_down.weight[0], mixer.gate_down.weight[1])  # members differ


def test_capacity_matched_to_the_transformer():
    check_capacity_matched("gla")


@pytest.mark.parametrize("cfg,fields,match", [
    (dict(n_head=4, d_model=12), ("d_model", "n_head"), r"d_model \(12\) must be divisible by 2 \* n_head \(8\)"),
    (dict(chunk=0), ("chunk",), "chunk must be a positive integer"),
    (dict(gate_temperature=0.0), ("gate_temperature",), "gate_temperature must be a positive finite number"),
    (dict(gate_rank=0), ("gate_rank",), "gate_rank must be a positive integer"),
])
def test_bad_settings_are_refused_naming_them(cfg, fields, match):
    with pytest.raises(SettingError, match=match) as err:
        count_params("gla", TASK, **cfg)
    assert set(fields) <= set(err.value.fields)
