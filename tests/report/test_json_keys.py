"""`bayesbench leaderboard --json` carries what `bayesbench export` carries: every column of an
exported row (its evaluation set's size and id, the settings that define the row: training,
model and task options, threads, code) is in the JSON, with the same value, so a consumer of the
JSON can keep evaluation sets and configurations apart."""

from __future__ import annotations

import json

import pytest

from bayesbench.cli import main
from bayesbench.store.database import read_records, row_settings


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("json_keys")
    db = str(tmp / "r.sqlite")
    for lr in ("1e-3", "5e-4"):
        assert main(["train", "--task", "bijection", "--arch", "mlp", "--seeds", "0,1", "--steps", "3",
                     "--eval-sequences", "16", "--curve-sequences", "8", "--train-args", f"lr={lr}", "--db", db,
                     "--runs-dir", str(tmp / "runs"), "--no-progress"]) == 0
    return db


# export column -> how the leaderboard's JSON record (run, evaluation name) gives it
SAME = ("task", "task_label", "arch", "run_id", "seed", "member", "preset", "group_id", "status", "params", "steps",
        "created_at", "device")
FROM_EVAL = {"positions": "positions", "eval_sequences": "n_sequences", "scored_positions": "n_positions",
             "set_id": "set_id"}


def _json_value(run: dict, name: str, column: str):
    ev = run["evals"][name]
    if column in SAME:
        return run[column]
    if column in FROM_EVAL:
        return ev[FROM_EVAL[column]]
    if column == "eval":
        return name
    if column == "primary":
        return run["eval"] == name
    if column == "final_loss_nats":
        return run["final_loss"]
    if column in ("wall_s", "steps_per_s"):
        return None if run[column] is None else round(run[column], 2)
    if column == "tuned":
        return "tuning" in run["settings"]
    if column == "tuning":
        return json.dumps(run["settings"]["tuning"], sort_keys=True, default=str) if column in run["settings"] else None
    if column == "threads":
        return run["settings"]["threads"]
    if column in ("train", "model", "task_config", "code"):
        value = {"train": run["settings"]["train"], "model": run["settings"]["model"],
                 "task_config": run["settings"]["task"], "code": run["code"]}[column]
        return json.dumps(value, sort_keys=True, default=str)
    for suffix, pick in (("_ci_low", 0), ("_ci_high", 1)):
        if column.endswith(suffix):
            return ev[column[:-len(suffix)] + "_ci"][pick]
    if "_floor_" in column:
        floor, metric = column.split("_floor_")
        return ev["floors"][floor][metric]
    if column.endswith("_bits"):
        return ev[column]
    raise AssertionError(f"export column {column!r} has no counterpart in leaderboard --json")


def test_every_export_column_is_in_the_leaderboard_json(store, capsys):
    assert main(["export", "--db", store, "--format", "json"]) == 0
    exported = json.loads(capsys.readouterr().out)["rows"]
    assert main(["leaderboard", "--db", store, "--json"]) == 0
    runs = {(r["run_id"], r["seed"]): r for r in json.loads(capsys.readouterr().out)["runs"]}
    assert len(exported) == 8 and len(runs) == 4
    for row in exported:
        run = runs[(row["run_id"], row["seed"])]
        for column, value in row.items():
            got = _json_value(run, row["eval"], column)
            if isinstance(value, float):
                assert got == pytest.approx(value, rel=1e-12), column
            else:
                assert got == value, column


def test_the_json_names_each_rows_set_and_settings(store, capsys):
    assert main(["leaderboard", "--db", store, "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    records = {(r.run_id, r.seed): r for r in read_records(store)}
    assert {r["settings"]["train"]["lr"] for r in runs} == {1e-3, 5e-4}  # what tells the two rows of mlp apart
    for run in runs:
        record = records[(run["run_id"], run["seed"])]
        assert run["settings"] == json.loads(json.dumps(row_settings(record)))
        assert set(run["settings"]) >= {"task", "model", "train", "threads", "code", "eval_sequences", "max_len"}
        assert run["settings"] == record.config["identity"]  # the run's identity without its seeds
        assert run["eval_sequences"] == 16 and run["settings"]["task"]["V"] == 8
        for name, ev in run["evals"].items():
            assert ev["n_sequences"] == 16 and len(ev["set_id"]) == 16 and ev["set_id"] == record.evals[name].set_id
            assert ev["kl_ci"][0] <= ev["kl_bits"] <= ev["kl_ci"][1]
        assert run["evals"]["values"]["set_id"] != run["evals"]["values+query"]["set_id"]


def test_the_leaderboard_as_json_is_one_versioned_schema(store, capsys):
    """The leaderboard as JSON had three shapes: `leaderboard --json` (per run and seed only), `export
    --pooled --format json` (its own pooling) and `bayesbench.leaderboard()`, none versioned. Now the
    pooled row is one schema (`report.leaderboard.board_rows`, docs/results.md#the-leaderboard-as-json):
    `leaderboard --json` carries it as "rows" beside its "runs", the API returns it, and the pooled
    export is derived from it; every document says its `schema_version`."""
    import bayesbench
    from bayesbench.report.leaderboard import SCHEMA_VERSION

    assert main(["leaderboard", "--db", store, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema_version"] == SCHEMA_VERSION and len(doc["runs"]) == 4
    assert doc["rows"] == json.loads(json.dumps(list(bayesbench.leaderboard(store))))
    assert main(["export", "--db", store, "--pooled", "--format", "json"]) == 0
    pooled = json.loads(capsys.readouterr().out)
    assert pooled["schema_version"] == SCHEMA_VERSION and len(pooled["rows"]) == len(doc["rows"]) == 4
    for row, board in zip(pooled["rows"], doc["rows"]):
        assert (row["task_label"], row["eval"], row["arch"]) == (board["task"], board["eval"], board["arch"])
        assert row["seeds"] == ",".join(map(str, board["seeds"])) and row["run_ids"] == ",".join(board["run_ids"])
        for m in ("entropy_mae", "kl", "entropy_mae_positional"):
            assert row[f"{m}_bits"] == pytest.approx(board[f"{m}_bits"], rel=1e-12)
            assert [row[f"{m}_ci_low"], row[f"{m}_ci_high"]] == pytest.approx(board["intervals_bits"][m], rel=1e-12)
    assert main(["export", "--db", store, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema_version"] == SCHEMA_VERSION
