"""The documentation's code runs: every ```python block of README.md and docs/*.md is executed.

Each block runs on its own, in a fresh Python process (no state leaks between blocks or into the
other tests, e.g. a block that registers a model) with an empty working directory. A block that
truly cannot run here (it needs a GPU, or hours of training) is preceded by a line

    <!-- not-tested: the reason -->

and is then only compiled (a syntax error still fails). A marker is a line of its own, must give
a reason and must sit right before a python block.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^\s*<!--\s*not-tested:(.*?)-->\s*$")  # a line of its own
FENCE = re.compile(r"^```python\s*$")


def python_blocks(path: Path) -> list[tuple[int, str, str | None]]:
    """(first line number, code, not-tested reason or None) of each ```python block in `path`."""
    lines = path.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if FENCE.match(lines[i]):
            start = i + 1
            end = next(j for j in range(start, len(lines)) if lines[j].strip() == "```")
            prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            marker = MARKER.match(prev)
            blocks.append((start + 1, "\n".join(lines[start:end]) + "\n", marker.group(1).strip() if marker else None))
            i = end
        i += 1
    return blocks


BLOCKS = [(path, line, code, reason) for path in DOCS for line, code, reason in python_blocks(path)]
IDS = [f"{path.relative_to(ROOT)}:{line}" for path, line, _, _ in BLOCKS]


def test_docs_have_python_blocks():
    assert len(BLOCKS) >= 5, "expected the docs' examples to be found"


@pytest.mark.parametrize("path,line,code,reason", BLOCKS, ids=IDS)
def test_doc_block_runs(path, line, code, reason, tmp_path):
    compile(code, f"{path.name}:{line}", "exec")  # every block must at least be valid Python
    if reason is not None:
        assert reason, f"{path.name}:{line}: a not-tested marker must say why"
        return
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"{path.name}:{line} failed:\n{proc.stderr[-3000:]}"


def test_not_tested_markers_precede_python_blocks():
    """A marker not followed by a python block would silently mark nothing."""
    for path in DOCS:
        lines = path.read_text().splitlines()
        for i, text in enumerate(lines):
            m = MARKER.match(text)
            if not m:
                continue
            nxt = next((lines[j] for j in range(i + 1, len(lines)) if lines[j].strip()), "")
            assert FENCE.match(nxt), f"{path.name}:{i + 1}: a not-tested marker must come right before a python block"
            assert m.group(1).strip(), f"{path.name}:{i + 1}: a not-tested marker must give its reason"
