"""`bayesbench score --predictions` (bayesbench/data/predictions.py, score.py): predictions made
outside bayesbench, checked, scored by the code every model is scored by and stored as a row.

The round trip: a set exported, a trained model's plain forward over the exported tokens written
as a file (parquet for one set, .npy for the other), scored: the same numbers as `bayesbench eval`
of that model. Every bad file is refused with one line naming its rule, and nothing is stored."""

from __future__ import annotations

import glob
import json
import math
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from bayesbench.cli import main
from bayesbench.data.predictions import NORMALISED_ATOL, check, read, write
from bayesbench.data.sets import evaluation_sets, task_setup
from bayesbench.models import get_model
from bayesbench.store.database import read_records
from bayesbench.tasks import task_from_config
from bayesbench.tasks.bijection import BijectionTask

N = 64


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A transformer trained 20 steps on the quick bijection (2 seeds), scored on 64 sequences,
    and its evaluation sets exported."""
    root = tmp_path_factory.mktemp("trained")
    db, runs, out = str(root / "r.sqlite"), str(root / "runs"), str(root / "set")
    assert main(["train", "--task", "bijection", "--arch", "transformer", "--seeds", "0,1", "--steps", "20",
                 "--eval-sequences", str(N), "--curve-sequences", "16", "--db", db, "--runs-dir", runs,
                 "--no-progress"]) == 0
    assert main(["data", "export", "bijection", "--sequences", str(N), "--out", out]) == 0
    (run_dir,) = glob.glob(os.path.join(runs, "quick", "bijection-transformer-*"))
    return {"db": db, "run_dir": run_dir, "set": out, "root": root,
            "manifest": json.load(open(os.path.join(out, "bayesbench.json")))}


def _tokens(path: str, n: int, length: int) -> torch.Tensor:
    """The exported tokens, read with pyarrow only."""
    column = pq.read_table(path, columns=["tokens"]).column("tokens").combine_chunks()
    return torch.from_numpy(column.flatten().to_numpy().reshape(n, length).copy())


def _plain_forward(run_dir: str, tokens: torch.Tensor, member: int) -> np.ndarray:
    """The trained model's log-probabilities on `tokens`: its checkpoint's weights in its module,
    one forward pass, a log-softmax; no bayesbench training or scoring code."""
    ckpt = torch.load(os.path.join(run_dir, "checkpoint.pt"), weights_only=True)
    ident = ckpt["identity"]
    model = get_model(ident["arch"], task_from_config(ident["task"]), seeds=ident["seeds"], max_len=ident["max_len"],
                      **ident["model"])
    model.load_state_dict(ckpt["model"])
    model.eval()
    with torch.no_grad():
        logits = model(tokens.unsqueeze(0).expand(model.ensemble, *tokens.shape))
    return torch.log_softmax(logits.double(), -1)[member].numpy()


def test_round_trip_export_plain_forward_score_equals_eval(trained, capsys):
    sets = {s["name"]: s for s in trained["manifest"]["sets"]}
    files = []
    for name, s in sets.items():
        log_q = _plain_forward(trained["run_dir"], _tokens(os.path.join(trained["set"], s["file"]), N, s["seq_len"]),
                               member=1)
        if name == "values":  # parquet written with pyarrow alone, as docs/data.md shows
            path = str(trained["root"] / "values_pred.parquet")
            table = pa.table({"sequence": np.arange(N), "log_probs": [row.tolist() for row in log_q],
                              **{k: [v] * N for k, v in s["key"].items()}})
            pq.write_table(table, path)
        else:  # .npy with its key beside it
            path = str(trained["root"] / "query_pred.npy")
            np.save(path, log_q)
            json.dump({**s["key"], "kind": "log_probs"}, open(str(trained["root"] / "query_pred.json"), "w"))
        files.append(path)
    db = trained["db"]
    assert main(["score", "--predictions", *files, "--name", "plain-forward", "--seed", "1", "--db", db,
                 "--params", "12345", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["runs"]
    assert main(["eval", trained["run_dir"], "--db", db, "--json"]) == 0
    evaluated = {r["seed"]: r for r in json.loads(capsys.readouterr().out)["runs"]}[1]
    assert row["arch"] == "plain-forward" and row["seed"] == 1 and row["steps"] == 0 and row["params"] == 12345
    assert list(row["evals"]) == ["values", "values+query"] == list(evaluated["evals"])
    diffs = []
    for name in row["evals"]:
        mine, theirs = row["evals"][name], evaluated["evals"][name]
        assert mine["set_id"] == theirs["set_id"] == sets[name]["set_id"] and mine["n_sequences"] == N
        for key in ("entropy_mae_bits", "kl_bits", "entropy_mae_positional_bits"):
            diffs.append(abs(mine[key] - theirs[key]))
            ci = key.replace("_bits", "_ci")
            assert mine[ci] == pytest.approx(theirs[ci], rel=1e-9, abs=1e-12)
        assert mine["floors"] == theirs["floors"]
    assert max(diffs) < 1e-9, diffs
    records = {(r.arch, r.seed): r for r in read_records(db)}
    given, model = records[("plain-forward", 1)], records[("transformer", 1)]
    for name in ("values", "values+query"):
        assert given.curves[name].entropy_mae == pytest.approx(model.curves[name].entropy_mae, rel=1e-9, abs=1e-12)
    assert given.config["train"] is None and given.code["model"]["contents"].startswith("not recorded")
    assert given.permutation is None and given.learning_curve is None
    # the same files scored again replace their row rather than add one
    assert main(["score", "--predictions", *files, "--name", "plain-forward", "--seed", "1", "--db", db]) == 0
    capsys.readouterr()
    assert sum(r.arch == "plain-forward" for r in read_records(db)) == 1


def _uniform_file(path: str, entry: dict, kind: str = "probs", values=None) -> str:
    n, length, c = entry["n_sequences"], entry["seq_len"], entry["num_classes"]
    if values is None:
        values = np.full((n, length, c), 1.0 / c) if kind == "probs" else np.full((n, length, c), -math.log(c))
    return write(path, values, entry["key"], kind)


def test_uniform_predictions_score_the_uniform_floor(tmp_path, capsys):
    """A file predicting 1/C everywhere is the uniform floor: the same number, computed on the same sequences."""
    assert main(["data", "export", "hmm", "--sequences", "24", "--eval", "K=20", "--out", str(tmp_path / "s")]) == 0
    capsys.readouterr()
    (entry,) = json.load(open(tmp_path / "s" / "bayesbench.json"))["sets"]
    path = _uniform_file(str(tmp_path / "u.npy"), entry, "log_probs")
    db = str(tmp_path / "r.sqlite")
    assert main(["score", "--predictions", path, "--name", "uniform-guess", "--db", db]) == 0
    (r,) = read_records(db)
    ev = r.evals["K=20"]
    assert r.task_label == "hmm S=5 K=20 rows" and list(r.evals) == ["K=20"] and r.permutation is None
    for metric in ("entropy_mae", "kl", "entropy_mae_positional"):
        assert getattr(ev, metric).mean == pytest.approx(ev.floors["uniform"][metric].mean, abs=1e-12)
    assert "hmm S=5 K=20 rows | K=20 (trained) | uniform-guess" in capsys.readouterr().out


@pytest.fixture
def exported(tmp_path, capsys):
    assert main(["data", "export", "bijection", "--sequences", "16", "--out", str(tmp_path / "set")]) == 0
    assert main(["data", "export", "bijection", "--split", "curve", "--sequences", "16",
                 "--out", str(tmp_path / "curve")]) == 0
    capsys.readouterr()
    sets = {s["name"]: s for s in json.load(open(tmp_path / "set" / "bayesbench.json"))["sets"]}
    curve = json.load(open(tmp_path / "curve" / "bayesbench.json"))["sets"][0]
    return sets, curve


def _bad(tmp_path, capsys, argv: list[str], rule: str) -> None:
    db = str(tmp_path / "bad.sqlite")
    assert main(["score", *argv, "--name", "mine", "--db", db]) == 2
    err = capsys.readouterr().err.strip()
    assert rule in err, err
    assert "\n" not in err and "Traceback" not in err, err
    assert read_records(db) == []  # nothing stored


def test_bad_prediction_files_are_refused_with_their_rule_and_nothing_stored(tmp_path, capsys, exported, monkeypatch):
    sets, curve = exported
    values = sets["values"]
    n, length, c = values["n_sequences"], values["seq_len"], values["num_classes"]
    uniform = np.full((n, length, c), 1.0 / c)
    scored = next(t for t in range(length) if t % 2 == 0)  # a value position: scored in every sequence

    wrong = _uniform_file(str(tmp_path / "shape.parquet"), values, values=uniform[:, :, :-1] / (1 - 1 / c))
    _bad(tmp_path, capsys, ["--predictions", wrong], f"shape [{n}, {length}, {c - 1}] is not the set's [N, L, C] = "
                                                     f"[{n}, {length}, {c}] (rule: one predictive of C classes")
    nan = uniform.copy()
    nan[3, scored, 0] = np.nan
    _bad(tmp_path, capsys, ["--predictions", _uniform_file(str(tmp_path / "nan.npy"), values, values=nan)],
         f"not finite (NaN or inf) at 1 scored position(s), first at sequence 3, position {scored} (rule: finite")
    off = uniform.copy()
    off[5, scored] *= 1.01
    _bad(tmp_path, capsys, ["--predictions", _uniform_file(str(tmp_path / "off.parquet"), values, values=off)],
         f"not normalised: the probabilities at sequence 5, position {scored} sum to 1.01 (rule: at every scored "
         f"position they sum to 1 within {NORMALISED_ATOL:g})")
    logs = np.log(off)
    _bad(tmp_path, capsys, ["--predictions", _uniform_file(str(tmp_path / "offlog.npy"), values, "log_probs", logs)],
         "not normalised: exp(log_probs) at sequence 5, position 0 sums to 1.01 (rule: at every scored position "
         "logsumexp(log_probs) is within 0.0001 of 0)")
    another = _uniform_file(str(tmp_path / "curve.parquet"), curve)
    _bad(tmp_path, capsys, ["--predictions", another], f"set {curve['set_id']} is not an evaluation set of preset "
                                                       "'quick' with 16 sequences (rule: a file is scored against the "
                                                       "set it was made for")
    older = _uniform_file(str(tmp_path / "older.parquet"), values)
    monkeypatch.setattr(BijectionTask, "version", 2)  # the tunnel changed since the set was exported
    _bad(tmp_path, capsys, ["--predictions", older], 'made for tunnel bijection code {"version": 1}, which is '
                                                     '{"version": 2} now (rule: predictions are scored only on the '
                                                     "sets of the tunnel's current version")


def test_refusals_of_the_file_form_and_of_a_call(tmp_path, capsys, exported):
    sets, _ = exported
    values, query = sets["values"], sets["values+query"]
    good = _uniform_file(str(tmp_path / "good.parquet"), values)
    np.save(str(tmp_path / "nokey.npy"), np.zeros((16, 15, 8)))
    table = pq.read_table(good).drop_columns(["set_id"])
    pq.write_table(table, str(tmp_path / "noid.parquet"))
    negative = np.full((16, 15, 8), 1 / 8)
    negative[0, 0, :2] = [-0.5, 0.5 + 1 / 8 + 1 / 8]
    for argv, rule in (
            (["--predictions", str(tmp_path / "nokey.npy")],
             "(rule: an .npy file's set is named by the JSON beside it"),
            (["--predictions", str(tmp_path / "noid.parquet")], "no column 'set_id' (rule: one row per sequence"),
            (["--predictions", str(tmp_path / "missing.parquet")], "--predictions: no such file"),
            (["--predictions", str(tmp_path / "set")], f"--predictions {tmp_path / 'set'} is a folder; give a "
                                                       "predictions file (.parquet or .npy)"),
            (["--predictions", _uniform_file(str(tmp_path / "neg.npy"), values, values=negative)],
             "a negative probability at sequence 0, position 0 (rule: probabilities lie in [0, 1])"),
            (["--predictions", _uniform_file(str(tmp_path / "q.parquet"), query)],
             "no file of bijection V=8 L=7 repl's primary evaluation set 'values' (rule: a row holds its task's "
             "primary evaluation"),
            (["--predictions", good, good], "two files of the set values (rule: one file per evaluation set)"),
            (["--predictions", good, "--checkpoint", "x.pt"], "--predictions are scored as given: --checkpoint cannot "
                                                              "go with them (the predictions stand for the weights)"),
            (["--predictions", good, "--device", "cuda"], "--device cannot go with them (nothing runs a model)"),
            (["--predictions", str(tmp_path / "set" / values["file"])],
             "this is an exported set (its tokens and exact posterior, from bayesbench data export), not a model's "
             "predictions"),
            ([], "score needs --model SPEC and --checkpoint FILE (a model's weights), or --predictions FILE")):
        _bad(tmp_path, capsys, argv, rule)
    assert main(["score", "--predictions", good, "--db", str(tmp_path / "x.sqlite")]) == 2
    assert "--predictions needs --name NAME" in capsys.readouterr().err


def test_probabilities_log_probabilities_and_the_posterior_itself(tmp_path, capsys, exported):
    """probs and log_probs of the same predictive give the same row; the exact posterior itself
    (zeros included, where a value is already taken) scores 0; a probability of 0 where the
    posterior has mass is refused (its KL would be infinite)."""
    sets, _ = exported
    values = sets["values"]
    rng = np.random.default_rng(0)
    q = rng.dirichlet(np.ones(8), size=(16, 15))
    db = str(tmp_path / "r.sqlite")
    assert main(["score", "--predictions", _uniform_file(str(tmp_path / "p.parquet"), values, values=q),
                 "--name", "as-probs", "--db", db]) == 0
    assert main(["score", "--predictions", _uniform_file(str(tmp_path / "l.npy"), values, "log_probs", np.log(q)),
                 "--name", "as-logs", "--db", db]) == 0
    posterior = pq.read_table(str(tmp_path / "set" / values["file"]), columns=["posterior"]).column("posterior")
    bayes = posterior.combine_chunks().flatten().flatten().to_numpy().reshape(16, 15, 8).astype(np.float64)
    bayes[bayes.sum(-1) == 0] = 1 / 8  # unscored positions: any distribution (they are not read)
    assert (bayes == 0).any()
    assert main(["score", "--predictions", _uniform_file(str(tmp_path / "b.parquet"), values, values=bayes),
                 "--name", "bayes", "--db", db]) == 0
    capsys.readouterr()
    rows = {r.arch: r for r in read_records(db)}
    a, b = rows["as-probs"].evals["values"], rows["as-logs"].evals["values"]
    assert a.kl.mean == pytest.approx(b.kl.mean, rel=1e-12) and a.entropy_mae.mean == pytest.approx(b.entropy_mae.mean)
    assert a.kl.mean > 0.1
    exact = rows["bayes"].evals["values"]
    assert exact.kl.mean == pytest.approx(0, abs=1e-6) and exact.entropy_mae.mean == pytest.approx(0, abs=1e-6)
    wrong = bayes[:, :, ::-1].copy()  # mass moved to classes the posterior rules out, and zeros where it has mass
    _bad(tmp_path, capsys, ["--predictions", _uniform_file(str(tmp_path / "w.parquet"), values, values=wrong)],
         "a probability of 0 at sequence 0, position 2 for a class the exact posterior gives mass (rule: "
         "KL(posterior || prediction) must be finite")


def test_an_outside_tunnels_set_is_scored_with_its_task_named(tmp_path, capsys):
    tunnel = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "outside_tunnel.py")
    spec = f"{tunnel}:build"
    assert main(["data", "export", spec, "--task-args", "L=6", "--sequences", "8",
                 "--out", str(tmp_path / "coin")]) == 0
    capsys.readouterr()
    (entry,) = json.load(open(tmp_path / "coin" / "bayesbench.json"))["sets"]
    path = _uniform_file(str(tmp_path / "coin.parquet"), entry)
    _bad(tmp_path, capsys, ["--predictions", path], "a set exported with --task-args or of your own tunnel needs the "
                                                    "same --task and --task-args here")
    db = str(tmp_path / "r.sqlite")
    assert main(["score", "--predictions", path, "--task", spec, "--task-args", "L=6", "--name", "coin-uniform",
                 "--db", db]) == 0
    capsys.readouterr()
    (r,) = read_records(db)
    assert r.task == "coin" and r.evals["standard"].set_id == entry["set_id"]
    assert r.evals["standard"].kl.mean == pytest.approx(r.evals["standard"].floors["uniform"]["kl"].mean)


def test_a_store_that_cannot_be_written_is_named_before_any_set_is_drawn(tmp_path, capsys, exported):
    """A --db in a folder that cannot hold one was an OSError on the evaluation cache beside it
    ('[Errno 20] Not a directory: .../cache', exit 1), raised while drawing the sets."""
    sets, _ = exported
    good = _uniform_file(str(tmp_path / "good.parquet"), sets["values"])
    (tmp_path / "afile").write_text("not a folder")
    db = tmp_path / "afile" / "r.sqlite"
    assert main(["score", "--predictions", good, "--name", "mine", "--db", str(db)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"results store {db}: its folder {tmp_path / 'afile'} cannot be created" in err and "\n" not in err, err


def test_an_npy_file_is_checked_from_its_header_before_its_numbers_are_read(tmp_path, capsys, exported):
    """issue 39: an empty .npy was "internal error: EOFError", and a huge one was read whole before its shape
    was compared with the set's."""
    import tracemalloc

    values = exported[0]["values"]
    n, length, c = values["n_sequences"], values["seq_len"], values["num_classes"]

    def npy(name: str, array=None, raw: bytes | None = None) -> str:
        path = str(tmp_path / name)
        if raw is not None:
            Path(path).write_bytes(raw)
        else:
            np.save(path, array, allow_pickle=True)
        Path(path[:-4] + ".json").write_text(json.dumps({**values["key"], "kind": "probs"}))
        return path

    uniform = np.full((n, length, c), 1.0 / c)
    saved = Path(npy("good.npy", uniform)).read_bytes()
    for path, rule in (
            (npy("empty.npy", raw=b""), "empty (rule: an .npy file of the numbers [N, L, C], as numpy.save writes it)"),
            (npy("text.npy", raw=b"not numbers\n"), "not an .npy array ("),
            (npy("cut.npy", raw=saved[:-100]), f"cut short: its header says [{n}, {length}, {c}] float64"),
            (npy("flat.npy", uniform.reshape(n, -1)), f"shape [{n}, {length * c}] is not [N, L, C]"),
            (npy("ints.npy", uniform.astype(np.int64)), "the numbers must be floating-point, got int64"),
            (npy("objects.npy", uniform.astype(object)),
             "the numbers must be floating-point, got object (Python objects are never read from a file)"),
            (npy("fewer.npy", uniform[:-1]), f"{n - 1} sequences, but its key names a set of {n}")):
        _bad(tmp_path, capsys, ["--predictions", path], f"predictions {path}: {rule}")
    from numpy.lib import format as npy_format

    with open(tmp_path / "v3.npy", "wb") as f:  # format 3.0 (a UTF-8 header), as numpy.save may write it
        npy_format.write_array(f, uniform, version=(3, 0))
    npy("v3.npy", raw=(tmp_path / "v3.npy").read_bytes())
    capsys.readouterr()
    assert main(["score", "--predictions", str(tmp_path / "v3.npy"), "--name", "mine", "--db",
                 str(tmp_path / "ok.sqlite")]) == 0
    assert capsys.readouterr().err == ""  # not even torch's warning about a read-only (mapped) array
    # a file whose positions are far too many: its header alone is read, not its 200 MB of numbers
    huge = str(tmp_path / "huge.npy")
    header = Path(npy("huge.npy", np.zeros((n, 1, c)))).read_bytes()
    head = header[:-n * c * 8].replace(f"({n}, 1, {c})".encode(), f"({n}, 200000, {c})".encode())
    with open(huge, "wb") as f:
        f.write(head)
        f.truncate(len(head) + n * 200000 * c * 8)  # sparse: no disk used
    tracemalloc.start()
    try:
        _bad(tmp_path, capsys, ["--predictions", huge], f"shape [{n}, 200000, {c}] is not the set's [N, L, C]")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50e6, peak


