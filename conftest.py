"""Shared pytest configuration of tests/ and benchmarks/ (this file sits at the rootdir, so it
applies to both).

Triton kernels run under the interpreter when no GPU is present; TRITON_INTERPRET must be set
before triton is first imported, so it is set here, at collection time.
"""

from __future__ import annotations

import os
import re

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request) -> torch.device:
    return torch.device(request.param)


# ---- GPU runs: BAYESBENCH_REQUIRE_CUDA=1 turns a missing device or extension into failures ------
# On a CPU machine the CUDA cases drop out (DEVICES) and modules that need bayesbench._C skip. On
# the GPU check (scripts/gpu_*.sh) that would make a broken CUDA build read as skips, so there a
# missing device fails the session, the CUDA device is always a test parameter, and any skip whose
# reason names CUDA, a GPU, nvcc or bayesbench._C is reported as a failure.
REQUIRE_CUDA = os.environ.get("BAYESBENCH_REQUIRE_CUDA", "") not in ("", "0")
CUDA_SKIP = re.compile(r"cuda|gpu|nvcc|bayesbench\._C", re.IGNORECASE)
if REQUIRE_CUDA and "cuda" not in DEVICES:
    DEVICES.append("cuda")


def pytest_configure(config) -> None:
    if REQUIRE_CUDA and not torch.cuda.is_available():
        raise pytest.UsageError("BAYESBENCH_REQUIRE_CUDA=1 but torch sees no CUDA device")


def _skip_is_failure(report) -> bool:
    if not (REQUIRE_CUDA and report.skipped) or not isinstance(report.longrepr, tuple):
        return False
    return bool(CUDA_SKIP.search(str(report.longrepr[2])))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if _skip_is_failure(report):
        report.outcome, report.longrepr = ("failed",
                                           f"BAYESBENCH_REQUIRE_CUDA=1: skip of a CUDA case: {report.longrepr[2]}")


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if _skip_is_failure(report):
        report.outcome, report.longrepr = "failed", f"BAYESBENCH_REQUIRE_CUDA=1: module skipped: {report.longrepr[2]}"


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Print each benchmark's extra_info (throughputs, ratios against same-run baselines)."""
    session = getattr(config, "_benchmarksession", None)
    rows = [(b.fullname.split("::")[-1], b.extra_info) for b in getattr(session, "benchmarks", []) if b.extra_info]
    if not rows:
        return
    terminalreporter.section("bayesbench: throughputs and ratios (extra_info)")
    for name, info in sorted(rows):
        terminalreporter.write_line(f"{name}: " + ", ".join(f"{k}={v}" for k, v in info.items()))


# ---- the small sweep file of the sweep tests (tests/sweep/test_run.py) and benchmark -----------
@pytest.fixture(scope="session")
def write_sweep():
    """write(folder, name, steps, archs=..., seeds=...) -> the path of a small TOML sweep file
    written there: bijection, the given archs (default transformer and mlp) and seeds (default 0
    and 1), one seed per job (4 jobs by default), `steps` training steps, a checkpoint every 10
    steps, 64 evaluation sequences."""

    def write(folder, name: str, steps: int, archs: tuple[str, ...] = ("transformer", "mlp"),
              seeds: tuple[int, ...] = (0, 1)) -> str:
        path = os.path.join(str(folder), f"{name}.toml")
        with open(path, "w") as f:
            f.write(f'name = "{name}"\ntasks = ["bijection"]\narchs = [{", ".join(map(repr, archs))}]\n'
                    f"seeds = {list(seeds)}\nensemble = 1\nsteps = {steps}\ncheckpoint_every = 10\n"
                    "eval_sequences = 64\n")
        return path

    return write
