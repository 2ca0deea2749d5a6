"""Build script: the Python package plus the optional compiled extension `bayesbench._C`.

Metadata, extras and the version scheme are in pyproject.toml (the version comes from git tags
through setuptools-scm); this file decides what only the build machine knows:

- **The extension.** `bayesbench._C` is built from csrc/*.cpp against the torch installed in the
  build environment. CUDA sources (*.cu) are added when torch has CUDA and a toolkit is found;
  override with BAYESBENCH_CUDA=0 (never) or BAYESBENCH_CUDA=1 (always, failing loudly if
  impossible). BAYESBENCH_NO_EXT=1 skips the extension.
- **A build that cannot compile still installs.** No torch in the build environment, no C++
  compiler, or a failed compile: the package is installed without `bayesbench._C` (everything runs
  on the PyTorch reference oracle) and the build prints one line saying so and why.
  BAYESBENCH_REQUIRE_EXT=1 (the Makefile sets it, so CI tests the compiled ops) makes such a build
  fail instead; so does BAYESBENCH_CUDA=1.
- **The torch a wheel needs.** A compiled extension loads only under the torch C++ ABI it was
  built against, so a build that compiles `bayesbench._C` requires exactly the building torch's
  release at run time (`torch==2.13.0` when built with torch 2.13.0+cpu), as torchvision does; a
  build without it requires `torch>=2.4`.
- **One wheel for every Python >= 3.11.** register.cpp uses only torch/library.h and the stable
  Python C API (no pybind11), so the extension is built with `py_limited_api` (abi3, torch >= 2.6)
  as pytorch/extension-cpp does: `_C.abi3.so`, not linked against libtorch_python.
- **The commit.** setuptools-scm writes bayesbench/_version.py (version, commit, dirty) at build
  time. Built from an unpacked sdist it knows the version (PKG-INFO) but not the commit, and from a
  `git archive` export only an abbreviated one: `_carry_commit` hands it the full commit.
"""

from __future__ import annotations

import ast
import glob
import os
import re
import shutil
import sys

from setuptools import find_packages, setup

ROOT = os.path.dirname(os.path.abspath(__file__))
VERSION_FILE = os.path.join(ROOT, "bayesbench", "_version.py")
# Runtime dependencies besides torch (whose requirement depends on the build, above).
DEPENDENCIES = ["numpy>=1.24", "scipy>=1.10", "matplotlib>=3.7", "tqdm>=4.60"]
TORCH_WITHOUT_EXTENSION = "torch>=2.4"
LIMITED_API_TAG = "cp311"  # requires-python >= 3.11: one abi3 wheel for 3.11 and later


def _env_flag(name: str) -> bool | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    return value.lower() not in ("0", "false", "no", "off")


def _say(message: str) -> None:
    """The one line a build prints about the extension (stderr, so pip -v and `python -m build` show it)."""
    print(f"bayesbench: {message}", file=sys.stderr, flush=True)


def _building() -> bool:
    """Whether this run of setup.py builds (a wheel, an editable install) rather than only writing
    metadata or an sdist, so that a decision made here is said once, by the build."""
    return any(cmd in sys.argv for cmd in ("build", "build_ext", "bdist_wheel", "editable_wheel", "develop", "install"))


def _not_built(why: str) -> None:
    """Say in one line that the extension is not built and why; fail instead when it is required."""
    if _env_flag("BAYESBENCH_REQUIRE_EXT") or _env_flag("BAYESBENCH_CUDA"):
        sys.exit(f"bayesbench: the compiled extension bayesbench._C could not be built ({why}), and "
                 "BAYESBENCH_REQUIRE_EXT=1 or BAYESBENCH_CUDA=1 requires it")
    _say(f"the compiled extension bayesbench._C was not built ({why}); bayesbench is installed without it "
         "and runs on the PyTorch reference oracle (correct, slower). See docs/install.md.")


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


