"""Build script: the Python package plus the optional compiled extension `bayesbench._C`.

The extension is built only when C++ sources exist under csrc/. CUDA sources (*.cu) are added
when torch has CUDA and a toolkit is found; override with BAYESBENCH_CUDA=0 (never) or
BAYESBENCH_CUDA=1 (always, failing loudly if impossible). BAYESBENCH_NO_EXT=1 skips the
extension entirely.
"""

from __future__ import annotations

import glob
import os
import sys

from setuptools import find_packages, setup

ROOT = os.path.dirname(os.path.abspath(__file__))


def _env_flag(name: str) -> bool | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    return value.lower() not in ("0", "false", "no", "off")


def _want_cuda(torch_module) -> bool:
    from torch.utils.cpp_extension import CUDA_HOME

    forced = _env_flag("BAYESBENCH_CUDA")
    available = bool(torch_module.version.cuda) and CUDA_HOME is not None
    if forced is True and not available:
        sys.exit(
            "BAYESBENCH_CUDA=1 but a CUDA build is impossible: "
            f"torch.version.cuda={torch_module.version.cuda!r}, CUDA_HOME={CUDA_HOME!r}"
        )
    if forced is False:
        return False
    return available


def extensions() -> tuple[list, dict]:
    """Return (ext_modules, cmdclass) for bayesbench._C, or nothing when there is no source."""
    if _env_flag("BAYESBENCH_NO_EXT"):
        return [], {}
    cpp_sources = sorted(glob.glob(os.path.join("csrc", "*.cpp")))
    if not cpp_sources:
        return [], {}
    import torch
    from torch.utils import cpp_extension

    cxx_flags = ["-O3", "-g0", "-std=c++20", "-fopenmp"]
    link_flags = ["-fopenmp"]
    include_dirs = [os.path.join(ROOT, "csrc")]
    if _want_cuda(torch):
        # standalone_check.cu is the torch-free nvcc check of the kernels, not part of the module.
        cu_sources = sorted(p for p in glob.glob(os.path.join("csrc", "*.cu"))
                            if os.path.basename(p) != "standalone_check.cu")
        ext = cpp_extension.CUDAExtension(
            "bayesbench._C",
            cpp_sources + cu_sources,
            include_dirs=include_dirs,
            define_macros=[("BAYESBENCH_WITH_CUDA", "1")],
            # No --use_fast_math: it flushes float32 denormals to zero, which would make a step
            # "impossible" on the GPU but not on the CPU (the kernels are memory-bound anyway).
            extra_compile_args={"cxx": cxx_flags, "nvcc": ["-O3", "-std=c++20"]},
            extra_link_args=link_flags,
        )
    else:
        ext = cpp_extension.CppExtension(
            "bayesbench._C",
            cpp_sources,
            include_dirs=include_dirs,
            extra_compile_args={"cxx": cxx_flags},
            extra_link_args=link_flags,
        )
    return [ext], {"build_ext": cpp_extension.BuildExtension}


ext_modules, cmdclass = extensions()

setup(
    packages=find_packages(include=["bayesbench", "bayesbench.*"]) + ["bayesbench.kernels"],
    package_dir={"bayesbench.kernels": "kernels"},
    ext_modules=ext_modules,
    cmdclass=cmdclass,
)
