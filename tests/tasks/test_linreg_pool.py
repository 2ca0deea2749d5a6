"""linreg's finite task pool (Raventos et al. 2023, "Pretraining task diversity and the emergence
of non-Bayesian in-context learning for regression", arXiv 2306.15063): w uniform over M fixed
vectors drawn once by `pool_seed`; the exact predictive is the mixture over the pool. Keys, the
posterior against the plain reference, the floors, the scores and bad settings."""

from __future__ import annotations

import pytest
import torch

from bayesbench.checks import SettingError
from bayesbench.models.heads import split_layout
from bayesbench.oracle.linreg import pool_predictive_reference
from bayesbench.scoring.continuous import ContinuousValues
from bayesbench.tasks import get_task
from bayesbench.tasks.registry import task_from_config


def test_the_pool_is_in_the_identity_and_the_gaussian_prior_keeps_its_own():
    plain = get_task("linreg", d=3, n=4)
    assert "pool" not in plain.config() and "pool" not in plain.describe()
    pooled = get_task("linreg", d=3, n=4, pool=5, pool_seed=2)
    assert pooled.config()["pool"] == 5 and pooled.config()["pool_seed"] == 2 and "pool=5" in pooled.describe()
    assert task_from_config(pooled.config()) == pooled and task_from_config(plain.config()) == plain
    torch.testing.assert_close(pooled.pool_vectors(), get_task("linreg", d=3, n=4, pool=5, pool_seed=2).pool_vectors())
    assert not torch.equal(pooled.pool_vectors(), get_task("linreg", d=3, n=4, pool=5, pool_seed=3).pool_vectors())


@pytest.mark.parametrize("d,n,M", [(1, 1, 1), (1, 5, 3), (3, 1, 4), (3, 6, 1), (2, 6, 8)])
def test_the_posterior_is_the_mixture_over_the_pool(d, n, M):
    task = get_task("linreg", d=d, n=n, pool=M, components=M)
    assert task.posterior_components == M and task.head == ("gaussian" if M == 1 else f"mixture:{M}")
    b = task.sample(5, torch.Generator().manual_seed(M), dtype=torch.float64)
    pool = task.pool_vectors()
    assert b.posterior.shape == (5, 2 * n, 3 * M)
    assert bool((b.latents["w"] == pool[b.latents["member"]]).all())
    weights, means, var = pool_predictive_reference(b.latents["x"], b.latents["y"], pool, task.sigma)
    want = torch.cat([weights, means, torch.full_like(means, var)], -1)
    torch.testing.assert_close(b.posterior[b.mask].view(5, n, 3 * M), want, rtol=1e-9, atol=1e-12)


def test_the_exact_predictive_scores_zero_and_the_prior_is_the_uniform_mixture():
    task = get_task("linreg", d=2, n=6, pool=4, components=4)
    b = task.sample(32, torch.Generator().manual_seed(0))
    p = b.posterior.double()
    v = ContinuousValues.of(p, p, b.targets, b.mask, task.error_dim)
    assert float(v.kl.abs().max()) < 1e-9 and float((v.h_model - v.h_bayes).abs().max()) < 1e-9
    prior = task.floor_predictives(b)["prior"]
    w, m, var = split_layout(prior[b.mask])
    torch.testing.assert_close(w, torch.full_like(w, 0.25))
    torch.testing.assert_close(m, (b.latents["x"] @ task.pool_vectors().T).reshape(-1, 4))
    first = b.mask.clone()
    first[:, 1:] = False  # k = 1: no pairs yet, the posterior is the prior
    torch.testing.assert_close(prior[first], p[first])
    assert float(ContinuousValues.of(p, prior, b.targets, b.mask, task.error_dim).kl[b.mask].mean()) > 0.05


@pytest.mark.parametrize("kwargs,match", [
    ({"pool": -1}, r"pool must be an integer >= 0"),
    ({"pool": 65}, r"pool must be at most 64"),
    ({"pool": 2.5}, r"pool must be an integer >= 0"),
    ({"pool": 3, "pool_seed": -1}, r"pool_seed must be an integer >= 0"),
    ({"pool_seed": 4}, r"pool_seed applies to a finite pool only"),
])
def test_bad_pool_settings_are_one_line(kwargs, match):
    with pytest.raises(SettingError, match=match) as err:
        get_task("linreg", **kwargs)
    assert "\n" not in str(err.value)