def test_out_of_memory_advice_names_only_what_the_command_takes(tmp_path, capsys, exported, monkeypatch):
    """issue 39: `score --predictions` out of memory advised "a smaller --eval-sequences", a flag it refuses."""
    from bayesbench.data import score

    def no_memory(*_args, **_kwargs):
        raise MemoryError

    monkeypatch.setattr(score, "read", no_memory)
    good = _uniform_file(str(tmp_path / "good.parquet"), exported[0]["values"])
    assert main(["score", "--predictions", good, "--name", "mine", "--db", str(tmp_path / "r.sqlite")]) == 1
    err = capsys.readouterr().err.strip()
    assert err == ("bayesbench score: out of memory (the predictions and their evaluation sets are held whole: "
                   "predict on a smaller set, bayesbench data export TASK --sequences N)"), err


def test_a_predictions_row_shows_the_steps_stated_and_no_measured_looking_zero(tmp_path, capsys):
    """`score --predictions` rows showed steps 0 and wall 0 on the leaderboard as if measured: the
    steps are now what `--steps` states ('-' when not stated), the wall time '-'."""
    from bayesbench.data.export import export

    export("bijection", out=str(tmp_path / "set"), sequences=32, evals=["values"])
    entry = json.load(open(tmp_path / "set" / "bayesbench.json"))["sets"][0]
    n, length, classes = entry["n_sequences"], entry["seq_len"], entry["num_classes"]
    path = str(tmp_path / "uniform.parquet")
    pq.write_table(pa.table({"sequence": np.arange(n), "probs": [np.full((length, classes), 1 / classes).tolist()] * n,
                             **{k: [v] * n for k, v in entry["key"].items()}}), path)
    db = str(tmp_path / "r.sqlite")
    assert main(["score", "--predictions", path, "--name", "stated", "--steps", "3000", "--db", db]) == 0
    assert main(["score", "--predictions", path, "--name", "unstated", "--db", db]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "--db", db]) == 0
    table = capsys.readouterr().out
    cells = {line.split(" | ")[2].split(" (")[0]: [c.strip() for c in line.split(" | ")[3:7]]
             for line in table.splitlines() if " | values (trained) | " in line}
    # params, state (issue 43: predictions have no model whose state could be counted: said, not a number), steps, wall
    assert cells == {"stated": ["-", "no model", "3000", "-"], "unstated": ["-", "no model", "-", "-"]}, cells
    assert "- state 'no model' = a row scored from predictions made elsewhere" in table
    assert [r.steps for r in sorted(read_records(db), key=lambda r: r.arch)] == [3000, 0]
    state = read_records(db)[0].config["state"]
    assert state["floats"] is None and state["no_model"] and state["length"] == length
    assert main(["leaderboard", "--db", db, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["state_floats"] for r in rows] == [None, None]
    assert main(["score", "--predictions", path, "--name", "bad", "--steps", "-5", "--db", db]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--steps must be an integer >= 0" in err, err


def test_a_file_for_another_set_of_the_same_shape_is_refused_naming_both_ids(tmp_path, capsys, exported):
    """'values+query' predictions (the same [N, L, C] as 'values', other sequences) under the key of
    'values': a parquet written from the exported table keeps the export's metadata naming its set,
    which must be the set the key names; and a file is checked against the id of the set it is
    scored on, not only its shape."""
    sets, _ = exported
    values, both = sets["values"], sets["values+query"]
    table = pq.read_table(str(tmp_path / "set" / both["file"]))  # the export's own table, its metadata kept
    n, length, c = both["n_sequences"], both["seq_len"], both["num_classes"]
    uniform = np.full((n, length, c), 1.0 / c)
    made = table.select(["sequence"]).append_column("probs", pa.array([u.tolist() for u in uniform]))
    for k, v in values["key"].items():
        made = made.append_column(k, pa.array([v] * n))
    made = made.replace_schema_metadata(table.schema.metadata)
    pq.write_table(made, str(tmp_path / "wrong.parquet"))
    _bad(tmp_path, capsys, ["--predictions", str(tmp_path / "wrong.parquet")],
         f"its key names set {values['set_id']} but it was made from the exported set {both['set_id']} (rule: a "
         "file's key is the key of the set its predictions are of")
    right = read(_uniform_file(str(tmp_path / "right.npy"), values, "log_probs"))
    spec = evaluation_sets(task_setup("bijection", None, "quick"), n)["values+query"]
    with pytest.raises(ValueError, match=f"its key names set {values['set_id']} but it is scored against "
                                         f"{both['set_id']}"):
        check(right, spec.draw(), spec.set_id)
