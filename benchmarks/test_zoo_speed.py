"""Training-step wall time of the issue-43 recurrent zoo (mamba2, deltanet, gated-deltanet, gla,
retnet) against the transformer, and of each one's chunked forward against its plain recurrent
reference (`recurrent_step` looped over positions, the recurrent-step protocol's truth).

Each pair is timed interleaved in the same process (one thread; `timing.interleaved`), so load
hits both alike; the ratios go to extra_info and are printed. Sizes: the quick preset's sticky
tunnel (V = 8, L = 32), 3 seeds x 32 sequences, every architecture capacity-matched to the quick
transformer (its own `match` defaults). Report-only: no speed goal is stated or asserted.
Run: `OMP_NUM_THREADS=1 pytest benchmarks/test_zoo_speed.py -s --benchmark-disable`.
"""

from __future__ import annotations

import types

import pytest
import torch
from timing import interleaved
from torch import Tensor, nn

from bayesbench.models import count_params
from bayesbench.tasks import get_task
from bayesbench.training.config import TrainConfig
from bayesbench.training.trainer import Trainer

ARCHS = ["mamba2", "deltanet", "gated-deltanet", "gla", "retnet"]
QUICK_TRANSFORMER = {"n_layer": 2, "n_head": 2, "d_model": 64, "d_ffn": 128}


def _task():
    return get_task("sticky", V=8, L=32)


def _trainer(arch: str, model_cfg: dict) -> Trainer:
    return Trainer(_task(), arch, [0, 1, 2], TrainConfig(steps=10**6, batch_size=32), model_cfg=model_cfg)


def _matched(arch: str) -> Trainer:
    return _trainer(arch, {"match_params": count_params("transformer", _task(), **QUICK_TRANSFORMER)})


def _looped_forward(self: nn.Module, x: Tensor) -> Tensor:
    """The mixer's forward as its recurrent_step looped over positions (the reference)."""
    state, out = None, []
    for t in range(x.shape[2]):
        y, state = self.recurrent_step(x[:, :, t], state)
        out.append(y)
    return torch.stack(out, dim=2)


def _as_recurrent(trainer: Trainer) -> Trainer:
    """Every mixer of the trainer's model runs its recurrent reference instead of the chunked form."""
    for module in trainer.model.modules():
        if hasattr(module, "recurrent_step"):
            module.forward = types.MethodType(_looped_forward, module)
    return trainer


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("arch", ARCHS)
def test_step_time_against_the_transformer(benchmark, arch, one_thread):
    mine, reference = _matched(arch), _trainer("transformer", QUICK_TRANSFORMER)
    t_mine, t_ref = interleaved(mine.train_step, reference.train_step, rounds=3, n=5, warmup=2)
    benchmark.pedantic(mine.train_step, rounds=3, iterations=1)
    info = {"arch_ms": 1e3 * t_mine, "transformer_ms": 1e3 * t_ref, "ratio_to_transformer": t_mine / t_ref,
            "params": mine.model.num_params(), "transformer_params": reference.model.num_params()}
    benchmark.extra_info.update(info)
    print(f"\n{arch}: {info}")


@pytest.mark.parametrize("arch", ARCHS)
def test_chunked_against_the_recurrent_reference(benchmark, arch, one_thread):
    chunked, looped = _matched(arch), _as_recurrent(_matched(arch))
    t_chunked, t_looped = interleaved(chunked.train_step, looped.train_step, rounds=3, n=3, warmup=1)
    benchmark.pedantic(chunked.train_step, rounds=3, iterations=1)
    info = {"chunked_ms": 1e3 * t_chunked, "recurrent_ms": 1e3 * t_looped, "speedup": t_looped / t_chunked}
    benchmark.extra_info.update(info)
    print(f"\n{arch}: {info}")
