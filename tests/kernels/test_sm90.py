"""Every Triton attention kernel compiles for sm_90 (H100/H200) ahead of time, without a GPU.

`bayesbench.kernels.aot` runs triton.compile with a CUDA GPUTarget (ptxas included) and reads the
cubin's resource usage. Checked: shared memory within the H200's 227 KB per block, and no register
spills in float16/bfloat16 (float32 uses tf32x3, three passes on split operands, and may spill a
little at D = 128). The default run compiles a representative subset (each kernel at its largest
tiles, the register-heaviest full-probe dq causal and not, one float32 case: about 30 s of CPU);
the whole matrix (3 dtypes x D in 16..128 x causal x probe off/stats/full/full-bf16, 180 variants,
about 12 CPU-minutes) runs with BAYESBENCH_SM90_ALL=1 and prints the table kept in
docs/kernels.md (`python -m bayesbench.kernels.aot` prints the same). Registers are recorded as
JUnit properties.
"""

from __future__ import annotations

import os

import pytest

triton = pytest.importorskip("triton")
pytest.importorskip("triton.backends.nvidia", reason="this triton has no NVIDIA backend")

from bayesbench.kernels import aot  # noqa: E402

ALL = os.environ.get("BAYESBENCH_SM90_ALL", "") not in ("", "0")
QUICK = aot.variants(quick=True)


@pytest.fixture(scope="module")
def quick_usage():
    """The subset, compiled once for the module in a subprocess (no TRITON_INTERPRET there)."""
    return dict(zip(QUICK, aot.compile_in_subprocesses(QUICK, arch=90, workers=1)))


def _check(usage, record_property):
    variant = usage.variant
    record_property("registers", usage.registers)
    record_property("spill_bytes", usage.spill_bytes)
    record_property("shared_bytes", usage.shared_bytes)
    print(f"\n{variant.name}: {usage.registers} registers, {usage.spill_bytes} B spilled, "
          f"{usage.shared_bytes / 1024:.1f} KB shared ({usage.seconds:.1f} s)")
    assert 0 < usage.registers <= 255
    assert usage.shared_bytes <= aot.SM90_SMEM_PER_BLOCK, f"{variant.name}: {usage.shared_bytes} B of shared memory"
    if variant.dtype != "fp32":
        assert usage.spill_bytes == 0, f"{variant.name} spills {usage.spill_bytes} bytes per thread"
    return usage


@pytest.mark.parametrize("variant", QUICK, ids=[v.name for v in QUICK])
def test_kernel_compiles_for_sm90(variant, quick_usage, record_property):
    _check(quick_usage[variant], record_property)


@pytest.mark.slow
@pytest.mark.skipif(not ALL, reason="the whole matrix (12 CPU-minutes) runs with BAYESBENCH_SM90_ALL=1")
def test_every_variant_compiles_for_sm90(record_property):
    rows = aot.compile_in_subprocesses(aot.variants(), arch=90, workers=os.cpu_count() or 1)
    failures = []
    for usage in rows:
        try:
            _check(usage, lambda *a: None)
        except AssertionError as err:
            failures.append(str(err))
    print("\n" + aot.markdown(rows))
    assert not failures, failures


def test_variant_matrix_is_complete():
    """The matrix covers the issue's list: 3 dtypes x D in {16, 32, 64, 128} x causal x probe."""
    full = aot.variants()
    assert len(full) == len(set(full)) == 3 * 4 * (1 + 2 * (1 + 2 + 4))
    for kernel, n in (("fwd", 24), ("delta", 12), ("dkdv", 48), ("dq", 96)):
        assert sum(v.kernel == kernel for v in full) == n
    assert set(QUICK) <= set(full)
