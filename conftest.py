"""Shared pytest configuration of tests/ and benchmarks/ (this file sits at the rootdir, so it
applies to both).

Triton kernels run under the interpreter when no GPU is present; TRITON_INTERPRET must be set
before triton is first imported, so it is set here, at collection time.
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request) -> torch.device:
    return torch.device(request.param)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Print each benchmark's extra_info (throughputs, ratios against same-run baselines)."""
    session = getattr(config, "_benchmarksession", None)
    rows = [(b.fullname.split("::")[-1], b.extra_info) for b in getattr(session, "benchmarks", []) if b.extra_info]
    if not rows:
        return
    terminalreporter.section("bayesbench: throughputs and ratios (extra_info)")
    for name, info in sorted(rows):
        terminalreporter.write_line(f"{name}: " + ", ".join(f"{k}={v}" for k, v in info.items()))
