"""Training-step wall time of the issue-43 architectures against the transformer, and each one's
fast form (chunked, FFT, parallel) against its plain recurrent reference.

Sizes: the quick preset's sticky tunnel (V = 8, L = 32), 3 seeds x 32 sequences, every model
capacity-matched to the quick transformer (2 layers, d_model 64, d_ffn 128), one thread. Per
architecture, two ratios, each timed interleaved in one process (`timing.interleaved`: alternating
rounds, the median kept) so load hits both sides alike:
- step_ratio: seconds per training step (forward, backward, AdamW) over the transformer's;
- reference_ratio: forward + backward of every sequence-mixing layer through its recurrent
  reference (`recurrent_step` looped over positions, models/state.py) over the same through its
  fast `forward`, on the layers' inputs of one batch.
Report-only: the numbers go to extra_info and stdout (BENCHMARKS.md rows come from a run of this
file), no goal is asserted. Run: `OMP_NUM_THREADS=1 pytest benchmarks/test_zoo_speed.py -s --benchmark-disable`.
"""

from __future__ import annotations

import pytest
import torch
from timing import interleaved

from bayesbench.models.state import capture_inputs, fast_form, mixers, run_steps
from bayesbench.tasks import get_task
from bayesbench.training.config import TrainConfig
from bayesbench.training.trainer import Trainer

QUICK_TRANSFORMER = {"n_layer": 2, "n_head": 2, "d_model": 64, "d_ffn": 128}
ARCHS = ["mamba2", "deltanet", "gated-deltanet", "gla", "retnet", "rwkv7", "hyena", "based", "sliding-window", "hybrid"]


def _trainer(arch: str) -> Trainer:
    from bayesbench.models import count_params

    task = get_task("sticky", V=8, L=32)
    target = count_params("transformer", task, **QUICK_TRANSFORMER)
    model_cfg = QUICK_TRANSFORMER if arch == "transformer" else {"match_params": target}
    return Trainer(task, arch, [0, 1, 2], TrainConfig(steps=10**6, batch_size=32), model_cfg=model_cfg)


def _mixers_pass(model, inputs: dict, reference: bool) -> None:
    """Forward and backward of every mixer on its captured input, fast form or recurrent reference."""
    for name, layer in mixers(model):
        x = inputs[name].detach().requires_grad_()
        y = run_steps(layer, x)[0] if reference else fast_form(layer)(x)
        y.sum().backward()


@pytest.mark.parametrize("arch", ARCHS)
def test_zoo_step_and_reference_speed(benchmark, arch, one_thread):
    trainer, base = _trainer(arch), _trainer("transformer")
    t_arch, t_transformer = interleaved(trainer.train_step, base.train_step, rounds=3, n=3, warmup=1)
    model = trainer.model
    task = get_task("sticky", V=8, L=32)
    batch = task.sample(32, torch.Generator().manual_seed(0))
    tokens = batch.tokens.expand(3, -1, -1).contiguous()
    inputs = capture_inputs(model, tokens)
    t_fast, t_ref = interleaved(lambda: _mixers_pass(model, inputs, False), lambda: _mixers_pass(model, inputs, True),
                                rounds=3, n=1, warmup=1)
    benchmark.pedantic(trainer.train_step, rounds=2, iterations=1)
    info = {"step_ms": 1e3 * t_arch, "transformer_step_ms": 1e3 * t_transformer, "step_ratio": t_arch / t_transformer,
            "mixers_fast_ms": 1e3 * t_fast, "mixers_reference_ms": 1e3 * t_ref, "reference_ratio": t_ref / t_fast,
            "params": model.num_params()}
    benchmark.extra_info.update(info)
    print(f"\n{arch}: step {info['step_ms']:.1f} ms vs transformer {info['transformer_step_ms']:.1f} ms "
          f"(x{info['step_ratio']:.2f}); mixers fast {info['mixers_fast_ms']:.1f} ms vs recurrent reference "
          f"{info['mixers_reference_ms']:.1f} ms (x{info['reference_ratio']:.1f}); {info['params']} params")
