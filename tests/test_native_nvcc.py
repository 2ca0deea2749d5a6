"""The CUDA code of bayesbench._C compiles, checked with nvcc on machines without a GPU.

`csrc/standalone_check.cu` instantiates every kernel from `csrc/oracle_kernels.cuh` and needs no
torch, so this runs wherever nvcc is on PATH (CI has it); it is skipped only when nvcc is absent.
The slow test also compiles the torch-facing launcher `csrc/oracle_cuda.cu` against torch's
headers (a CPU wheel ships them, less one generated header that is stubbed here).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CSRC = os.path.join(ROOT, "csrc")
NVCC = shutil.which("nvcc")

pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")


def _nvcc(args, tmp_path):
    cmd = [NVCC, *args]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_kernels_compile_with_nvcc_alone(tmp_path):
    """Device code to PTX (front end and code generation, no ptxas) with only csrc/ included."""
    out = tmp_path / "standalone_check.ptx"
    _nvcc(["-std=c++17", "-ptx", "-I", CSRC, os.path.join(CSRC, "standalone_check.cu"), "-o", str(out)],
          tmp_path)
    ptx = out.read_text()
    for kernel in ("hmm_filter_tiled_kernel", "hmm_filter_generic_kernel", "bijection_kernel", "markov_kernel",
                   "selective_scan_check"):
        assert kernel in ptx


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
