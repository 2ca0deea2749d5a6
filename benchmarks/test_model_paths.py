"""Training-step speed of the models' fast paths against their plain PyTorch references.

Each pair is timed interleaved in the same process (one thread), so load hits both alike; the
ratio goes to extra_info. Fast paths: the LSTM/GRU fused backward-through-time
(`set_fused(True)` vs the autograd loop) and Mamba's compiled selective scan (`scan="native"`
vs the PyTorch time loop, when bayesbench._C is built). Sizes: the quick preset's sticky
tunnel (V = 8, L = 32), 3 seeds x 32 sequences, models matched to the quick transformer.
Report-only: the ratios are recorded (BENCHMARKS.md), no speed goal is stated or asserted.
"""

from __future__ import annotations

import pytest
from timing import interleaved

from bayesbench.models.scan import native_scan_available
from bayesbench.tasks import get_task
from bayesbench.training.config import TrainConfig
from bayesbench.training.trainer import Trainer

MATCH = 70152  # the quick transformer's parameters on sticky V=8 L=32


def _pair(fast: Trainer, slow: Trainer) -> tuple[float, float]:
    """Median seconds per training step of fast and slow, timed in alternating rounds."""
    return interleaved(fast.train_step, slow.train_step, rounds=3, n=5, warmup=2)


def _trainer(arch: str, **model_cfg) -> Trainer:
    task = get_task("sticky", V=8, L=32)
    cfg = TrainConfig(steps=10**6, batch_size=32)
    return Trainer(task, arch, [0, 1, 2], cfg, model_cfg={"match_params": MATCH, "n_layer": 2, **model_cfg})


@pytest.mark.parametrize("arch", ["lstm", "gru"])
def test_fused_rnn_backward(benchmark, arch, one_thread):
    fast, slow = _trainer(arch), _trainer(arch)
    slow.model.set_fused(False)
    t_fast, t_slow = _pair(fast, slow)
    benchmark.pedantic(fast.train_step, rounds=5, iterations=1)
    benchmark.extra_info.update({"fused_ms": 1e3 * t_fast, "autograd_loop_ms": 1e3 * t_slow,
                                 "speedup": t_slow / t_fast})


def test_native_selective_scan(benchmark, one_thread):
    if not native_scan_available():
        pytest.skip("bayesbench._C is not built (no native selective scan)")
    fast, slow = _trainer("mamba", d_state=8, scan="native"), _trainer("mamba", d_state=8, scan="sequential")
    t_fast, t_slow = _pair(fast, slow)
    benchmark.pedantic(fast.train_step, rounds=5, iterations=1)
    benchmark.extra_info.update({"native_ms": 1e3 * t_fast, "sequential_ms": 1e3 * t_slow,
                                 "speedup": t_slow / t_fast})
