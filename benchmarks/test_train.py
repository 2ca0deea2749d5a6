"""Training throughput and what one step costs the device.

CPU timing goals are reported, and asserted only with BAYESBENCH_ASSERT_CPU_GOALS=1 (a quiet machine
kept for measuring): on a shared 2-core machine the same ratio spread from 0.5x to 1.4x between runs
minutes apart (BENCHMARKS.md), so no margin would both hold there and mean something. They run
with torch's default thread count (the goals were set for it: at one thread a CPU step is
compute-bound and batching seeds gains nothing, 1.00x measured). The goals:
- an ensemble of E = 4 seeds against 4 solo models stepped one after the other: >= 1.2x;
- against a plain single-model PyTorch loop of the same transformer (benchmarks/plain_transformer.py:
  nn.Linear layers, torch.optim.AdamW, nothing else), 2 layers, 2 heads, d = 64, bijection V = 8,
  batch 32, interleaved, median of several rounds: E = 1 at parity (>= 1.0x its steps/s); E = 4's
  seed-steps per second are reported only (the earlier goal of 3x is
  retired: on a compute-bound CPU the E = 4 step's batched matrix products alone take longer than
  4/3 of a plain step, see docs/training.md);
- against the authors' own model and optimiser (benchmarks/authors_loop.py, needs
  BAYESBENCH_AUTHORS_REPO=a checkout of their code): E = 4 >= 1.5x its seed-steps per second;
- kernel-launching aten ops per step at the paper-bijection preset, E = 8: at least 4x fewer than
  the per-parameter step (torch.optim.AdamW, a per-parameter norm and clip loop, the guard's host
  reads) measured in the same run, and zero host reads (a count, not a timing: always asserted).
GPU goal, asserted only on a GPU: a step of E = 8 paper-scale transformers costs at most 2x a
step of E = 1. Without a GPU the same ratio is measured at the quick size and recorded (a CPU is
compute-bound, so 8 seeds cost about 8x there: the goal is a GPU's).
"""

from __future__ import annotations

import math

import pytest
import torch
from authors_loop import ENV as AUTHORS_ENV
from authors_loop import AuthorsLoop, authors_script
from opcount import count_ops
from plain_transformer import PlainLoop
from timing import check_cpu_goal, interleaved

from bayesbench.tasks import get_task
from bayesbench.training.config import TrainConfig
from bayesbench.training.numerics import member_losses
from bayesbench.training.stream import stack_members
from bayesbench.training.trainer import Trainer

QUICK = dict(n_layer=2, n_head=2, d_model=64, d_ffn=256)
ENSEMBLE_VS_SEQUENTIAL, E1_VS_PLAIN, E4_VS_AUTHORS = 1.2, 1.0, 1.5  # the CPU timing goals (see above)


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
        "speedup_ensemble_vs_sequential": ratio, "goal": f">= {ENSEMBLE_VS_SEQUENTIAL}",
        "goal_status": check_cpu_goal(ratio, ENSEMBLE_VS_SEQUENTIAL, f"E={E} ensemble vs {E} sequential solo models"),
    })
    print(f"\nE={E} ensemble {1 / t_ens:.1f} steps/s vs {E} sequential solo models {1 / t_seq:.1f} rounds/s: "
          f"{ratio:.2f}x (goal >= {ENSEMBLE_VS_SEQUENTIAL}x)")


