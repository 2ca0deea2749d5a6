"""Speed of the compiled oracle (bayesbench._C) against its baselines, as ratios from one run.

CPU (2 threads): B = 65536 HMMs, L = 50 steps, S = V = 5, float32, against the PyTorch reference
and a vectorised numpy forward pass; goal >= 10x both. Also the Markov predictive and the
bijection posterior against their references. GPU (skipped without one): 2^20 HMMs x 50 steps
against the memory-bandwidth floor (the bytes the op must read and write, moved at the speed of a
device-to-device copy); goal within 1.5x of the floor at peak bandwidth. The GPU goal is
asserted on a GPU; the CPU goal, like every CPU timing goal here, is reported and asserted only
with BAYESBENCH_ASSERT_CPU_GOALS=1 (benchmarks/timing.py: on a shared 2-core machine a second job
takes the core the native op's second thread needs, and the ratio to single-threaded numpy fell
to 8.9x on 2026-12-01 while another test suite ran); the Markov and bijection rows have no goal
and are report-only. Ratios go into benchmark.extra_info and are printed.

    pytest benchmarks/test_oracle_speed.py -s
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from timing import best_of, check_cpu_goal

_C = pytest.importorskip(
    "bayesbench._C",
    reason="the compiled extension bayesbench._C is not built (pip install --no-build-isolation -e .)",
)

from bayesbench import ops  # noqa: E402
from bayesbench.oracle import (  # noqa: E402
    bijection_posterior_reference,
    hmm_filter_reference,
    markov_predictive_reference,
)

B, L, S, V = 65536, 50, 5, 5
THREADS = 2


def _rows(shape, g, dtype=torch.float32):
    x = torch.rand(shape, generator=g, dtype=torch.float64) + 1e-3
    return (x / x.sum(-1, keepdim=True)).to(dtype)


@pytest.fixture(scope="module")
def hmm_inputs():
    torch.set_num_threads(THREADS)
    g = torch.Generator().manual_seed(0)
    return _rows((B, S, S), g), _rows((B, S, V), g), torch.randint(0, V, (B, L), generator=g)


def numpy_forward(trans: np.ndarray, emit: np.ndarray, obs: np.ndarray):
    """The scaled forward pass vectorised over the batch in numpy (the baseline to beat).

    Batch-last layout so every per-step operation is a contiguous array op over B.
    """
    B, S, _ = trans.shape
    L = obs.shape[1]
    tr = np.ascontiguousarray(trans.transpose(1, 2, 0))  # [S, S, B]
    lik = np.take_along_axis(emit, obs[:, None, :].repeat(S, 1), axis=2)  # [B, S, L]
    lik = np.ascontiguousarray(lik.transpose(2, 1, 0))  # [L, S, B]
    post = np.empty((L, S, B), dtype=trans.dtype)
    loglik = np.zeros(B)
    belief = np.full((S, B), 1.0 / S, dtype=trans.dtype)
    for t in range(L):
        prior = belief if t == 0 else np.einsum("ib,ijb->jb", belief, tr)
        joint = prior * lik[t]
        norm = joint.sum(0)
        belief = joint / norm
        loglik += np.log(norm.astype(np.float64))
        post[t] = belief
    return post.transpose(2, 0, 1), loglik


def _report(benchmark, name: str, native_s: float, items: int, nbytes: int, baselines: dict[str, float]):
    info = {"native_s": native_s, "items_per_s": items / native_s, "GB_per_s": nbytes / native_s / 1e9}
    for base, seconds in baselines.items():
        info[f"{base}_s"] = seconds
        info[f"speedup_vs_{base}"] = seconds / native_s
    benchmark.extra_info.update(info)
    ratios = ", ".join(f"{info[f'speedup_vs_{b}']:.1f}x vs {b} ({s * 1e3:.1f} ms)" for b, s in baselines.items())
    print(f"\n{name}: native {native_s * 1e3:.2f} ms ({items / native_s / 1e6:.1f} M steps/s, "
          f"{info['GB_per_s']:.2f} GB/s): {ratios}")
    return info


def _hmm_bytes(b, l, s, v, obs_itemsize, float_itemsize=4):
    reads = b * (s * s + s * v) * float_itemsize + b * l * obs_itemsize
    writes = b * l * s * float_itemsize + b * 16  # posteriors, loglik and dead step
    return reads + writes


# ---- CPU: the HMM filter ------------------------------------------------------------------------

def test_hmm_cpu_reference(benchmark, hmm_inputs):
    benchmark.extra_info.update(B=B, L=L, S=S, V=V, threads=THREADS)
    benchmark.pedantic(hmm_filter_reference, args=hmm_inputs, rounds=2, iterations=1)


def test_hmm_cpu_numpy(benchmark, hmm_inputs):
    trans, emit, obs = (x.numpy() for x in hmm_inputs)
    post, loglik = numpy_forward(trans[:64], emit[:64], obs[:64])  # it is the same computation
    ref = hmm_filter_reference(*(x[:64] for x in hmm_inputs))
    np.testing.assert_allclose(post, ref[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(loglik, ref[1].numpy(), atol=1e-3)
    benchmark.extra_info.update(B=B, L=L, S=S, V=V)
    benchmark.pedantic(numpy_forward, args=(trans, emit, obs), rounds=5, iterations=1, warmup_rounds=1)


def test_hmm_cpu_native(benchmark, hmm_inputs):
    """Goal: >= 10x the reference and numpy. The ratios come from interleaved timings in this
    test (best of each), so a machine whose load changes during the run biases neither side."""
    trans, emit, obs = hmm_inputs
    arrays = tuple(x.numpy() for x in hmm_inputs)
    run_native = lambda: ops.hmm_filter(trans, emit, obs)  # noqa: E731
    run_native()
    best = {"reference": best_of(lambda: hmm_filter_reference(*hmm_inputs), 1), "numpy": float("inf"),
            "native": float("inf")}
    for _ in range(8):
        best["numpy"] = min(best["numpy"], best_of(lambda: numpy_forward(*arrays), 1))
        best["native"] = min(best["native"], best_of(run_native, 10))
    benchmark.extra_info.update(B=B, L=L, S=S, V=V, threads=THREADS, dtype="float32")
    benchmark.pedantic(run_native, rounds=20, iterations=1, warmup_rounds=1)
    info = _report(benchmark, f"hmm_filter CPU B={B} L={L} S=V={S}", best["native"], B * L,
                   _hmm_bytes(B, L, S, V, obs.element_size()), {k: best[k] for k in ("reference", "numpy")})
    for base in ("reference", "numpy"):  # a CPU timing goal: asserted with BAYESBENCH_ASSERT_CPU_GOALS=1
        benchmark.extra_info[f"goal_status_vs_{base}"] = check_cpu_goal(
            info[f"speedup_vs_{base}"], 10, f"hmm_filter native vs {base}")


# ---- CPU: the counting and bijection posteriors ----------------------------------------------------

def test_markov_cpu_native(benchmark):
    torch.set_num_threads(THREADS)
    b, l, v = 8192, 50, 5
    seq = torch.randint(0, v, (b, l), generator=torch.Generator().manual_seed(1))
    ref_s = best_of(lambda: markov_predictive_reference(seq, v, 1.0), 2)
    benchmark.pedantic(ops.markov_predictive, args=(seq, v, 1.0), rounds=20, iterations=1, warmup_rounds=1)
    _report(benchmark, f"markov_predictive CPU B={b} L={l} V={v}", benchmark.stats.stats.min, b * l,
            b * l * (8 + 4 * v), {"reference": ref_s})


def test_bijection_cpu_native(benchmark):
    torch.set_num_threads(THREADS)
    b, l, v = 16384, 20, 20
    g = torch.Generator().manual_seed(2)
    keys = torch.randint(0, v, (b, l), generator=g)
    values = torch.argsort(torch.rand(b, v, generator=g), dim=1).gather(1, keys)
    ref_s = best_of(lambda: bijection_posterior_reference(keys, values, v), 2)
    benchmark.pedantic(ops.bijection_posterior, args=(keys, values, v), rounds=20, iterations=1,
                       warmup_rounds=1)
    _report(benchmark, f"bijection_posterior CPU B={b} L={l} V={v}", benchmark.stats.stats.min, b * l,
            b * l * (16 + 4 * v), {"reference": ref_s})


# ---- GPU: the HMM filter against the memory-bandwidth floor -----------------------------------------

def _cuda_seconds(fn, iters: int = 20, repeat: int = 3) -> float:
    """Best mean time of `iters` back-to-back calls, by CUDA events."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(repeat):
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / iters)
    return best


