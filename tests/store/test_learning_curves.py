"""Learning curves in the store: the `learning_curves` table round trip, replacement per member,
one transaction with the run's rows, and stores from before the table reading as "no curves"."""

from __future__ import annotations

import dataclasses
import math
import sqlite3

import pytest

from bayesbench.store.database import StoreError, read_curve_points, read_records, write_records
from bayesbench.store.records import LearningCurve
from bayesbench.store.schema import SCHEMA_VERSION

from .test_records import _record, _same

NAN = float("nan")


def _curve(scale: float = 1.0, steps=(1, 2, 4, 10)) -> LearningCurve:
    return LearningCurve(eval="K=6", task="hmm(K=6)", n_sequences=256, step=list(steps),
                         sequences=[8 * s for s in steps], tokens=[8 * 18 * s for s in steps],
                         wall_s=[0.1 * s for s in steps],
                         values={"entropy_mae": [scale / s for s in steps],
                                 "kl": [NAN] + [scale / s for s in steps[1:]],
                                 "entropy_mae_positional": [scale / (2 * s) for s in steps]},
                         uniform={"entropy_mae": 1.5, "kl": 1.5, "entropy_mae_positional": 1.5},
                         cadence="log-spaced, 8 per decade")


def test_round_trip_with_curve_and_stop(tmp_path):
    db = str(tmp_path / "c.sqlite")
    records = [_record(0, learning_curve=_curve(), stop_step=10, stop_reason="budget"),
               _record(1, learning_curve=_curve(2.0), stop_step=4,
                       stop_reason="threshold: kl 0.5 <= 0.6 bits at step 4")]
    write_records(records, db)
    back = read_records(db)
    for want, got in zip(records, back):
        assert _same(dataclasses.replace(want, created_at=got.created_at, config=got.config), got)
        assert got.config["curve"]["n_sequences"] == 256  # the curve's description rides with the config
    assert math.isnan(back[0].learning_curve.values["kl"][0])  # stored as NULL
    assert back[1].stop_kind == "threshold" and back[0].stop_kind == "budget"
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM learning_curves").fetchone()[0] == 2 * 4 * 3
    assert con.execute("SELECT value FROM learning_curves WHERE seed = 1 AND step = 4 AND metric = 'kl'"
                       ).fetchone()[0] == 0.5
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6


def test_rewriting_a_member_replaces_its_curve_only(tmp_path):
    db = str(tmp_path / "c.sqlite")
    write_records([_record(0, learning_curve=_curve()), _record(1, learning_curve=_curve(2.0))], db)
    write_records([_record(0, learning_curve=_curve(3.0, steps=(1, 5)))], db)  # a re-evaluation of seed 0
    back = {r.seed: r for r in read_records(db)}
    assert back[0].learning_curve.step == [1, 5] and back[0].learning_curve.values["entropy_mae"] == [3.0, 0.6]
    assert back[1].learning_curve.step == [1, 2, 4, 10]
    write_records([_record(1)], db)  # a record that knows no curve leaves the stored one
    assert read_records(db, where="seed = 1")[0].learning_curve.step == [1, 2, 4, 10]


def test_curve_points_are_written_with_the_runs_rows_or_not_at_all(tmp_path):
    db = str(tmp_path / "c.sqlite")
    write_records([_record(0)], db)
    broken = _curve(steps=(1, 1))  # the same (step, metric) twice: the insert of its points fails
    with pytest.raises(StoreError):
        write_records([_record(1, learning_curve=broken), _record(2, learning_curve=_curve())], db)
    assert [r.seed for r in read_records(db)] == [0]  # neither seed 1's nor seed 2's row was kept
    assert read_curve_points(db, ["r1"]) == {}


def test_a_store_from_before_curves_reads_as_no_curves(tmp_path):
    """A version-2 store: no learning_curves table, no stop columns."""
    db = tmp_path / "v2.sqlite"
    write_records([_record(0)], str(db))
    con = sqlite3.connect(db)
    con.execute("DROP TABLE learning_curves")
    con.execute("ALTER TABLE runs DROP COLUMN stop_step")
    con.execute("ALTER TABLE runs DROP COLUMN stop_reason")
    con.execute("PRAGMA user_version = 2")
    con.commit()
    con.close()
    assert read_curve_points(str(db), ["r1"]) == {}  # the table's absence is "no curves", not an error
    (old,) = read_records(str(db))
    assert old.learning_curve is None and old.stop_step is None and old.stop_kind is None
    write_records([_record(1, learning_curve=_curve(), stop_step=10, stop_reason="budget")], str(db))
    back = {r.seed: r for r in read_records(str(db))}
    assert back[0].learning_curve is None and back[1].learning_curve.step == [1, 2, 4, 10]
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
