"""The continuous tunnels (issue 41): linreg, mixreg, kalman. Structure, determinism, the exact
predictive against the oracles' plain references, calibration of the samples, the floors, eval
lengths and one-line errors for bad settings."""

from __future__ import annotations

import pytest
import torch

from bayesbench.checks import SettingError
from bayesbench.models.heads import split_layout
from bayesbench.oracle.kalman import kalman_predictive_reference
from bayesbench.oracle.linreg import linreg_predictive_reference
from bayesbench.oracle.mixreg import mixreg_predictive_reference
from bayesbench.scoring.evaluate import evaluation_tasks, max_eval_len
from bayesbench.tasks import get_task, list_tasks

TINY = {"linreg": {"d": 3, "n": 6}, "mixreg": {"d": 3, "n": 6, "sparsity": 1}, "kalman": {"m": 2, "K": 7}}


def test_the_three_tunnels_are_registered_with_continuous_heads():
    assert {"linreg", "mixreg", "kalman"} <= set(list_tasks())
    assert get_task("linreg").head == "gaussian" and get_task("kalman").head == "gaussian"
    assert get_task("mixreg").head == "mixture:2" and get_task("mixreg").num_classes == 6
    assert get_task("linreg", components=3).head == "mixture:3"


@pytest.mark.parametrize("name", sorted(TINY))
def test_batch_structure(name):
    task = get_task(name, **TINY[name])
    b = task.sample(5, torch.Generator().manual_seed(0))
    L, J = task.seq_len, task.posterior_components
    assert b.tokens.shape == (5, L) and int(b.tokens.max()) < task.vocab_size
    assert b.header.shape == (5, L, task.header_dim) and task.header_len == L and task.header_every_position
    assert b.targets.shape == (5, L) and b.targets.is_floating_point()
    assert b.posterior.shape == (5, L, 3 * J)
    w, m, v = split_layout(b.posterior.double())
    torch.testing.assert_close(w.sum(-1), torch.ones(5, L, dtype=torch.float64))
    assert bool((v > 0).all()) and bool((w >= 0).all())
    assert bool((b.targets[~b.mask] == 0).all())
    n_scored = task.K if name == "kalman" else task.n
    assert bool((b.mask.sum(1) == n_scored).all())
    again = task.sample(5, torch.Generator().manual_seed(0))
    for f in ("tokens", "header", "targets", "posterior", "mask"):
        assert torch.equal(getattr(b, f), getattr(again, f)), f
    assert not torch.equal(task.sample(5, torch.Generator().manual_seed(1)).targets, b.targets)