def test_against_plain_pytorch_loop_cpu(benchmark):
    task = get_task("bijection", V=8)
    cfg = TrainConfig(steps=10**9, batch_size=32, lr=1e-3)
    plain = PlainLoop(task, 0, 32, d=64, layers=2, heads=2, ffn=256)
    one = Trainer(task, "transformer", [0], cfg, model_cfg=QUICK)
    four = Trainer(task, "transformer", list(range(4)), cfg, model_cfg=QUICK)
    t_plain, t_one = interleaved(plain.step, one.train_step, rounds=7, n=10, warmup=5)
    t_plain2, t_four = interleaved(plain.step, four.train_step, rounds=7, n=10, warmup=5)
    benchmark.pedantic(one.train_step, rounds=10, iterations=1)
    e1 = t_plain / t_one
    e4 = 4 * t_plain2 / t_four
    benchmark.extra_info.update({"plain_steps_per_s": 1 / t_plain, "e1_steps_per_s": 1 / t_one,
                                 "e4_seed_steps_per_s": 4 / t_four, "e1_vs_plain": e1, "e4_seed_steps_vs_plain": e4,
                                 "goal": f"e1 >= {E1_VS_PLAIN}; e4 reported only", "threads": torch.get_num_threads(),
                                 "goal_status": check_cpu_goal(e1, E1_VS_PLAIN, "E=1 vs the plain loop")})
    print(f"\nplain loop {1 / t_plain:.1f} steps/s; bayesbench E=1 {1 / t_one:.1f} steps/s ({e1:.2f}x, goal >= "
          f"{E1_VS_PLAIN}); E=4 {4 / t_four:.1f} seed-steps/s ({e4:.2f}x, reported only)")


def test_against_the_authors_script_cpu(benchmark):
    """E = 4 seed-steps per second against the authors' TinyGPT + Adam + clipping at the quick size."""
    script = authors_script()
    if script is None:
        pytest.skip(f"set {AUTHORS_ENV} to a checkout of vishalmisra/bayesian-wind-tunnel to compare with the "
                    "authors' training step")
    task = get_task("bijection", V=8)
    cfg = TrainConfig(steps=10**9, batch_size=32, lr=1e-3)
    theirs = AuthorsLoop(script, task, 0, 32, d=64, layers=2, heads=2)
    four = Trainer(task, "transformer", list(range(4)), cfg, model_cfg=QUICK)
    t_theirs, t_four = interleaved(theirs.step, four.train_step, rounds=7, n=10, warmup=5)
    benchmark.pedantic(four.train_step, rounds=10, iterations=1)
    e4 = 4 * t_theirs / t_four
    benchmark.extra_info.update({"authors_steps_per_s": 1 / t_theirs, "e4_seed_steps_per_s": 4 / t_four,
                                 "e4_seed_steps_vs_authors": e4, "goal": f">= {E4_VS_AUTHORS}",
                                 "threads": torch.get_num_threads(),
                                 "goal_status": check_cpu_goal(e4, E4_VS_AUTHORS, "E=4 vs the authors' step")})
    print(f"\nthe authors' step {1 / t_theirs:.1f} steps/s; bayesbench E=4 {4 / t_four:.1f} seed-steps/s "
          f"({e4:.2f}x, goal >= {E4_VS_AUTHORS})")


def _per_parameter_step(trainer: Trainer, optimizer: torch.optim.Optimizer) -> None:
    """The step as it was before the flat optimiser: host reads of the losses and norms, a loop
    over parameters for the per-member norms and clipping, torch.optim.AdamW (single-tensor)."""
    E = trainer.ensemble
    tokens, header, targets, mask = stack_members([s.next() for s in trainer.streams])
    loss = member_losses(trainer.model(tokens, header), targets, mask)
    values = loss.detach().cpu().tolist()
    live = torch.tensor([math.isfinite(v) for v in values])
    optimizer.zero_grad(set_to_none=True)
    torch.where(live, loss, torch.zeros(())).sum().backward()
    sq = torch.zeros(E)
    for p in trainer.params:
        sq += p.grad.float().pow(2).reshape(E, -1).sum(1)
    norms = sq.sqrt()
    assert all(math.isfinite(n) for n in norms.tolist())
    coef = (1.0 / (norms + 1e-6)).clamp(max=1.0)
    for p in trainer.params:
        p.grad.mul_(coef.view(-1, *([1] * (p.dim() - 1))))
    optimizer.step()


