"""Recurrent references and state size (issue 43; models/state.py): every sequence-mixing layer of
every registered architecture equals its `recurrent_step` looped over positions (float64, outputs
and gradients), and `state_floats` equals a count of what those references carry, checked against
each architecture's state written out by hand here (the test's own formula, never the package's)."""

from __future__ import annotations

import pytest
import torch
from recurrent_checks import check_layers_equal_steps, perturbed

from bayesbench.models import get_model
from bayesbench.models.registry import homes, model_options
from bayesbench.models.state import StateUnknown, mixers, state_floats, state_record
from bayesbench.tasks import get_task

ARCHS = sorted(homes())
SMALL_COUNT = 20_000


def small(arch: str) -> dict:
    return {"match_params": SMALL_COUNT} if "match_params" in model_options(arch) else {}


@pytest.fixture(scope="module")
def bij():
    return get_task("bijection", V=6)


@pytest.mark.parametrize("arch", ARCHS)
def test_every_mixer_equals_its_recurrent_reference(arch, bij):
    """Generic over the registry: E = 2 members, an odd length, float64."""
    model = get_model(arch, bij, seeds=[0, 1], **small(arch))
    if not mixers(model):
        assert getattr(model, "mixes_positions", True) is False, f"{arch}: no recurrent_step on any layer"
        return
    model = perturbed(model)
    g = torch.Generator().manual_seed(2)
    for L in (1, 7):
        tokens = torch.randint(0, bij.vocab_size, (2, 2, L), generator=g)
        assert check_layers_equal_steps(model, tokens) >= 1


@pytest.mark.parametrize("arch", ARCHS)
def test_state_floats_is_the_final_state_of_the_references(arch, bij):
    model = get_model(arch, bij, seeds=[0], **small(arch))
    n = state_floats(model, bij.seq_len)
    assert isinstance(n, int) and n >= 0
    assert state_record(model, bij.seq_len)["floats"] == n


# ---------------------------------------------------------------- the counts, by hand

def _transformer(cfg, L):
    return cfg.n_layer * 2 * L * cfg.d_model  # K and V of every position, every layer


EXPECTED = {
    "transformer": (dict(n_layer=2, n_head=2, d_model=8, d_ffn=8), _transformer),
    "lstm": (dict(n_layer=2, d_model=6), lambda cfg, L: cfg.n_layer * 2 * cfg.d_model),
    "gru": (dict(n_layer=3, d_model=6), lambda cfg, L: cfg.n_layer * cfg.d_model),
    "mamba": (dict(n_layer=2, d_model=6, d_state=4, d_conv=3),
              lambda cfg, L: cfg.n_layer * (cfg.inner * (cfg.d_conv - 1) + cfg.inner * cfg.d_state)),
    "linear-attention": (dict(n_layer=2, n_head=2, d_model=8, d_ffn=8),
                         lambda cfg, L: cfg.n_layer * cfg.n_head * ((cfg.d_model // cfg.n_head) ** 2
                                                                    + cfg.d_model // cfg.n_head)),
    "mlp": (dict(depth=2, width=8), lambda cfg, L: 0),
    "mlp-prefix": (dict(depth=2, width=8, prefix_dim=4), lambda cfg, L: cfg.width),
}


@pytest.mark.parametrize("arch", sorted(EXPECTED))
@pytest.mark.parametrize("L", [1, 5, 12])
def test_state_floats_match_the_state_written_out(arch, L, bij):
    cfg, formula = EXPECTED[arch]
    model = get_model(arch, bij, seeds=[0, 1], **cfg)
    assert state_floats(model, L) == formula(model.cfg, L)


def test_rope_transformer_and_its_cache_equal_forward(bij):
    model = perturbed(get_model("transformer", bij, seeds=[0, 1], n_layer=2, n_head=2, d_model=8, d_ffn=8,
                                position="rope"))
    tokens = torch.randint(0, bij.vocab_size, (2, 3, 9), generator=torch.Generator().manual_seed(0))
    assert check_layers_equal_steps(model, tokens) == 2


def test_state_errors(bij):
    model = get_model("gru", bij, seeds=[0], n_layer=1, d_model=4)
    with pytest.raises(ValueError, match="length must be a positive integer"):
        state_floats(model, 0)
    with pytest.raises(ValueError, match="length must be at most"):
        state_floats(model, bij.seq_len + 1)

    class Opaque(torch.nn.Module):
        pass

    with pytest.raises(StateUnknown, match="cannot be counted"):
        state_floats(Opaque(), 3)
    assert state_record(Opaque(), 3) is None


def test_counting_leaves_the_model_as_it_was(bij):
    model = get_model("lstm", bij, seeds=[0], n_layer=1, d_model=4)
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    state_floats(model, 4)
    assert model.training and torch.equal(rng, torch.get_rng_state())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


@pytest.mark.parametrize("arch", ["transformer", "lstm"])
def test_a_dense_header_is_sized_to_the_counted_length(arch):
    """A continuous tunnel scored at longer lengths (kalman K = 20, evaluated at 30 and 50) builds
    its model for the longest; the state at the trained length is counted with a header of that
    length (a real vector per position), not the longest: `bayesbench train --task kalman` failed
    after training with "header must have shape [E, B, H=22, ...] ... got [1, 1, 52, 2]"."""
    task = get_task("kalman", m=1, K=4)
    longest = get_task("kalman", m=1, K=10)
    model = get_model(arch, task, seeds=[0], max_len=longest.seq_len, n_layer=1, d_model=4,
                      **({"n_head": 1, "d_ffn": 8} if arch == "transformer" else {}))
    short, long = state_floats(model, task.seq_len), state_floats(model, longest.seq_len)
    assert short > 0  # counted at the trained length without a shape error
    # an attention layer's K/V cache grows with the length; a recurrent state does not
    assert long > short if arch == "transformer" else long == short
