"""What the authors' recurrence setting costs here: a training step of their model (a 6-layer
d_model 192 transformer, 6 heads, d_ff 768, dropout 0.1; docs/science.md, "Modular-recurrence
mixture") against one of the quick transformer (2 layers, d_model 64), both on the recurrence
tunnel at their setting (p = 17, pi = 0.5, L = 16, integer tokens), one seed, batch 64, one
thread. The two are timed interleaved in one process (`timing.interleaved`), so the ratio holds
under load; the seconds per step, times their 150,000 steps, say what one seed of their run
would take on this machine (docs/science.md, "What the discrete tunnels measured", question 3).
Report-only: the numbers go to extra_info and stdout, no goal is asserted. Run:
`OMP_NUM_THREADS=1 pytest benchmarks/test_recurrence_scale.py -s --benchmark-disable`.
"""

from __future__ import annotations

from timing import interleaved

from bayesbench.tasks import get_task
from bayesbench.training.config import TrainConfig
from bayesbench.training.trainer import Trainer

AUTHORS = {"n_layer": 6, "n_head": 6, "d_model": 192, "d_ffn": 768, "dropout": 0.1}
QUICK = {"n_layer": 2, "n_head": 2, "d_model": 64, "d_ffn": 128}
AUTHORS_STEPS = 150_000


def _trainer(model_cfg: dict, lr: float) -> Trainer:
    task = get_task("recurrence", p=17, L=16, pi=0.5, tokens="integer")
    return Trainer(task, "transformer", [0], TrainConfig(steps=10**6, batch_size=64, lr=lr), model_cfg=model_cfg)


def test_the_authors_recurrence_model_against_the_quick_one(benchmark, one_thread):
    authors, quick = _trainer(AUTHORS, 3e-4), _trainer(QUICK, 2e-3)
    t_authors, t_quick = interleaved(authors.train_step, quick.train_step, rounds=3, n=5, warmup=2)
    benchmark.pedantic(quick.train_step, rounds=2, iterations=1)
    info = {"authors_step_s": t_authors, "quick_step_s": t_quick, "ratio": t_authors / t_quick,
            "authors_params": authors.model.num_params(), "quick_params": quick.model.num_params(),
            "authors_run_h_per_seed": t_authors * AUTHORS_STEPS / 3600}
    benchmark.extra_info.update(info)
    print(f"\nauthors' model: {info['authors_step_s']:.3f} s per step ({info['authors_params']:,} params); quick "
          f"transformer: {info['quick_step_s'] * 1e3:.1f} ms ({info['quick_params']:,} params); x{info['ratio']:.1f}; "
          f"{AUTHORS_STEPS:,} steps: {info['authors_run_h_per_seed']:.1f} h per seed on this core")