def test_ops_per_step_paper_bijection(benchmark):
    task = get_task("bijection", V=20)
    cfg = TrainConfig(steps=10**9, batch_size=8)
    trainer = Trainer(task, "transformer", list(range(8)), cfg, model_cfg={"size": "paper-bijection"})
    trainer.train_step()
    flat = count_ops(trainer.train_step)
    reference = Trainer(task, "transformer", list(range(8)), cfg, model_cfg={"size": "paper-bijection"})
    reference.model.validate_token_values = True  # the old forward checked the token range (two reads)
    params = reference.params
    for p in params:  # unflatten: torch's AdamW over the parameters themselves
        p.data = p.data.clone()
    torch_adamw = torch.optim.AdamW(params, lr=1e-3, foreach=False)
    _per_parameter_step(reference, torch_adamw)
    old = count_ops(lambda: _per_parameter_step(reference, torch_adamw))
    ratio = old.kernels / flat.kernels
    benchmark.extra_info.update({"kernel_ops_per_step": flat.kernels, "all_ops_per_step": flat.total,
                                 "host_reads_per_step": flat.host_reads,
                                 "per_parameter_step_kernel_ops": old.kernels, "per_parameter_step_all_ops": old.total,
                                 "per_parameter_step_host_reads": old.host_reads, "kernel_op_reduction": ratio,
                                 "goal": ">= 4x fewer kernel ops, 0 host reads"})
    benchmark.pedantic(trainer.train_step, rounds=3, iterations=1)
    print(f"\npaper-bijection E=8: {flat.kernels} kernel ops ({flat.total} with views), {flat.host_reads} host reads "
          f"per step; per-parameter step {old.kernels} ({old.total}), {old.host_reads} host reads: {ratio:.2f}x fewer")
    assert flat.host_reads == 0
    assert ratio >= 4.0, f"goal: >= 4x fewer kernel ops per step than the per-parameter step, got {ratio:.2f}x"


GPU = torch.cuda.is_available()


def test_ensemble_cost_8_vs_1_gpu_goal(benchmark):
    """E = 8 vs E = 1: paper scale on a GPU (goal <= 2x, asserted); quick scale on a CPU (recorded)."""
    if GPU:
        task, device, batch, model_cfg = get_task("bijection", V=20), "cuda", 128, {"size": "paper-bijection"}
        sync, rounds, n = torch.cuda.synchronize, 5, 20
    else:
        task, device, batch, model_cfg = get_task("bijection", V=8), "cpu", 32, QUICK
        sync, rounds, n = (lambda: None), 3, 3
    cfg = TrainConfig(steps=10**9, batch_size=batch, lr=1e-3)
    one = Trainer(task, "transformer", [0], cfg, model_cfg=model_cfg, device=device)
    eight = Trainer(task, "transformer", list(range(8)), cfg, model_cfg=model_cfg, device=device)
    t1, t8 = interleaved(one.train_step, eight.train_step, rounds=rounds, n=n, warmup=2, sync=sync)
    benchmark.pedantic(eight.train_step, rounds=rounds, iterations=1, setup=sync)
    cost = t8 / t1
    benchmark.extra_info.update({"e1_steps_per_s": 1 / t1, "e8_steps_per_s": 1 / t8, "e8_cost_vs_e1": cost,
                                 "goal": "<= 2.0 on a GPU (asserted only there)", "scale": "paper" if GPU else "quick",
                                 "device": torch.cuda.get_device_name() if GPU else "cpu"})
    print(f"\nE=8 {'paper' if GPU else 'quick'}-scale step costs {cost:.2f}x an E=1 step on {device} "
          f"(goal <= 2x on a GPU{'' if GPU else ': recorded, not asserted here'})")
    if GPU:
        assert cost <= 2.0, f"goal: 8 paper-scale seeds cost at most 2x one seed on a GPU, got {cost:.2f}x"