def _cxx_compiler_missing() -> str | None:
    """Why no C++ compiler can run (torch's rule: $CXX, else `c++`), or None when one is there."""
    compiler = os.environ.get("CXX") or "c++"
    program = compiler.split()[0]
    if shutil.which(program) is None:
        source = f"CXX={compiler}" if os.environ.get("CXX") else "c++"
        return f"no C++ compiler: {source} is not an executable program on PATH"
    return None


def _build_ext_class(base):
    """torch's BuildExtension, made optional: a failure becomes the one line of `_not_built`."""

    class OptionalBuildExtension(base):
        def run(self):
            missing = _cxx_compiler_missing()
            if missing:
                _not_built(missing)
                self._remove_older_builds(keep_new=False)
                return
            try:
                super().run()
            except Exception as err:  # distutils' CompileError, ninja's RuntimeError, a failing compiler check, ...
                reason = str(err).strip().splitlines()[0].rstrip(".") if str(err).strip() else ""
                _not_built(f"{type(err).__name__}: {reason}; the build output above has the details")
                self._remove_older_builds(keep_new=False)
                return
            self._remove_older_builds(keep_new=True)
            cuda = any(("BAYESBENCH_WITH_CUDA", "1") in e.define_macros for e in self.extensions)
            _say(f"built the compiled extension bayesbench._C ({'CPU and CUDA' if cuda else 'CPU'} kernels)")

        def _remove_older_builds(self, keep_new: bool):
            """An in-place build (editable install) writes _C.abi3.so into the package folder, where an
            older build may lie: a _C.cpython-*.so, which Python would load first, or, when this build
            failed, a _C.abi3.so of older sources. Remove them, so what is loaded is this build, or
            nothing (the reference) as the one line says."""
            if not self.inplace:
                return
            for ext in self.extensions:
                built = os.path.abspath(self.get_ext_fullpath(ext.name))
                stem = os.path.join(os.path.dirname(built), ext.name.rsplit(".", 1)[-1])
                for other in glob.glob(stem + ".*.so") + glob.glob(stem + ".*.pyd"):
                    if not (keep_new and os.path.abspath(other) == built):
                        os.remove(other)

    return OptionalBuildExtension


def extensions() -> tuple[list, dict, list[str], dict]:
    """(ext_modules, cmdclass, install_requires, options) for bayesbench._C, or a pure-Python build."""
    pure = [], {}, [*DEPENDENCIES, TORCH_WITHOUT_EXTENSION], {}
    if _env_flag("BAYESBENCH_NO_EXT"):
        if _building():
            _say("BAYESBENCH_NO_EXT is set: the compiled extension bayesbench._C is not built")
        return pure
    cpp_sources = sorted(glob.glob(os.path.join("csrc", "*.cpp")))
    if not cpp_sources:
        return pure
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError as err:
        if _building():
            _not_built(f"torch is not importable in the build environment: {err}")
        return pure
    from packaging.version import Version

    torch_release = Version(torch.__version__).public  # 2.13.0+cpu -> 2.13.0
    # register.cpp avoids pybind11 (torch/extension.h); from torch 2.6 its headers build under Py_LIMITED_API.
    limited_api = Version(torch_release).release >= (2, 6)

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
            py_limited_api=limited_api,
        )
    else:
        ext = cpp_extension.CppExtension(
            "bayesbench._C",
            cpp_sources,
            include_dirs=include_dirs,
            extra_compile_args={"cxx": cxx_flags},
            extra_link_args=link_flags,
            py_limited_api=limited_api,
        )
    options = {"bdist_wheel": {"py_limited_api": LIMITED_API_TAG}} if limited_api else {}
    requires = [*DEPENDENCIES, f"torch=={torch_release}"]
    return [ext], {"build_ext": _build_ext_class(cpp_extension.BuildExtension)}, requires, options


def _version_file_values() -> dict:
    """The literal assignments of bayesbench/_version.py (read, never executed), or {}."""
    try:
        with open(VERSION_FILE, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError):
        return {}
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return values


