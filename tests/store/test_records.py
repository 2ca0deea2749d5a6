"""The typed run record: round trip through the SQLite store, non-finite scores, adding a metric,
and clear errors for stores and rows this version cannot read."""

from __future__ import annotations

import dataclasses
import math
import sqlite3

import pytest

from bayesbench.metric_table import Metric, registered
from bayesbench.report.leaderboard import json_runs, markdown, to_csv
from bayesbench.scoring.metrics import Summary
from bayesbench.store.database import read_records, read_rows, write_records
from bayesbench.store.records import EvalResult, MemberEvaluation, PermutationCheck, PositionCurves, RunRecord
from bayesbench.store.schema import SCHEMA_VERSION

NAN = float("nan")


def _summary(mean: float) -> Summary:
    return Summary(mean, mean - 0.01, mean + 0.01, 64, 512)


def _record(seed: int, mae: float = 0.25, **kw) -> RunRecord:
    evals = {"K=6": EvalResult("hmm(K=6)", "the K = 6 observation positions",
                               {"entropy_mae": _summary(mae), "kl": _summary(2 * mae)}),
             "K=9": EvalResult("hmm(K=9)", "the K = 9 observation positions",
                               {"entropy_mae": _summary(3 * mae), "kl": _summary(NAN)})}
    curves = {name: PositionCurves([1, 2], [mae, NAN], [0.5, 0.25], [1.0, 0.75], [0.9, 0.7]) for name in evals}
    perm = PermutationCheck("K=6", mae, mae + 1e-3, Summary(-1e-3, -2e-3, 0.0, 64, 512))
    fields = dict(run_id="r1", seed=seed, member=seed, group_id="g", preset="quick", task="hmm",
                  task_label="hmm S=5 K=6", task_config={"task": "hmm", "K": 6}, arch="transformer",
                  config={"seeds": [0, 1], "code": {"task": {"version": 1}, "model": {"version": 1}}},
                  params=123, steps=10, wall_s=1.5, steps_per_s=6.7,
                  sequences_per_s=100.0, status="ok", final_loss=0.9,
                  evaluation=MemberEvaluation("K=6", evals, curves, perm), param_breakdown={"embed": 23},
                  loss_curve=[[10, 0.9]], environment={"device": "cpu"})
    return RunRecord(**{**fields, **kw})


def _same(a, b) -> bool:
    """Equal, with NaN equal to NaN (dataclasses, dicts, lists, floats)."""
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and _same(dataclasses.asdict(a), dataclasses.asdict(b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


def test_round_trip_keeps_every_field(tmp_path):
    db = str(tmp_path / "r.sqlite")
    records = [_record(0), _record(1, mae=NAN, status="member 1 diverged")]
    write_records(records, db)
    back = read_records(db)
    assert [r.seed for r in back] == [0, 1] and all(r.created_at for r in back)
    for want, got in zip(records, back):
        assert _same(dataclasses.replace(want, created_at=got.created_at), got)
    assert back[0].headline is back[0].evals["K=6"] and back[0].entropy_mae_bits == 0.25
    assert math.isnan(back[1].entropy_mae_bits)  # stored as NULL, read back as NaN
    # plain SQL sees the documented columns (docs/results.md), NaN as NULL
    con = sqlite3.connect(db)
    assert con.execute("SELECT entropy_mae_bits, kl_bits FROM runs ORDER BY seed").fetchall() == [(0.25, 0.5),
                                                                                                (None, None)]
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert read_rows(db)[0]["metrics"]["evals"]["K=9"]["kl"]["mean"] is None


def test_leaderboard_outputs_read_the_typed_fields(tmp_path):
    records = [_record(0), _record(1, mae=NAN, status="diverged")]
    runs = json_runs(records)["runs"]
    ev = runs[0]["evals"]["K=9"]
    assert {k: ev[k] for k in ("entropy_mae_bits", "kl_bits", "positions", "n_sequences", "kl_ci")} == {
        "entropy_mae_bits": 0.75, "kl_bits": None, "positions": "the K = 9 observation positions", "n_sequences": 64,
        "kl_ci": [None, None]}
    assert runs[1]["entropy_mae_bits"] is None and runs[0]["permutation"]["difference"]["mean"] == -1e-3
    lines = to_csv(records).splitlines()
    assert lines[0].split(",")[7:9] == ["entropy_mae_bits", "kl_bits"] and len(lines) == 1 + 2 * 2
    assert "| hmm S=5 K=6 | K=6 (trained) | transformer (1 of 2 diverged) |" in markdown(records)


def test_a_new_metric_is_one_registration():
    """A final metric registered in the metric table (and nowhere else) is listed, serialised,
    and reads back as None from records stored before it existed."""
    assert EvalResult.metric_names() == ("entropy_mae", "kl", "entropy_mae_positional")
    old = _record(0).evals["K=6"].to_json()
    late = Metric("entropy_mae_late", "a made-up final metric", "late", lambda p, plogp, h_p, log_q, h_q: h_q)
    with registered(late):
        assert EvalResult.metric_names() == ("entropy_mae", "kl", "entropy_mae_positional", "entropy_mae_late")
        ext = EvalResult.from_json(old)
        # _record's evaluations have no positional metric either (None): metrics() leaves it out
        assert ext.entropy_mae_late is None and list(ext.metrics()) == ["entropy_mae", "kl"]
        new = dataclasses.replace(ext, scores={**ext.scores, "entropy_mae_late": _summary(0.125)})
        assert list(new.to_json())[-3:] == ["entropy_mae_late", "floors", "set_id"]
        assert EvalResult.from_json(new.to_json()).metrics()["entropy_mae_late"] == _summary(0.125)
    assert "entropy_mae_late" not in EvalResult.from_json(new.to_json()).scores  # unregistered: not read
    with pytest.raises(ValueError, match="final metrics of the metric table"):
        EvalResult("hmm(K=6)", "x", {"entropy_mae_late": _summary(0.125)})


def test_stores_this_version_cannot_read_are_refused_clearly(tmp_path):
    old = tmp_path / "other.sqlite"
    con = sqlite3.connect(old)
    con.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, run_id TEXT, seed INTEGER)")
    con.commit()
    con.close()
    with pytest.raises(ValueError, match=r"has a 'runs' table without the columns \['member'"):
        read_records(str(old))

    newer = tmp_path / "newer.sqlite"
    write_records([_record(0)], str(newer))
    con = sqlite3.connect(newer)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.commit()
    con.close()
    with pytest.raises(ValueError, match="newer than this bayesbench's"):
        read_records(str(newer))

    bare = tmp_path / "bare.sqlite"
    write_records([_record(0)], str(bare))
    con = sqlite3.connect(bare)
    con.execute("UPDATE runs SET metrics = '{}'")
    con.commit()
    con.close()
    with pytest.raises(ValueError, match="stored run r1 seed 0 has no per-evaluation metrics"):
        read_records(str(bare))


def test_cli_says_one_line_for_an_unreadable_store(tmp_path, capsys):
    from bayesbench.cli import main

    db = tmp_path / "other.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, run_id TEXT)")
    con.commit()
    con.close()
    assert main(["leaderboard", "--db", str(db)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("bayesbench leaderboard: results store") and "\n" not in err
