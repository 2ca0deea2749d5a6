"""The store's migration to run identities (schema version 5), on a store written by the code
before them (`data/store_v4.sql`: its header says which commands made it): every row keeps its
numbers and gains its identity; the rows of `train` and `sweep` are keyed as the same commands
key their jobs now, so those commands find them again; a row run with task options is labelled with
the task that ran (schema 6: 'sticky V=6 L=10', not 'sticky V=8 L=32 [L=10 V=6]'); the
leaderboard pools exactly the rows of equal identity."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from bayesbench.cli import main
from bayesbench.identity import identity_key
from bayesbench.report.rows import aggregate
from bayesbench.report.selection import select_rows
from bayesbench.store.database import read_rows, write_rows
from bayesbench.store.migrations import _stored_key
from bayesbench.store.schema import SCHEMA_VERSION
from bayesbench.sweep.expand import SweepJob
from bayesbench.sweep.jobs import make_jobs

DUMP = Path(__file__).parent / "data" / "store_v4.sql"
NUMBERS = ("entropy_mae_bits", "entropy_mae_ci_low", "kl_bits", "final_loss", "params", "steps", "metrics", "curves",
           "loss_curve", "stop_step", "stop_reason", "created_at")
OPTIONS = {"L": 10, "V": 6}
SWEEP = """name = "opts"
preset = "quick"
tasks = ["sticky"]
archs = ["mlp"]
seeds = [0]
steps = 5
eval_sequences = 64
task_options = {L = 10, V = 6}
train = {curve_sequences = 32}
"""
# the keys the code before identities gave these jobs (the dump's run_ids)
PLAIN, SWEPT, OPTIONED = "ff9fed711bbc3066", "37d692f6caab889a", "fcd147b6e02cc4da"


def _old_store(tmp_path) -> str:
    db = str(tmp_path / "old.sqlite")
    con = sqlite3.connect(db)
    con.executescript(DUMP.read_text())
    con.execute("PRAGMA user_version = 4")
    con.commit()
    con.close()
    return db


def _rows(db: str) -> dict[int, dict]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return {r["id"]: dict(r) for r in con.execute("SELECT * FROM runs")}
    finally:
        con.close()


def _curve_counts(db: str) -> dict[tuple[str, int], int]:
    con = sqlite3.connect(db)
    try:
        return dict(((run_id, seed), n) for run_id, seed, n in
                    con.execute("SELECT run_id, seed, count(*) FROM learning_curves GROUP BY run_id, seed"))
    finally:
        con.close()


def _key(**selections) -> str:
    (job,) = make_jobs("quick", tasks=["sticky"], archs=["mlp"], steps=5, eval_sequences=64,
                       train={"curve_sequences": 32}, place=lambda d: "cpu", **selections)
    return SweepJob.of(job, group_id="run-quick").key


def test_an_old_store_keeps_its_numbers_and_its_rows_are_keyed_as_their_commands_key_them_now(tmp_path):
    db = _old_store(tmp_path)
    before, curves = _rows(db), _curve_counts(db)
    assert {r["run_id"] for r in before.values()} == {PLAIN, SWEPT, OPTIONED}
    # the stored keys are the ones the migration rebuilds from the rows as stored (torch.compile off)
    for row in before.values():
        row = {**row, **{c: json.loads(row[c]) for c in ("task_config", "config", "environment")}}
        assert _stored_key(row, False) == row["run_id"] and _stored_key(row, True) != row["run_id"]
    # read as they are, without migrating, the rows already say what ran (not the options as given)
    assert {r["task_label"] for r in read_rows(db)} == {"sticky V=8 L=32", "sticky V=6 L=10"}
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == 4  # reading migrates nothing
    write_rows([], db)  # opening it for writing migrates it
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6
    after = _rows(db)
    for i, row in before.items():
        assert {c: after[i][c] for c in NUMBERS} == {c: row[c] for c in NUMBERS}
    by_label = {}
    for i, row in after.items():
        by_label.setdefault(after[i]["task_label"], []).append((before[i]["run_id"], row["run_id"], row["group_id"]))
    plain, optioned = _key(seeds=[0, 1]), _key(seeds=[0], task_args=OPTIONS)
    assert sorted(by_label["sticky V=8 L=32"]) == [(PLAIN, plain, "run-quick")] * 2
    # the sweep's "[L=10, V=6]" and train's "[L=10 V=6]": one label (what ran), one identity; the newer row
    # (train's) takes the key both commands give the job now, the older keeps its run_id
    assert set(by_label["sticky V=6 L=10"]) == {(OPTIONED, optioned, "run-quick"),
                                                            (SWEPT, SWEPT, "sweep-opts")}
    assert _curve_counts(db) == {(plain, 0): curves[(PLAIN, 0)], (plain, 1): curves[(PLAIN, 1)],
                                 (optioned, 0): curves[(OPTIONED, 0)], (SWEPT, 0): curves[(SWEPT, 0)]}
    rows = read_rows(db)
    for row in rows:
        config = row["config"]
        assert config["identity_key"] == identity_key(config["identity"])
        assert config["identity"]["label"] == row["task_label"] and "seeds" not in config["identity"]
    keys = {row["run_id"]: row["config"]["identity_key"] for row in rows}
    assert keys[SWEPT] == keys[optioned] != keys[plain]
    write_rows([], db)  # a second opening changes nothing
    assert _rows(db) == after


def test_the_same_commands_find_the_migrated_rows(tmp_path, capsys):
    db = _old_store(tmp_path)
    common = ["--arch", "mlp", "--steps", "5", "--eval-sequences", "64", "--curve-sequences", "32", "--db", db,
              "--runs-dir", str(tmp_path / "runs"), "--no-progress"]
    assert main(["train", "--task", "sticky", "--seeds", "0,1", *common]) == 0
    assert "1 job: 1 already stored (skipped), 0 to run" in capsys.readouterr().out
    assert main(["train", "--task", "sticky", "--task-args", "L=10", "V=6", "--seeds", "0", *common]) == 0
    assert "1 job: 1 already stored (skipped), 0 to run" in capsys.readouterr().out
    sweep = tmp_path / "opts.toml"
    sweep.write_text(SWEEP)
    assert main(["sweep", str(sweep), "--db", db, "--runs-dir", str(tmp_path / "runs"), "--no-progress"]) == 0
    assert "1 job: 1 already stored (skipped), 0 to run" in capsys.readouterr().out
    assert not (tmp_path / "runs").exists()  # nothing trained
    assert len(read_rows(db)) == 4


def test_the_leaderboard_pools_exactly_the_rows_of_equal_identity(tmp_path):
    db = _old_store(tmp_path)
    groups = aggregate(select_rows(db))  # read-only: identities from the rows' fields
    write_rows([], db)
    migrated = aggregate(select_rows(db))
    for agg in (groups, migrated):
        rows = {(row.task, row.eval): row for row in agg}
        assert len(agg) == 2 and rows[("sticky V=8 L=32", "standard")].seeds == [0, 1]
        optioned = rows[("sticky V=6 L=10", "standard")]
        assert optioned.seeds == [0] and optioned.n_runs == 2  # both runs, the seed counted once
    # equal identity pools whatever else the rows say; another identity is another row
    row = next(r for r in read_rows(db) if r["task_label"] == "sticky V=8 L=32" and r["seed"] == 0)
    copies = []
    for run_id, threads in (("moved", 1), ("other-threads", 2)):
        config = {**row["config"], "checkpoint": f"elsewhere/{run_id}"}
        if threads != 1:
            config["identity"] = {**config["identity"], "threads": threads}
            config["identity_key"] = identity_key(config["identity"])
        copies.append({**row, "run_id": run_id, "seed": 7, "config": config,
                       "environment": {**row["environment"], "threads": threads}})
    write_rows([{k: v for k, v in c.items() if k != "id"} for c in copies], db)
    rows = {(row.task, row.eval, tuple(row.seeds)): row for row in aggregate(select_rows(db))}
    assert ("sticky V=8 L=32", "standard", (0, 1, 7)) in rows and ("sticky V=8 L=32", "standard", (7,)) in rows


def test_a_compiled_run_is_recognised_by_its_stored_key(tmp_path):
    db = _old_store(tmp_path)
    row = next(r for r in read_rows(db) if r["run_id"] == PLAIN and r["seed"] == 0)  # its label as stored
    compiled = _stored_key(row, True)  # the key a `--compile` run of the same command was stored under
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET run_id = ? WHERE run_id = ?", (compiled, PLAIN))
    con.commit()
    con.close()
    write_rows([], db)
    (moved,) = [r for r in read_rows(db) if r["seed"] == 0 and r["task_label"] == "sticky V=8 L=32"]
    identity = moved["config"]["identity"]
    assert identity["train"]["compile"] is True
    assert moved["run_id"] == identity_key(identity, [0, 1]) not in (compiled, _key(seeds=[0, 1]))


def test_a_schema_5_row_labelled_with_its_options_is_relabelled_and_found_again(tmp_path, capsys):
    """Schema 5 labelled a task run with options by the preset's label and the options as given;
    schema 6 labels it with what ran and keys it as the same command keys the job now."""
    from bayesbench.presets import options_label

    db, runs = str(tmp_path / "s5.sqlite"), str(tmp_path / "runs")
    common = ["--arch", "mlp", "--steps", "5", "--eval-sequences", "64", "--curve-sequences", "32", "--db", db,
              "--runs-dir", runs, "--no-progress", "--task", "sticky", "--seeds", "0"]
    assert main(["train", "--task-args", "L=10", "V=6", "variant_free=1", *common]) != 0  # not a setting: refused
    capsys.readouterr()
    assert main(["train", "--task-args", "L=10", "V=6", *common]) == 0
    (row,) = read_rows(db)
    assert row["task_label"] == "sticky V=6 L=10"
    now_key = row["run_id"]
    # as schema 5 stored it: the options as given in the label, its identity and key from that label
    old_label = options_label("sticky V=8 L=32", {"L": 10, "V": 6})
    identity = {**row["config"]["identity"], "label": old_label}
    old_key = identity_key(identity, [0])
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET run_id = ?, task_label = ?, config = ?",
                (old_key, old_label, json.dumps({**row["config"], "identity": identity,
                                                 "identity_key": identity_key(identity)})))
    con.execute("UPDATE learning_curves SET run_id = ?", (old_key,))
    con.execute("PRAGMA user_version = 5")
    con.commit()
    con.close()
    assert {r["task_label"] for r in read_rows(db)} == {"sticky V=6 L=10"}  # read-only: said as what ran
    assert main(["train", "--task-args", "L=10", "V=6", *common]) == 0  # opens it for writing: migrates
    assert "1 job: 1 already stored (skipped), 0 to run" in capsys.readouterr().out
    (row,) = read_rows(db)
    assert row["run_id"] == now_key and row["task_label"] == row["config"]["identity"]["label"] == "sticky V=6 L=10"
    assert row["config"]["identity_key"] == identity_key(row["config"]["identity"])
    assert _curve_counts(db) and set(k[0] for k in _curve_counts(db)) == {now_key}
