"""The belief-geometry probe (dynamics/belief_probe/): R^2 near 1 on a model whose residual
stream is a known linear map of the belief, near the shuffle control on a model whose stream is
noise; every architecture's streams are read; bad settings are refused naming the field."""

from __future__ import annotations

import pytest
import torch

from bayesbench.dynamics.belief_probe.measure import (
    belief_targets,
    probe,
    residual_streams,
    shuffled_across_sequences,
    stream_modules,
)
from bayesbench.dynamics.config import FieldError
from bayesbench.models.registry import list_models
from bayesbench.tasks import get_task


def synthetic_streams(beliefs: torch.Tensor, members: int, signal: bool, d: int = 16, seed: int = 0):
    """[E, B, L, d] streams: a random linear map of the belief plus a little noise (signal), or
    pure noise (no signal)."""
    g = torch.Generator().manual_seed(seed)
    B, L, K = beliefs.shape
    out = []
    for _ in range(members):
        noise = torch.randn((B, L, d), generator=g, dtype=torch.float64)
        if signal:
            out.append(beliefs @ torch.randn((K, d), generator=g, dtype=torch.float64) + 1e-3 * noise)
        else:
            out.append(noise)
    return torch.stack(out)


@pytest.mark.parametrize("name", ["mess3", "rrxor", "hmm_mixture"])
def test_a_linear_image_of_the_belief_gives_r2_near_one_and_noise_gives_the_shuffle_level(name):
    task = get_task(name, L=10)
    batch = task.sample(600, torch.Generator().manual_seed(0))
    positions, beliefs = belief_targets(task, batch)
    streams = {"linear": synthetic_streams(beliefs, 3, True), "noise": synthetic_streams(beliefs, 3, False, seed=1)}
    res = probe(streams, positions, beliefs, [0, 1, 2])
    assert min(res.r2["linear"]) > 0.99
    assert max(res.r2_shuffled["linear"]) < 0.5  # the control cannot use the sequence
    for r, c in zip(res.r2["noise"], res.r2_shuffled["noise"]):
        assert r < 0.1 and abs(r - c) < 0.1


def test_the_hmm_tunnels_belief_is_its_filter_at_the_scored_positions():
    task = get_task("hmm", K=6)
    batch = task.sample(5, torch.Generator().manual_seed(0))
    positions, beliefs = belief_targets(task, batch)
    assert torch.equal(positions, batch.mask) and torch.equal(beliefs, batch.posterior.double())
    with pytest.raises(FieldError, match="^run is trained on bijection.*no belief state"):
        belief_targets(get_task("bijection", V=4), get_task("bijection", V=4).sample(2))


def test_the_shuffle_keeps_each_positions_beliefs_and_breaks_the_sequences():
    beliefs = torch.rand(50, 4, 3, dtype=torch.float64)
    s = shuffled_across_sequences(beliefs, 0)
    for t in range(4):
        assert torch.equal(s[:, t].sort(0).values, beliefs[:, t].sort(0).values)
    assert not torch.equal(s, beliefs)


@pytest.mark.parametrize("arch", sorted(list_models()))
def test_every_architecture_gives_one_stream_per_layer(arch):
    """Every registered architecture, the zoo's included: the probe reads any of them."""
    from bayesbench.models import get_model

    task = get_task("mess3", L=6)
    model = get_model(arch, task, seeds=[0, 1])
    batch = task.sample(4, torch.Generator().manual_seed(0))
    streams = residual_streams(model, batch)
    names = [n for n, _, _ in stream_modules(model)]
    assert list(streams) == names and names[0] == "embed" and names[-1] == "final" and len(names) >= 2
    assert all(v.shape[:3] == (2, 4, 6) for v in streams.values())


def test_the_config_refuses_bad_values_naming_the_field():
    from bayesbench.dynamics.belief_probe.study import BeliefProbeConfig

    with pytest.raises(FieldError, match=r"^test_fraction must be a number in \(0, 1\)"):
        BeliefProbeConfig(run="x", test_fraction=1.0)
    with pytest.raises(FieldError, match="^sequences must be an integer >= 8"):
        BeliefProbeConfig(run="x", sequences=4)


def test_an_hmm_runs_streams_take_its_header():
    from bayesbench.models import get_model

    task = get_task("hmm", K=5)
    model = get_model("transformer", task, seeds=[0])
    streams = residual_streams(model, task.sample(3, torch.Generator().manual_seed(0)))
    assert all(v.shape[:3] == (1, 3, task.seq_len) for v in streams.values())


@pytest.mark.parametrize("K", [2, 3, 5])
def test_the_simplex_figure_draws_any_number_of_states(K, tmp_path):
    from bayesbench.dynamics.belief_probe.plots import simplex_figure, simplex_projection

    beliefs = torch.distributions.Dirichlet(torch.ones(K, dtype=torch.float64)).sample((200,))
    path = simplex_figure(str(tmp_path / "s.png"), beliefs, beliefs + 0.01, "final", 0.9, 0.0, "test")
    assert path.endswith("s.png") and (tmp_path / "s.png").stat().st_size > 0
    axes, origin = simplex_projection(beliefs)
    assert axes.shape == (K, 2) and origin.shape == (K,)


class BeliefModel(torch.nn.Module):
    """A synthetic ensemble model: `embed` gives noise, its one block writes a fixed random
    linear image of the exact Mess3 belief (or, with signal=False, more noise), `head` reads it."""

    def __init__(self, signal: bool, ensemble: int = 2, d: int = 12):
        super().__init__()
        self.ensemble, self.signal, self.d = ensemble, signal, d
        g = torch.Generator().manual_seed(7)
        self.maps = torch.randn((ensemble, 3, d), generator=g, dtype=torch.float64)
        self.embed = torch.nn.Identity()
        self.blocks = torch.nn.ModuleList([torch.nn.Identity()])
        self.head = torch.nn.Linear(d, 3)
        self.anchor = torch.nn.Parameter(torch.zeros(1))  # a parameter: its device is the model's

    def forward(self, tokens, header=None):
        from bayesbench.oracle.belief import belief_filter
        from bayesbench.tasks.belief_process import mess3_matrices

        g = torch.Generator().manual_seed(int(tokens.sum()))
        noise = torch.randn((*tokens.shape, self.d), generator=g, dtype=torch.float64)
        x = self.embed(noise)
        if self.signal:
            beliefs, _ = belief_filter(mess3_matrices(0.05, 0.85), tokens[0])
            x = torch.einsum("blk,ekd->ebld", beliefs, self.maps) + 1e-3 * noise
        else:
            x = torch.randn(x.shape, generator=g, dtype=torch.float64)
        x = self.blocks[0](x)
        return self.head(x.float())


@pytest.mark.parametrize("signal", [True, False])
def test_the_probe_through_hooks_on_a_synthetic_model(signal):
    task = get_task("mess3", L=8)
    batch = task.sample(400, torch.Generator().manual_seed(3))
    positions, beliefs = belief_targets(task, batch)
    res = probe(residual_streams(BeliefModel(signal), batch), positions, beliefs, [0, 1])
    assert res.streams == ["embed", "block 0", "final"]
    for e in range(2):
        if signal:
            assert res.r2["block 0"][e] > 0.99 and res.r2_shuffled["block 0"][e] < 0.1
        else:
            assert abs(res.r2["block 0"][e] - res.r2_shuffled["block 0"][e]) < 0.1 and res.r2["block 0"][e] < 0.1
