"""Speed of the discrete oracles of issue 42 (markov-k, vomc) against their plain float64
references, as ratios measured in one run.

CPU, float64, one thread (as benchmarks/test_continuous_oracles.py, for the same reason: the
shared 2-core VM). Both references are plain Python loops over sequences (linear in B), so they
are timed on a slice and scaled.

- `ctw_predictive` (context-tree weighting, the batched PyTorch path) at B = 65536 binary
  sequences of L = 64, depth D = 3, against `ctw_predictive_reference` (P_w of the root
  recomputed from counts for every prefix and candidate symbol) on the first 16 sequences,
  scaled by 4096.
- the compiled op (`ops.ctw_predictive`, csrc/ctw.h) at the same sizes against both: the batched
  PyTorch path at the full batch (interleaved, median of 3, each side once per round) and the
  plain reference on its slice (scaled as above). Skipped when bayesbench._C is not built.
- `markov_k_predictive` at B = 65536, V = 3, order 2, L = 64, against
  `markov_k_predictive_reference` (per-sequence counting) on the first 256, scaled by 256.

Both sides are timed in alternating rounds (timing.py `interleaved`, median of 3) after their
outputs are compared on the slice. Goal: >= 10x each against the reference, reported with `check_cpu_goal` (asserted
only with BAYESBENCH_ASSERT_CPU_GOALS=1). A few minutes on the shared 2-core VM.

    pytest benchmarks/test_ctw_oracles.py -s
"""

from __future__ import annotations

import pytest
import torch
from timing import check_cpu_goal, interleaved, oracle_speedup

from bayesbench import ops
from bayesbench.oracle.ctw import ctw_predictive, ctw_predictive_reference
from bayesbench.oracle.markov_k import markov_k_predictive, markov_k_predictive_reference

B = 65536
L = 64
THREADS = 1
F64 = torch.float64


@pytest.fixture(autouse=True)
def _threads():
    before = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    yield
    torch.set_num_threads(before)


def _ratio(benchmark, name: str, fast, reference, scale: int, **sizes) -> float:
    return oracle_speedup(benchmark, name, fast, reference, scale, threads=THREADS, batch=B, L=L, **sizes)


def test_ctw_fast_path_vs_reference(benchmark):
    V, D, part = 2, 3, 16
    seqs = torch.randint(0, V, (B, L), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(ctw_predictive(seqs[:part], V, D, dtype=F64, backend="reference"),
                               ctw_predictive_reference(seqs[:part], V, D), rtol=1e-10, atol=1e-12)
    _ratio(benchmark, "ctw_predictive", lambda: ctw_predictive(seqs, V, D, dtype=F64, backend="reference"),
           lambda: ctw_predictive_reference(seqs[:part], V, D), B // part, V=V, depth=D)


@pytest.mark.skipif(not ops.available("ctw_predictive"), reason="bayesbench._C is not built")
def test_ctw_compiled_op_vs_fast_path_and_reference(benchmark):
    """The compiled op against the batched PyTorch path (full batch, interleaved) and against the
    plain reference (slice, scaled), in one run; goal >= 10x over the PyTorch path."""
    V, D, part = 2, 3, 16
    seqs = torch.randint(0, V, (B, L), generator=torch.Generator().manual_seed(0))
    native = lambda: ops.ctw_predictive(seqs, V, D, 0.5, 0.5, F64)  # noqa: E731
    torch_path = lambda: ctw_predictive(seqs, V, D, dtype=F64, backend="reference")  # noqa: E731
    torch.testing.assert_close(native(), torch_path(), rtol=1e-10, atol=1e-12)
    native_s, torch_s = interleaved(native, torch_path, rounds=3, n=1)
    ratio = torch_s / native_s
    status = check_cpu_goal(ratio, 10.0, "ctw_predictive compiled op vs the PyTorch path")
    benchmark.extra_info.update(native_vs_torch_path=ratio, torch_path_s=torch_s, native_s_vs_torch=native_s,
                                native_vs_torch_goal_status=status)
    print(f"\nctw_predictive B={B} L={L} V={V} depth={D}: compiled op {native_s:.3f} s; PyTorch path "
          f"{torch_s:.2f} s: {ratio:.1f}x (goal >= 10x: {status})")
    _ratio(benchmark, "ctw_predictive (compiled op)", native, lambda: ctw_predictive_reference(seqs[:part], V, D),
           B // part, V=V, depth=D)


def test_markov_k_fast_path_vs_reference(benchmark):
    V, k, part = 3, 2, 256
    seqs = torch.randint(0, V, (B, L), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(markov_k_predictive(seqs[:part], V, k, dtype=F64),
                               markov_k_predictive_reference(seqs[:part], V, k), rtol=0, atol=1e-14)
    _ratio(benchmark, "markov_k_predictive", lambda: markov_k_predictive(seqs, V, k, dtype=F64),
           lambda: markov_k_predictive_reference(seqs[:part], V, k), B // part, V=V, order=k)