def measure_hmm_gpu(obs_dtype: torch.dtype = torch.int64, b: int = 1 << 20, l: int = 50, s: int = 5,
                    v: int = 5) -> dict:
    """Time the CUDA hmm_filter on b HMMs and compare it with the memory-bandwidth floor.

    Bytes: trans and emit read once, obs read once, posteriors, loglik and dead step written once.
    Floors: those bytes at the device's peak DRAM bandwidth (from its memory clock and bus width),
    and at the speed of a device-to-device copy (what a streaming kernel achieves in practice).
    """
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.rand((b, s, s + v), generator=g, device=dev) + 1e-3
    trans = (x[..., :s] / x[..., :s].sum(-1, keepdim=True)).contiguous()
    emit = (x[..., s:] / x[..., s:].sum(-1, keepdim=True)).contiguous()
    obs = torch.randint(0, v, (b, l), generator=g, device=dev).to(obs_dtype)
    del x

    n = 4096  # correctness of this very launch configuration, against the reference
    post, _, dead = ops.hmm_filter(trans, emit, obs)
    want = hmm_filter_reference(trans[:n], emit[:n], obs[:n])
    torch.testing.assert_close(post[:n], want[0], atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(post[-n:], hmm_filter_reference(trans[-n:], emit[-n:], obs[-n:])[0],
                               atol=2e-5, rtol=1e-4)
    assert bool((dead == -1).all())
    del post, dead

    nbytes = _hmm_bytes(b, l, s, v, obs.element_size())
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device=dev)  # a copy reads and writes nbytes/2
    dst = torch.empty_like(src)
    copy_s = _cuda_seconds(functools.partial(dst.copy_, src))
    del src, dst
    native_s = _cuda_seconds(lambda: ops.hmm_filter(trans, emit, obs))
    ref_s = _cuda_seconds(lambda: hmm_filter_reference(trans, emit, obs), iters=2, repeat=2)
    props = torch.cuda.get_device_properties(dev)
    bus, clock = getattr(props, "memory_bus_width", 0), getattr(props, "memory_clock_rate", 0)  # bits, kHz
    peak = 2 * bus / 8 * clock * 1e3 if bus and clock else float("nan")
    info = {
        "device": props.name, "B": b, "L": l, "S": s, "V": v, "obs_dtype": str(obs_dtype), "bytes": nbytes,
        "native_s": native_s, "native_GB_per_s": nbytes / native_s / 1e9, "steps_per_s": b * l / native_s,
        "peak_GB_per_s": peak / 1e9, "floor_s": nbytes / peak, "ratio_to_floor": native_s * peak / nbytes,
        "copy_s": copy_s, "copy_GB_per_s": nbytes / copy_s / 1e9, "ratio_to_copy": native_s / copy_s,
        "reference_s": ref_s, "speedup_vs_reference": ref_s / native_s,
    }
    print(f"\nhmm_filter CUDA {props.name} B={b} L={l} S=V={s} obs {obs_dtype}: {nbytes / 1e9:.3f} GB moved; "
          f"native {native_s * 1e3:.3f} ms = {info['native_GB_per_s']:.0f} GB/s; floor at peak "
          f"{info['peak_GB_per_s']:.0f} GB/s {info['floor_s'] * 1e3:.3f} ms -> {info['ratio_to_floor']:.2f}x; "
          f"copy {copy_s * 1e3:.3f} ms -> {info['ratio_to_copy']:.2f}x; "
          f"{info['speedup_vs_reference']:.0f}x vs the PyTorch reference ({ref_s * 1e3:.1f} ms)")
    return info


