"""The leaderboard of a fixed stored store (tests/store/data/store_v4.sql, schema 4: read through
the store's migration) prints exactly the files in tests/report/data/, in every format: a
change to the selection, aggregation or rendering that alters a number, a row or a word shows
here. When a change of the output is intended, regenerate the files with the new code and say
why in the commit."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bayesbench.cli import main

DUMP = Path(__file__).parents[1] / "store" / "data" / "store_v4.sql"
GOLDEN = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    db = str(tmp_path_factory.mktemp("golden") / "v4.sqlite")
    con = sqlite3.connect(db)
    con.executescript(DUMP.read_text())
    con.execute("PRAGMA user_version = 4")
    con.commit()
    con.close()
    return db


@pytest.mark.parametrize("args, name", [(["--json"], "leaderboard_v4.json"), ([], "leaderboard_v4.md"),
                                        (["--format", "csv"], "leaderboard_v4.csv"),
                                        (["--metric", "auc", "--json"], "leaderboard_v4_auc.json")])
def test_the_leaderboard_prints_the_stored_output(store, capsys, args, name):
    assert main(["leaderboard", "--db", store, *args]) == 0
    assert capsys.readouterr().out == (GOLDEN / name).read_text()
