"""The leaderboard of a fixed stored store (tests/store/data/store_v4.sql, schema 4: read through
the store's migration) prints exactly the files in tests/report/data/, in every format: a
change to the selection, aggregation or rendering that alters a number, a row or a word shows
here. When a change of the output is intended, regenerate the files with the new code and say
why in the commit."""

from __future__ import annotations

from pathlib import Path

import pytest
from store.test_migration import _old_store

from bayesbench.cli import main

GOLDEN = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    return _old_store(tmp_path_factory.mktemp("golden"))


@pytest.mark.parametrize("args, name", [(["--json"], "leaderboard_v4.json"), ([], "leaderboard_v4.md"),
                                        (["--format", "csv"], "leaderboard_v4.csv"),
                                        (["--metric", "auc", "--json"], "leaderboard_v4_auc.json")])
def test_the_leaderboard_prints_the_stored_output(store, capsys, args, name):
    assert main(["leaderboard", "--db", store, *args]) == 0
    assert capsys.readouterr().out == (GOLDEN / name).read_text()