@pytest.mark.gpu
@pytest.mark.skipif(not (torch.cuda.is_available() and _C.WITH_CUDA),
                    reason="needs a CUDA device and bayesbench._C built with CUDA")
@pytest.mark.parametrize("obs_dtype", [torch.int64, torch.int32])
def test_hmm_gpu_bandwidth(benchmark, obs_dtype):
    """Goal: within 1.5x of the floor at peak DRAM bandwidth (H200, 4.8 TB/s: floor 0.35 ms with
    int64 observations, 0.31 ms with int32; goal 0.53 / 0.46 ms)."""
    info = measure_hmm_gpu(obs_dtype)
    benchmark.extra_info.update(info)
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(1)
    trans = torch.full((1 << 20, 5, 5), 0.2, device=dev)
    obs = torch.randint(0, 5, (1 << 20, 50), generator=g, device=dev).to(obs_dtype)
    benchmark.pedantic(lambda: (ops.hmm_filter(trans, trans, obs), torch.cuda.synchronize()),
                       rounds=10, iterations=1, warmup_rounds=1)
    assert info["ratio_to_floor"] <= 1.5, f"goal: within 1.5x of the bandwidth floor, got {info['ratio_to_floor']:.2f}x"


if __name__ == "__main__":  # without pytest-benchmark: python benchmarks/test_oracle_speed.py [out.json]
    import json
    import sys

    results = [measure_hmm_gpu(d) for d in (torch.int64, torch.int32)]
    text = json.dumps(results, indent=2)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(text + "\n")
    else:
        print(text)
