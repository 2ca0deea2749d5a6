"""`bayesbench compare` finds a run by its id or a prefix of it, exactly one run."""

from __future__ import annotations

import pytest

from bayesbench.cli.compare import run_records
from bayesbench.store.database import write_rows


def _row(run_id: str) -> dict:
    return {"run_id": run_id, "seed": 0, "member": 0, "task": "sticky", "task_label": "sticky V=8", "task_config": {},
            "arch": "mlp", "config": {}, "params": 1, "steps": 1, "status": "ok",
            "metrics": {"primary": "standard", "evals": {}}}


def test_a_run_is_found_by_a_prefix_whose_characters_are_not_wildcards(tmp_path):
    db = str(tmp_path / "r.sqlite")
    write_rows([_row("ab1x"), _row("ab_2"), _row("cd%3")], db)
    assert {r.run_id for r in run_records(db, "ab_")} == {"ab_2"}  # '_' is not "any one character"
    assert {r.run_id for r in run_records(db, "cd%")} == {"cd%3"}
    assert {r.run_id for r in run_records(db, "ab1x")} == {"ab1x"}
    with pytest.raises(ValueError, match="names several stored runs: ab1x, ab_2"):
        run_records(db, "ab")
    with pytest.raises(ValueError, match="no stored run 'a_1'"):
        run_records(db, "a_1")