def _archival() -> dict:
    """The fields a `git archive` export filled into .git_archival.txt (export-subst), or {} (no
    file, or a checkout's copy whose placeholders were never filled). An empty value stays: an
    empty describe-name means no tag was reachable from the exported commit."""
    values = {}
    try:
        with open(os.path.join(ROOT, ".git_archival.txt"), encoding="utf-8") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and "$Format" not in value:
                    values[key.strip()] = value.strip()
    except OSError:
        pass
    return values


def _fallback_version() -> str:
    """pyproject.toml's [tool.setuptools_scm] fallback_version (read as text: tomllib is 3.11+ only
    and this must not fail a build), or 0.1.0.dev0."""
    try:
        with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
            found = re.search(r'^fallback_version\s*=\s*"([^"]+)"', f.read(), re.MULTILINE)
    except OSError:
        found = None
    return found.group(1) if found else "0.1.0.dev0"


def _pkg_info_version() -> str | None:
    """The Version: of an unpacked sdist's PKG-INFO, or None."""
    try:
        with open(os.path.join(ROOT, "PKG-INFO"), encoding="utf-8") as f:
            for line in f:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    return None


def _carry_commit() -> None:
    """Give setuptools-scm what it cannot see, through its documented SETUPTOOLS_SCM_PRETEND_*
    variables, so the version file of what is built names the version and the commit:

    - in an unpacked sdist (PKG-INFO, no .git) it knows the version but no commit: the sdist's own
      version file, written when the sdist was made, has it;
    - in a `git archive` export it reads the commit only from the tag description, abbreviated, or
      not at all on the tagged commit itself: .git_archival.txt has the full hash;
    - in a `git archive` of a commit no tag reaches (describe-name empty) it would say 0.0: the
      export gets the fallback version with the commit as its local label (0.1.0.dev0+g<commit>).
    """
    if os.path.exists(os.path.join(ROOT, ".git")):
        return  # a checkout: setuptools-scm asks git
    if os.path.exists(os.path.join(ROOT, "PKG-INFO")):
        values = _version_file_values()
        node, dirty = values.get("__commit_node__"), bool(values.get("__dirty__"))
    else:
        archival = _archival()
        node, dirty = archival.get("node") or None, False
        if node and not archival.get("describe-name"):
            os.environ.setdefault("SETUPTOOLS_SCM_PRETEND_VERSION_FOR_BAYESBENCH",
                                  f"{_fallback_version()}+g{node[:9]}")
        node = f"g{node}" if node else None
    if isinstance(node, str) and node:
        os.environ.setdefault("SETUPTOOLS_SCM_PRETEND_METADATA_FOR_BAYESBENCH",
                              f'{{node = "{node}", dirty = {"true" if dirty else "false"}}}')


def _version_without_scm() -> dict:
    """setup()'s version= when setuptools-scm is not installed (a build without isolation in an
    environment that lacks it): the sdist's PKG-INFO, else the version file, else the fallback,
    never setuptools' 0.0.0. With setuptools-scm there, {}: it gives the version."""
    try:
        import setuptools_scm  # noqa: F401  (only whether it is importable)
    except ImportError:
        for source, version in (("PKG-INFO", _pkg_info_version()),
                                ("bayesbench/_version.py", _version_file_values().get("__version__")),
                                ("pyproject.toml's fallback_version", _fallback_version())):
            if version:
                break
        _say(f"setuptools-scm is not installed: version {version}, from {source}")
        return {"version": str(version)}
    return {}


_carry_commit()
ext_modules, cmdclass, install_requires, options = extensions()

setup(
    # bayesbench.report.static holds no Python (the site's stylesheet and script): listed, since
    # setuptools ships data files only of listed packages
    packages=find_packages(include=["bayesbench", "bayesbench.*"]) + ["bayesbench.report.static"],
    ext_modules=ext_modules,
    cmdclass=cmdclass,
    install_requires=install_requires,
    options=options,
    **_version_without_scm(),
)
