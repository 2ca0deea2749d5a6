"""The CUDA code of bayesbench._C compiles, checked with nvcc on machines without a GPU.

`csrc/standalone_check.cu` instantiates every kernel from `csrc/oracle_kernels.cuh` and needs no
torch, so this runs wherever nvcc is on PATH (CI has it); it is skipped only when nvcc is absent.
It is compiled for sm_90 (H100/H200) through ptxas with `-Xptxas -v`: no spills, registers recorded.
The slow test also compiles the torch-facing launcher `csrc/oracle_cuda.cu` against torch's
headers (a CPU wheel ships them, less one generated header that is stubbed here).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sysconfig

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CSRC = os.path.join(ROOT, "csrc")
NVCC = shutil.which("nvcc")

needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")


def _nvcc(args, tmp_path):
    cmd = [NVCC, *args]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


# Device functions that ptxas reports (the kernels, and the selective-scan check).
KERNELS = ("hmm_filter_tiled_kernel", "hmm_filter_generic_kernel", "bijection_kernel", "markov_kernel",
           "ctw_kernel", "selective_scan_check")


def ptxas_usage(stderr: str) -> list[dict]:
    """Per function: demangled-ish name, registers, spill stores/loads and stack bytes, from
    `nvcc -Xptxas -v` (lines "Compiling entry function 'NAME' for 'sm_90'", "N bytes stack frame,
    N bytes spill stores, N bytes spill loads", "Used N registers, ...")."""
    rows, current = [], None
    for line in stderr.splitlines():
        m = re.search(r"Compiling entry function '(\S+)' for '(sm_\d+)'", line)
        if m:
            current = {"function": m.group(1), "arch": m.group(2)}
            rows.append(current)
            continue
        if current is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            current.update(stack=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            current["registers"] = int(m.group(1))
    return rows


@needs_nvcc
def test_kernels_compile_for_sm90_without_spills(tmp_path, record_property):
    """Every kernel compiled for sm_90 (front end, code generation and ptxas), with only csrc/
    included: no register spills; registers per kernel are printed and recorded."""
    out = tmp_path / "standalone_check.o"
    proc = _nvcc(["-std=c++17", "-O3", "-arch=sm_90", "-Xptxas", "-v", "-c", "-I", CSRC,
                  os.path.join(CSRC, "standalone_check.cu"), "-o", str(out)], tmp_path)
    rows = ptxas_usage(proc.stderr + proc.stdout)
    for kernel in KERNELS:
        assert any(kernel in r["function"] for r in rows), f"{kernel} not compiled"
    print()
    for r in rows:
        name = next((k for k in KERNELS if k in r["function"]), r["function"])
        print(f"{r['arch']} {name} ({r['function'][:60]}): {r.get('registers')} registers, "
              f"{r.get('stack', 0)} B stack, {r.get('spill_stores', 0)} B spill stores")
        record_property(r["function"], r.get("registers"))
        assert "registers" in r, r
        assert r.get("spill_stores", 0) == 0 and r.get("spill_loads", 0) == 0, r


COPY_RUNS_CHECK = r"""
#include <cstdio>
#include <vector>
#include "hmm_filter.h"
// Every (threads, rows, span, strides) of a small grid: the threads together must copy exactly
// what the direct loop copies (each element once), leaving padding untouched.
int main() {
  for (int threads : {1, 3, 32, 64}) for (int rows = 0; rows <= 9; ++rows) for (int span = 1; span <= 70; span += 3)
  for (int pad : {0, 1, 5}) {
    const int src_stride = span + pad; const long dst_stride = span + 2 * pad + 1;
    std::vector<int> src(rows * src_stride + 1), dst(rows * dst_stride + 1, -1), want(dst);
    for (size_t i = 0; i < src.size(); ++i) src[i] = int(i) * 7 + 1;
    for (int q = 0; q < rows; ++q) for (int r = 0; r < span; ++r) want[q * dst_stride + r] = src[q * src_stride + r];
    for (int t = 0; t < threads; ++t)
      bb::copy_runs(dst.data(), dst_stride, src.data(), src_stride, rows, span, t, threads);
    if (dst != want) {
      std::printf("mismatch threads=%d rows=%d span=%d pad=%d\n", threads, rows, span, pad);
      return 1;
    }
  }
  std::puts("ok");
  return 0;
}
"""


def test_copy_runs_matches_the_direct_loop(tmp_path):
    """The division-free strided copy of the tiled CUDA HMM kernel, run on the host (the routine
    is __host__ __device__; g++ or nvcc's host compiler builds it)."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    src = tmp_path / "copy_runs.cpp"
    src.write_text(COPY_RUNS_CHECK)
    exe = tmp_path / "copy_runs"
    build = subprocess.run([cxx, "-std=c++17", "-O1", "-I", CSRC, str(src), "-o", str(exe)], capture_output=True,
                           text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


@needs_nvcc
@pytest.mark.slow
def test_cuda_launcher_compiles_against_torch_headers(tmp_path):
    torch = pytest.importorskip("torch")
    include = os.path.join(os.path.dirname(torch.__file__), "include")
    if not os.path.exists(os.path.join(include, "c10", "cuda", "CUDAStream.h")):
        pytest.skip("this torch install has no c10/cuda headers")
    stub = tmp_path / "stub"
    if not os.path.exists(os.path.join(include, "c10", "cuda", "impl", "cuda_cmake_macros.h")):
        (stub / "c10" / "cuda" / "impl").mkdir(parents=True)
        (stub / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").write_text(
            "#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    includes = [CSRC, include, os.path.join(include, "torch", "csrc", "api", "include"), str(stub),
                sysconfig.get_paths()["include"]]
    args = ["-std=c++20", "-DBAYESBENCH_WITH_CUDA=1", "-ptx", "-o", str(tmp_path / "oracle_cuda.ptx")]
    for path in includes:
        args += ["-I", path]
    _nvcc([*args, os.path.join(CSRC, "oracle_cuda.cu")], tmp_path)
