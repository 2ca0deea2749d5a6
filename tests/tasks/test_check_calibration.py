"""The class-frequency test of tasks/check.py (`worst_calibrated_class`): its standard error is the
posterior's own (sum_t p_t(k) (1 - p_t(k)) per sequence, the variance of the draws when the
posterior is exact), not the sample's, which a rare class makes far too small: the exact
posterior of `revision` at n_ids = 100 was refused at z = -6.8 on 512 sequences (seed 0)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from bayesbench.tasks import Batch, get_task
from bayesbench.tasks.check import Z_LIMIT, check_task, worst_calibrated_class


def _sample_se_z(batch: Batch) -> float:
    """The largest |z| over classes with the sample's own standard error (the old, wrong test)."""
    p = batch.posterior.double()
    onehot = torch.nn.functional.one_hot(batch.targets.clamp(min=0), p.shape[-1]).double()
    m = batch.mask.unsqueeze(-1)
    d = torch.where(m, onehot - p, torch.zeros_like(p)).sum(1) / batch.mask.sum(1, keepdim=True)
    mean, se = d.mean(0), d.std(0) / math.sqrt(d.shape[0])
    return float(torch.where(mean.abs() > 1e-6, mean.abs() / se.clamp(min=1e-300), torch.zeros_like(se)).max())


@pytest.mark.parametrize("seed", range(6))
def test_an_exact_posterior_with_many_rare_classes_passes(seed):
    task = get_task("revision", n_ids=100)
    assert check_task(task, sequences=512, seed=seed)
    k, diff, se = worst_calibrated_class(task.sample(512, torch.Generator().manual_seed(seed)))
    assert abs(diff) <= Z_LIMIT * se


def test_the_samples_own_standard_error_refused_it():
    batch = get_task("revision", n_ids=100).sample(512, torch.Generator().manual_seed(0))
    assert _sample_se_z(batch) > Z_LIMIT  # what the check used to compute: a false rejection


def test_a_miscalibrated_posterior_still_fails():
    """The posterior of class k read as class k + 1's: a posterior of another process."""
    task = get_task("revision", n_ids=100)
    batch = task.sample(512, torch.Generator().manual_seed(0))
    rolled = dataclasses.replace(batch, posterior=batch.posterior.roll(1, -1))
    k, diff, se = worst_calibrated_class(rolled)
    assert abs(diff) > Z_LIMIT * se

    @dataclasses.dataclass(frozen=True)
    class Rolled(type(task)):  # type: ignore[misc]
        def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32):
            b = super().sample(batch_size, generator, device=device, dtype=dtype)
            return dataclasses.replace(b, posterior=b.posterior.roll(1, -1))

    with pytest.raises(ValueError, match="the posterior disagrees with the sampler"):
        check_task(Rolled(n_ids=100), sequences=512)