def test_the_inputs_carry_the_pairs_and_the_observations():
    task = get_task("linreg", d=3, n=4)
    b = task.sample(2, torch.Generator().manual_seed(0))
    x, y = b.latents["x"], b.latents["y"]
    torch.testing.assert_close(b.header[:, 0::2, :3].double(), x, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(b.header[:, 1::2, 3].double(), y, rtol=1e-6, atol=1e-6)
    assert bool((b.header[:, 0::2, 3] == 0).all()) and bool(b.mask[:, 0::2].all()) and not bool(b.mask[:, 1::2].any())
    k = get_task("kalman", m=2, K=5)
    kb = k.sample(2, torch.Generator().manual_seed(0))
    torch.testing.assert_close(kb.header[:, :2].double(), kb.latents["A"], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(kb.header[:, 3:, 0].double(), kb.latents["y"][:, :-1], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(kb.targets[kb.mask].view(2, 5).double(), kb.latents["y"], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", sorted(TINY))
def test_the_posterior_is_the_oracles_reference(name):
    task = get_task(name, **TINY[name])
    b = task.sample(6, torch.Generator().manual_seed(3), dtype=torch.float64)
    got = b.posterior[b.mask].view(6, -1, 3 * task.posterior_components)
    lat = b.latents
    if name == "linreg":
        mean, var = linreg_predictive_reference(lat["x"], lat["y"], task.tau, task.sigma)
        want = torch.stack([torch.ones_like(mean), mean, var], -1)
    elif name == "mixreg":
        post, mean, var = mixreg_predictive_reference(lat["x"], lat["y"], *task.prior(), task.sigma)
        want = torch.cat([post, mean, var], -1)
    else:
        A, C, Q, R, mu0, P0 = task.system(lat["A"], lat["C"])
        mean, cov = kalman_predictive_reference(lat["y"].unsqueeze(-1), A, C, Q, R, mu0, P0)
        want = torch.stack([torch.ones_like(mean[..., 0]), mean[..., 0], cov[..., 0, 0]], -1)
    torch.testing.assert_close(got, want, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", ["linreg", "kalman"])
def test_samples_are_distributed_as_the_predictive_says(name):
    """y_k standardised by the exact predictive is N(0, 1) over sequences and positions."""
    task = get_task(name, **TINY[name])
    b = task.sample(3000, torch.Generator().manual_seed(5), dtype=torch.float64)
    _, m, v = split_layout(b.posterior)
    z = ((b.targets - m[..., 0]) / v[..., 0].sqrt())[b.mask]
    assert abs(float(z.mean())) < 4 / z.numel() ** 0.5 * 1.5
    assert abs(float(z.var()) - 1) < 0.05


def test_mixreg_draws_sparse_weights_with_the_prior_weight():
    task = get_task("mixreg", d=4, n=3, sparsity=2, dense_weight=0.3)
    b = task.sample(4000, torch.Generator().manual_seed(0))
    dense = b.latents["dense"]
    assert abs(float(dense.double().mean()) - 0.3) < 0.03
    assert bool((b.latents["w"][~dense, 2:] == 0).all())


def test_floors_are_the_named_reference_predictors():
    b = get_task("linreg", **TINY["linreg"]).sample(4, torch.Generator().manual_seed(0))
    refs = get_task("linreg", **TINY["linreg"]).floor_predictives(b)
    assert list(refs) == ["prior", "least_squares", "ridge"]
    x = b.latents["x"]
    _, m, v = split_layout(refs["prior"][b.mask].view(4, 6, 3))
    assert bool((m == 0).all())
    torch.testing.assert_close(v[..., 0], x.square().sum(-1) + 0.25**2)
    assert list(get_task("mixreg", **TINY["mixreg"]).floor_predictives(
        get_task("mixreg", **TINY["mixreg"]).sample(2, torch.Generator().manual_seed(0)))) == ["prior", "dense_prior"]


def test_kalman_is_scored_at_longer_lengths_as_the_hmm():
    task = get_task("kalman", m=2, K=10)
    tasks = evaluation_tasks(task, (15, 25))
    assert list(tasks) == ["K=10", "K=15", "K=25"] and tasks["K=25"].seq_len == 27
    assert max_eval_len(task, (15, 25)) == 27
    with pytest.raises(ValueError, match="eval lengths apply to the hmm and kalman tasks only"):
        evaluation_tasks(get_task("linreg"), (5,))


@pytest.mark.parametrize("name,config,field,rule", [
    ("linreg", {"d": 0}, "d", "positive integer"),
    ("linreg", {"sigma": 0.0}, "sigma", "positive finite number"),
    ("linreg", {"sigma": -1.0}, "sigma", "positive finite number"),
    ("linreg", {"tau": 0}, "tau", "positive finite number"),
    ("linreg", {"n": 0}, "n", "positive integer"),
    ("mixreg", {"dense_weight": 1.5}, "dense_weight", r"number in \[0, 1\]"),
    ("mixreg", {"dense_weight": -0.1}, "dense_weight", r"number in \[0, 1\]"),
    ("mixreg", {"d": 3, "sparsity": 4}, "sparsity", "at most d = 3"),
    ("mixreg", {"sigma": 0}, "sigma", "positive finite number"),
    ("kalman", {"rho": 1.0}, "rho", "unstable"),
    ("kalman", {"rho": 1.2}, "rho", "unstable"),
    ("kalman", {"r": 0}, "r", "positive finite number"),
    ("kalman", {"components": 0}, "components", "positive integer"),
])
def test_bad_settings_are_one_line_errors_naming_the_setting(name, config, field, rule):
    with pytest.raises(SettingError, match=rule) as err:
        get_task(name, **config)
    assert str(err.value).startswith(f"{field} must") and "\n" not in str(err.value)
    assert field in err.value.fields


@pytest.mark.parametrize("name", sorted(TINY))
def test_every_continuous_tunnel_passes_the_checks_of_an_outside_one(name):
    from bayesbench.tasks.check_continuous import check_continuous_task

    lines = check_continuous_task(get_task(name, **TINY[name]), sequences=256)
    assert len(lines) == 4 and lines[-1].startswith("floors: prior")


def test_a_continuous_tunnel_whose_posterior_is_not_the_samplers_is_refused():
    """A file whose predictive is shifted (or another process's) fails the calibration check."""
    import dataclasses

    from bayesbench.tasks.check_continuous import check_continuous_task
    from bayesbench.tasks.linreg import LinRegTask

    @dataclasses.dataclass(frozen=True)
    class Shifted(LinRegTask):
        def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32):
            b = super().sample(batch_size, generator, device=device, dtype=dtype)
            b.posterior[..., 1] += 0.5  # the means, off by half a unit
            return b

    with pytest.raises(ValueError, match="must be as surprising as the posterior says|integral transform"):
        check_continuous_task(Shifted(d=2, n=4), sequences=512)
    with pytest.raises(ValueError, match="its head is categorical"):
        check_continuous_task(get_task("sticky"))
