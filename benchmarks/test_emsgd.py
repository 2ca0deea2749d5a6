"""EM-vs-SGD ensemble: 16 seeds x 2 schedules trained as one batched computation against the same
32 members trained one after the other (`train_toy` with one seed and one schedule at a time).

Report-only: the ratio (sequential time / batched time, same process, interleaved rounds) goes to
extra_info. At the full sequence length the cost is the T x T attention of every member either
way, so the ratio is about bookkeeping and kernel-launch overhead; it is measured at T = 120,
where that overhead is visible.
"""

from __future__ import annotations

import torch
from timing import interleaved

from bayesbench.dynamics.emsgd.chain import paper_data
from bayesbench.dynamics.emsgd.study import default_seeds
from bayesbench.dynamics.emsgd.toy import SCHEDULES, train_toy


def test_batched_ensemble_vs_sequential_members(benchmark):
    seeds = default_seeds(16)
    data = [paper_data(s, T=120) for s in seeds]
    steps = 5

    def batched():
        train_toy(data, seeds, steps=steps, chunk=2 * len(seeds))

    def sequential():
        for d, s in zip(data, seeds):
            for name, lrs in SCHEDULES.items():
                train_toy([d], [s], steps=steps, schedules={name: lrs})

    t_batch, t_seq = interleaved(batched, sequential, rounds=3, n=1, warmup=1)
    benchmark.pedantic(batched, rounds=3, iterations=1)
    benchmark.extra_info.update({
        "members": 2 * len(seeds), "sequence_length": 120, "updates": steps, "threads": torch.get_num_threads(),
        "batched_s": t_batch, "sequential_s": t_seq, "speedup_batched_vs_sequential": t_seq / t_batch,
        "goal": "report-only",
    })
