"""Training throughput: an ensemble of E seeds against E separate models.

CPU: E = 4 members of the quick bijection transformer in one model vs 4 solo models stepped
one after the other, in the same process, interleaved (so background load hits both alike).
Goal: the ensemble at least 1.2x faster; the ratio goes to extra_info.
GPU (skipped without CUDA): E = 8 paper-scale transformers vs E = 1; goal: 8 seeds cost at most
2x one seed.
"""

from __future__ import annotations

import pytest
import torch
from timing import interleaved

from bayesbench.tasks import get_task
from bayesbench.train import TrainConfig, Trainer

QUICK = dict(n_layer=2, n_head=2, d_model=64, d_ffn=256)


def test_ensemble_vs_sequential_cpu(benchmark):
    task = get_task("bijection", V=8)
    cfg = TrainConfig(steps=10**9, batch_size=64, lr=1e-3)
    E = 4
    ens = Trainer(task, "transformer", list(range(E)), cfg, model_cfg=QUICK)
    solos = [Trainer(task, "transformer", [s], cfg, model_cfg=QUICK) for s in range(E)]

    def sequential():
        for t in solos:
            t.train_step()

    t_ens, t_seq = interleaved(ens.train_step, sequential, rounds=5, n=10, warmup=5)
    benchmark.pedantic(ens.train_step, rounds=10, iterations=1)
    ratio = t_seq / t_ens
    benchmark.extra_info.update({
        "ensemble_members": E, "threads": torch.get_num_threads(),
        "ensemble_steps_per_s": 1 / t_ens, "sequential_steps_per_s": 1 / t_seq,
        "speedup_ensemble_vs_sequential": ratio, "goal": ">= 1.2",
    })
    print(f"\nE={E} ensemble {1 / t_ens:.1f} steps/s vs {E} sequential solo models {1 / t_seq:.1f} rounds/s: "
          f"{ratio:.2f}x (goal >= 1.2x)")
    assert ratio > 1.0, f"the ensemble should beat sequential solo models, got {ratio:.2f}x"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_paper_scale_ensemble_cost_gpu(benchmark):
    task = get_task("bijection", V=20)
    cfg = TrainConfig(steps=10**9, batch_size=128, lr=1e-3)
    one = Trainer(task, "transformer", [0], cfg, model_cfg={"preset": "paper-bijection"}, device="cuda")
    eight = Trainer(task, "transformer", list(range(8)), cfg, model_cfg={"preset": "paper-bijection"}, device="cuda")
    t1, t8 = interleaved(one.train_step, eight.train_step, rounds=5, n=20, warmup=5, sync=torch.cuda.synchronize)
    benchmark.pedantic(eight.train_step, rounds=20, iterations=1, setup=torch.cuda.synchronize)
    cost = t8 / t1
    benchmark.extra_info.update({"e1_steps_per_s": 1 / t1, "e8_steps_per_s": 1 / t8, "e8_cost_vs_e1": cost,
                                 "goal": "<= 2.0", "device": torch.cuda.get_device_name()})
    print(f"\nE=8 paper-scale step costs {cost:.2f}x an E=1 step (goal <= 2x)")
    assert cost < 8.0
