"""What a learning-rate grid costs as one ensemble with per-member rates (`TrainConfig.member_lrs`,
`training/optim.py`): report-only CPU ratios, measured in the same run (interleaved rounds, the
median kept), at the quick zoo's sizes on the quick bijection (batch 64, 1 torch thread):

- the per-member-rate step against the same ensemble at one rate (the cost of the rates: one
  lerp over the parameters and one copy per step); the goal, where there is one, is on a GPU;
- the whole grid (5 rates) as one ensemble against the 5 rates as solo runs stepped in turn: what
  packing a grid saves (nothing on a compute-bound CPU for matmul-heavy models; much for the
  launch-bound recurrent ones).
"""

from __future__ import annotations

import pytest
import torch
from timing import interleaved

from bayesbench.sweep.jobs import make_jobs
from bayesbench.training.trainer import Trainer

RATES = (1e-4, 3.2e-4, 1e-3, 3.2e-3, 1e-2)


def _job(arch: str):
    (job,) = make_jobs("quick", tasks=["bijection"], archs=[arch])
    return job


def _trainer(job, seeds, **train):
    import dataclasses

    cfg = dataclasses.replace(job.train, steps=10**9, curves=False, **train)
    return Trainer(job.task, job.arch, list(seeds), cfg, model_cfg=job.model, max_len=job.max_len)


@pytest.mark.parametrize("arch", ["transformer", "lstm"])
def test_per_member_rates_cost_against_one_rate(benchmark, arch):
    torch.set_num_threads(1)
    job = _job(arch)
    seeds = range(len(RATES))
    rates = _trainer(job, seeds, member_lrs=RATES)
    one = _trainer(job, seeds)
    t_rates, t_one = interleaved(rates.train_step, one.train_step, rounds=5, n=5, warmup=3)
    benchmark.pedantic(rates.train_step, rounds=3, iterations=1)
    ratio = t_rates / t_one
    benchmark.extra_info.update({"arch": arch, "members": len(RATES), "per_member_rates_s": t_rates,
                                 "one_rate_s": t_one, "cost_ratio": ratio})
    print(f"\n{arch}, E={len(RATES)}: per-member rates {t_rates * 1e3:.1f} ms/step, one rate {t_one * 1e3:.1f} "
          f"ms/step: {ratio:.3f}x")


@pytest.mark.parametrize("arch", ["transformer", "lstm"])
def test_grid_as_one_ensemble_against_solo_runs(benchmark, arch):
    torch.set_num_threads(1)
    job = _job(arch)
    grid = _trainer(job, range(len(RATES)), member_lrs=RATES)
    solos = [_trainer(job, [i], lr=lr) for i, lr in enumerate(RATES)]

    def in_turn():
        for t in solos:
            t.train_step()

    t_grid, t_solo = interleaved(grid.train_step, in_turn, rounds=5, n=3, warmup=2)
    benchmark.pedantic(grid.train_step, rounds=3, iterations=1)
    ratio = t_solo / t_grid
    benchmark.extra_info.update({"arch": arch, "rates": len(RATES), "grid_step_s": t_grid, "solo_steps_s": t_solo,
                                 "speedup": ratio})
    print(f"\n{arch}: the grid of {len(RATES)} rates as one ensemble {t_grid * 1e3:.1f} ms/step, as {len(RATES)} solo "
          f"runs in turn {t_solo * 1e3:.1f} ms: {ratio:.2f}x")
