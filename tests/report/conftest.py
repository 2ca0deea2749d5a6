"""A tiny real store for the site's tests: two architectures really trained on the sticky chain
(20 steps, 2 seeds, 32 evaluation sequences), once per session."""

from __future__ import annotations

import pytest

from bayesbench.cli import main


@pytest.fixture(scope="session")
def tiny_store(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("tiny_store")
    db = str(root / "results" / "bayesbench.sqlite")
    assert main(["run", "--tasks", "sticky", "--archs", "mlp", "lstm", "--seeds", "2", "--steps", "20",
                 "--eval-sequences", "32", "--curve-sequences", "16", "--jobs", "1", "--db", db,
                 "--runs-dir", str(root / "runs"), "--no-progress"]) == 0
    return {"db": db, "root": root}
