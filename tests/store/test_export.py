"""`bayesbench export`: the store's rows with every interval, per seed or pooled, in CSV, JSON and
Parquet, and the same numbers as the store holds."""

from __future__ import annotations

import csv
import io
import json

import pytest

from bayesbench.cli import main
from bayesbench.store.database import read_records


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export")
    db = str(tmp / "r.sqlite")
    for arch in ("mlp", "gru"):
        assert main(["train", "--task", "bijection", "--arch", arch, "--seeds", "0,1", "--steps", "3",
                     "--eval-sequences", "32", "--db", db, "--runs-dir", str(tmp / "runs"), "--no-progress"]) == 0
    return db


def _csv(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_per_seed_rows_carry_every_interval_and_the_stored_numbers(store, capsys):
    assert main(["export", "--db", store]) == 0
    rows = _csv(capsys.readouterr().out)
    records = read_records(store)
    # 2 archs x 2 seeds x 2 evaluation sets of the bijection (values, values+query)
    assert len(rows) == 8 and {r["eval"] for r in rows} == {"values", "values+query"}
    by_key = {(r.arch, r.seed): r for r in records}
    for row in rows:
        rec = by_key[(row["arch"], int(row["seed"]))]
        ev = rec.evals[row["eval"]]
        for m in ("entropy_mae", "kl", "entropy_mae_positional"):
            s = getattr(ev, m)
            assert float(row[f"{m}_bits"]) == pytest.approx(s.mean, rel=1e-12)
            assert float(row[f"{m}_ci_low"]) <= float(row[f"{m}_bits"]) <= float(row[f"{m}_ci_high"])
        assert int(row["eval_sequences"]) == 32 and row["uniform_floor_kl_bits"]
        assert len(row["wall_s"].split(".")[-1]) <= 2  # rounded, not 14 digits
        assert json.loads(row["train"])["steps"] == 3


def test_pooled_rows_are_the_leaderboards_with_intervals_over_seeds(store, capsys):
    assert main(["export", "--db", store, "--pooled", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert len(rows) == 4 and all(r["n_seeds"] == 2 and r["seeds"] == "0,1" for r in rows)
    records = read_records(store)
    for row in rows:
        means = [r.evals[row["eval"]].kl.mean for r in records if r.arch == row["arch"]]
        assert row["kl_bits"] == pytest.approx(sum(means) / 2)
        assert 0.0 <= row["kl_ci_low"] <= row["kl_bits"] <= row["kl_ci_high"]


def test_parquet_round_trips_and_bad_outputs_are_refused(store, tmp_path, capsys):
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "r.parquet"
    assert main(["export", "--db", store, "--format", "parquet", "--out", str(out)]) == 0
    table = pq.read_table(out).to_pylist()
    assert len(table) == 8 and {"entropy_mae_ci_low", "kl_ci_high", "eval_sequences"} <= set(table[0])
    capsys.readouterr()
    assert main(["export", "--db", store, "--format", "parquet"]) == 2
    assert "--format parquet writes a file: give --out FILE.parquet" in capsys.readouterr().err
    assert main(["export", "--db", store, "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_pooled_rows_say_which_configuration_and_runs_they_pool(tmp_path, capsys):
    """Probe case 82: two pooled rows of one arch that differ only in lr were identical in every
    column but the metrics."""
    db = str(tmp_path / "r.sqlite")
    for lr in ("1e-3", "2e-3"):
        assert main(["train", "--task", "sticky", "--arch", "mlp", "--seeds", "0", "--steps", "2", "--eval-sequences",
                     "16", "--no-curves", "--train-args", f"lr={lr}", "--db", db, "--runs-dir", str(tmp_path / "runs"),
                     "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["export", "--db", db, "--pooled"]) == 0
    rows = _csv(capsys.readouterr().out)
    by_run = {r.run_id: r for r in read_records(db)}
    assert len(rows) == 2 and {json.loads(r["train"])["lr"] for r in rows} == {1e-3, 2e-3}
    for row in rows:
        (run,) = row["run_ids"].split(",")
        assert json.loads(row["train"]) == by_run[run].config["train"]
        assert json.loads(row["task_config"])["L"] == 32 and json.loads(row["model"])["depth"] == 4


def test_an_empty_store_is_said_and_a_missing_out_folder_made(store, tmp_path, capsys):
    """Probe cases 83 and 86: a store with no results exported nothing with exit 0 and no word; an
    --out in a missing folder was a raw errno line (exit 1)."""
    assert main(["export", "--db", str(tmp_path / "typo.sqlite")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"no store at {tmp_path / 'typo.sqlite'} (--db; a typo?" in err
    assert not (tmp_path / "typo.sqlite").exists()
    target = tmp_path / "new" / "folder" / "r.csv"
    assert main(["export", "--db", store, "--out", str(target)]) == 0
    assert len(_csv(target.read_text())) == 8
    (tmp_path / "afile").write_text("x")
    assert main(["export", "--db", store, "--out", str(tmp_path / "afile" / "r.csv")]) == 2
    assert "--out " + str(tmp_path / "afile") + " is a file" in capsys.readouterr().err


def test_a_tuned_row_is_told_from_an_untuned_one_at_the_same_rate(tmp_path, capsys):
    """issue 39: export dropped the tuning record, so a tuned row and an untuned row trained at the rate it
    chose were the same in every column but the numbers."""
    db, runs = str(tmp_path / "r.sqlite"), str(tmp_path / "runs")
    common = ["--tasks", "bijection", "--archs", "mlp", "--steps", "5", "--seeds", "1", "--eval-sequences", "16",
              "--curve-sequences", "16", "--db", db, "--runs-dir", runs, "--no-progress"]
    assert main(["run", *common, "--tune", "--tune-args", "lrs=[1e-3,2e-3]", "selection_seeds=1",
                 "selection_sequences=16"]) == 0
    (tuned,) = [r for r in read_records(db) if (r.config.get("tuning") or {}).get("role") == "final"]
    chosen = tuned.config["tuning"]["chosen"]["lr"]
    assert main(["run", *common, "--train-args", f"lr={chosen}"]) == 0
    for pooled in ([], ["--pooled"]):
        capsys.readouterr()
        assert main(["export", "--db", db, "--format", "json", *pooled]) == 0
        rows = [r for r in json.loads(capsys.readouterr().out)["rows"] if r["eval"] == "values"]
        assert sorted(r["tuned"] for r in rows) == [False, True], pooled  # the selection rows are not exported
        (row,) = [r for r in rows if r["tuned"]]
        assert json.loads(row["tuning"])["chosen"] == {"lr": chosen} and json.loads(row["train"])["lr"] == chosen
        assert [r["tuning"] for r in rows if not r["tuned"]] == [None]
    capsys.readouterr()
    assert main(["export", "--db", db]) == 0
    assert {r["tuned"] for r in _csv(capsys.readouterr().out)} == {"True", "False"}
