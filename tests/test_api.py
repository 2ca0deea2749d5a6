"""The Python API (bayesbench/api.py): run, train, leaderboard and records do what the commands do,
return plain rows with .to_pandas(), and refuse bad arguments with one ValueError naming the argument."""

from __future__ import annotations

import inspect
import json
import math
import subprocess
import sys
import textwrap

import pytest

import bayesbench
from bayesbench import api
from bayesbench.cli import main

TINY = dict(tasks="bijection", archs="mlp", steps=20, eval_sequences=64, curve_sequences=32, quiet=True)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A tiny store: `bayesbench.run` of one job (1 seed) and `bayesbench.train` of the same job with 2 seeds."""
    root = tmp_path_factory.mktemp("api")
    db, runs = str(root / "tiny.sqlite"), str(root / "runs")
    rows = bayesbench.run(seeds=1, db=db, runs_dir=runs, **TINY)
    result = bayesbench.train("bijection", "mlp", seeds=[0, 1], steps=20, eval_sequences=64, curve_sequences=32,
                              db=db, runs_dir=runs, quiet=True)
    return {"db": db, "runs": runs, "rows": rows, "result": result}


def test_importing_the_package_loads_neither_the_api_nor_torch():
    code = "import sys, bayesbench; print(json.dumps(['torch' in sys.modules, 'bayesbench.api' in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [False, False]
    assert bayesbench.run is api.run and bayesbench.train is api.train  # loaded on first use
    assert {"run", "train", "leaderboard", "records", "__version__"} <= set(dir(bayesbench))


def test_the_compiled_extension_imports_on_its_own():
    """`python -c "import bayesbench._C"` failed (ImportError: libc10.so) unless torch was imported
    first, while `bayesbench --version` said the extension was installed: the extension links
    torch's libraries, which only `import torch` loads. Importing it loads torch first; importing
    the package alone still does not."""
    import glob
    import os

    if not glob.glob(os.path.join(os.path.dirname(bayesbench.__file__), "_C*.so")):
        pytest.skip("bayesbench._C is not built in this checkout")
    code = ("import sys; import bayesbench._C as C, bayesbench.ops as ops; import torch; "
            "print(json.dumps([C.__name__, hasattr(torch.ops.bayesbench, 'hmm_filter'), ops.extension_status()]))")
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)[:2] == ["bayesbench._C", True] and json.loads(out.stdout)[2].startswith("built")
    for form in ("from bayesbench import _C", "import importlib; importlib.import_module('bayesbench._C')"):
        assert subprocess.run([sys.executable, "-c", form], capture_output=True, text=True).returncode == 0, form


def test_run_returns_its_stored_rows_as_the_command_makes_them(store, tmp_path, capsys):
    (row,) = store["rows"]
    assert isinstance(store["rows"], api.Rows) and row["seed"] == 0 and row["arch"] == "mlp" and row["steps"] == 20
    assert row["task_label"] == "bijection V=8 L=7 repl" and row["eval_sequences"] == 64
    assert row["environment"]["bayesbench"] == bayesbench.__version__ and row["environment"]["git_commit"]
    # the command with the same settings is the same job: found in the store, not trained again
    capsys.readouterr()
    assert main(["run", "--tasks", "bijection", "--archs", "mlp", "--steps", "20", "--seeds", "1", "--eval-sequences",
                 "64", "--curve-sequences", "32", "--db", store["db"], "--runs-dir", store["runs"], "--json",
                 "--no-progress"]) == 0
    (cli_row,) = json.loads(capsys.readouterr().out)["runs"]
    assert cli_row["run_id"] == row["run_id"] and cli_row["entropy_mae_bits"] == row["entropy_mae_bits"]
    again = bayesbench.run(seeds=1, db=store["db"], runs_dir=store["runs"], **TINY)
    assert again[0]["created_at"] == row["created_at"]  # the stored row, not a new one


def test_train_returns_its_numbers_and_curves(store):
    result = store["result"]
    assert result.seeds == [0, 1] and result.arch == "mlp" and result.primary == "values"
    per_seed = [r["evals"]["values"]["entropy_mae_bits"] for r in result.rows]
    assert result.metrics()["entropy_mae"] == pytest.approx(sum(per_seed) / 2, rel=1e-12)
    assert set(result.metrics("values+query")) == {"entropy_mae", "entropy_mae_positional", "kl"}
    with pytest.raises(ValueError, match="eval must be one of values, values"):
        result.metrics("nope")
    curves = result.learning_curves
    assert {c["seed"] for c in curves} == {0, 1} and max(c["step"] for c in curves) == 20
    assert all(math.isfinite(c["entropy_mae"]) for c in curves)
    positions = [p for p in result.position_curves if p["seed"] == 0 and p["eval"] == "values"]
    assert len(positions) == 7 and all(p["bayes_entropy"] >= 0 for p in positions)  # the 7 value predictions
    trained = result.load()
    assert trained.seeds == [0, 1] and trained.steps == 20
    assert result.key in repr(result) and result.run_dir.endswith(result.key)


def test_leaderboard_pools_the_seeds_of_one_configuration(store):
    board = bayesbench.leaderboard(db=store["db"])
    assert [(r["eval"], r["arch"]) for r in board] == [("values", "mlp"), ("values+query", "mlp")]
    top = board[0]
    assert top["seeds"] == [0, 1] and top["n_runs"] == 2  # run's seed 0 and train's seeds 0, 1: one configuration
    assert top["entropy_mae_bits"] == pytest.approx(sum(top["per_seed_bits"]) / 2, rel=1e-12)
    assert top["ci_bits"][0] <= top["entropy_mae_bits"] <= top["ci_bits"][1]
    assert set(top["floors_bits"]) == {"uniform", "marginal"} and top["metric"] == "entropy_mae"
    frame = board.to_pandas()
    assert list(frame["arch"]) == ["mlp", "mlp"] and frame.loc[0, "entropy_mae_bits"] == top["entropy_mae_bits"]
    assert len(bayesbench.leaderboard(db=store["db"], per_run=True)) == 4  # two runs x two evaluation sets
    assert bayesbench.leaderboard(db=store["db"], task="hmm") == []


def test_records_are_the_stored_rows(store):
    rows = bayesbench.records(db=store["db"])
    assert sorted((r["run_id"], r["seed"]) for r in rows) == sorted(
        [(store["rows"][0]["run_id"], 0), (store["result"].key, 0), (store["result"].key, 1)])
    assert [r["seed"] for r in bayesbench.records(db=store["db"], run_ids=[store["result"].key])] == [0, 1]
    assert bayesbench.records(db=store["db"], arch="lstm") == []


def test_rows_to_pandas_says_how_to_get_pandas(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if not installed
    with pytest.raises(ImportError, match="pip install pandas"):
        api.Rows([{"a": 1}]).to_pandas()


@pytest.mark.parametrize("call,message", [
    (lambda: bayesbench.run(steps=0), r"bayesbench.run\(steps=...\) must be a positive integer, got 0"),
    (lambda: bayesbench.run(stepz=3), r"bayesbench.run: unknown setting 'stepz' \(did you mean 'steps'\?\)"),
    (lambda: bayesbench.run(preset="huge"), r"bayesbench.run\(preset=...\) must be one of paper, quick"),
    (lambda: bayesbench.run(seeds=[0, 0]), r"bayesbench.run\(seeds=...\) must list distinct"),
    (lambda: bayesbench.run(train_args={"lrr": 1}), r"bayesbench.run\(train_args=...\): unknown training setting"),
    (lambda: bayesbench.run(train_args=[1]), r"bayesbench.run\(train_args=...\) must be a table of settings"),
    (lambda: bayesbench.run(compile="yes"), r"bayesbench.run\(compile=...\) must be true or false"),
    (lambda: bayesbench.run(archs="nope", quiet=True), r"bayesbench.run: unknown arch 'nope'"),
    (lambda: bayesbench.run(tasks="bijection", archs="mlp", task_args={"L": -1}, quiet=True),
     r"bayesbench.run\(task_args=...\) for task 'bijection': L must be a positive integer"),
    (lambda: bayesbench.train("bijection", "mlp", seeds=3), r"bayesbench.train\(seeds=...\) must be a list of seeds"),
    (lambda: bayesbench.train("bijection"), r"bayesbench.train: give exactly one of arch .* and model"),
    (lambda: bayesbench.records(db="no-such.sqlite"),
     r"bayesbench.records\(db='no-such.sqlite'\): no store at no-such.sqlite"),
    (lambda: bayesbench.records(run_ids="abc"), r"bayesbench.records\(run_ids=...\) must be a list of run ids"),
    (lambda: bayesbench.leaderboard(metric="mse"), r"bayesbench.leaderboard\(metric=...\): metric must be one of"),
    (lambda: bayesbench.leaderboard(threshold=-1), r"bayesbench.leaderboard\(threshold=...\): "),
    # probe2 A14, A7, A6, A15, A25, A24, A44, A37, A38: each names the argument it is about
    (lambda: bayesbench.run(quite=True), r"unknown setting 'quite' \(did you mean 'quiet'\?\)"),
    (lambda: bayesbench.run(seeds={0, 1}), r"bayesbench.run\(seeds=...\) must be a count or a list of integer seeds"),
    (lambda: bayesbench.run(seeds=True), r"bayesbench.run\(seeds=...\) must be a count or a list of integer seeds"),
    (lambda: bayesbench.run(config="none.toml"), r"bayesbench.run\(config=...\): none.toml: no such file"),
    (lambda: bayesbench.run(config="."), r"bayesbench.run\(config=...\): . is a folder"),
    (lambda: bayesbench.run(replay=""), r"bayesbench.run\(replay=...\) is empty"),
    (lambda: bayesbench.leaderboard(curve_metric="mse"), r"bayesbench.leaderboard\(curve_metric=...\): "),
    (lambda: bayesbench.records(latest="no"), r"bayesbench.records\(latest=...\) must be True or False, got 'no'"),
    (lambda: bayesbench.leaderboard(db="."), r"bayesbench.leaderboard\(db='.'\) is a folder"),
    (lambda: bayesbench.leaderboard(latest=True, per_run=True), r"at most one of latest and per_run"),
])
def test_a_bad_argument_is_one_value_error_naming_it(call, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=message) as err:
        call()
    assert "\n" not in str(err.value)
    assert not (tmp_path / "runs").exists()  # refused before anything ran


def test_a_config_file_gives_the_settings_the_arguments_override(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('preset = "quick"\nsteps = 7\nseeds = [2]\n[train_args]\nlr = 0.004\n')
    request = api._run_request("quick", None, None, None, 9, None, None, None, None, "runs", path, None, True, {})
    assert (request.steps, request.seeds, request.train_args) == (9, (2,), {"lr": 0.004})


def _example(function) -> str:
    """The code of a docstring's "Example:" (its indented block)."""
    doc = inspect.getdoc(function)
    lines = doc.split("Example:\n", 1)[1].splitlines()
    return textwrap.dedent("\n".join(line for line in lines if line.startswith("    ") or not line.strip()))


def test_each_api_docstring_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for function in (api.run, api.train, api.records, api.leaderboard):
        code = _example(function)
        assert "bayesbench." in code and "tiny.sqlite" in code, function.__name__
        exec(compile(code, f"{function.__name__} docstring", "exec"), {"bayesbench": bayesbench})
    assert len(bayesbench.records(db="tiny.sqlite")) == 1 + 2  # run's seed 0; train's and leaderboard's seeds 0, 1


def test_run_replays_a_stored_run(store, tmp_path, capsys):
    import glob

    key = store["rows"][0]["run_id"]
    (run_file,) = glob.glob(f"{store['runs']}/**/*-{key}/run.json", recursive=True)
    capsys.readouterr()
    rows = bayesbench.run(replay=run_file, db=str(tmp_path / "again.sqlite"), runs_dir=str(tmp_path / "runs"))
    assert "every number equals the stored run's to the last digit" in capsys.readouterr().out
    assert [(r["run_id"], r["seed"], r["evals"]) for r in rows] == [
        (r["run_id"], r["seed"], r["evals"]) for r in store["rows"]]
    with pytest.raises(ValueError, match=r"bayesbench.run\(replay=...\) runs exactly .* and steps=... would change it"):
        bayesbench.run(replay=run_file, steps=30, db=str(tmp_path / "again.sqlite"))


def test_seeds_may_be_a_range(tmp_path):
    """probe2 A7: range(2) was refused as 'must be a number'."""
    assert api._request({"seeds": range(2)}, "run", "bayesbench.run", ()).seeds == (0, 1)


def test_a_task_or_arch_that_matches_nothing_stored_is_an_error_as_in_the_command(store):
    """probe2 A35: leaderboard(task="nope") returned [] where `leaderboard --task nope` names the stored
    tasks. A built-in task or architecture with nothing stored yet is an empty result."""
    for function in (bayesbench.leaderboard, bayesbench.records):
        with pytest.raises(ValueError, match=r"no stored results match task='nope' .* stored tasks: bijection"):
            function(db=store["db"], task="nope")
        with pytest.raises(ValueError, match=r"no stored results match arch='mpl' .* stored archs: mlp"):
            function(db=store["db"], arch="mpl")
        assert function(db=store["db"], task="bijection")  # a match still gives its rows
        assert function(db=store["db"], task="hmm") == function(db=store["db"], arch="gru") == []  # none stored yet


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_loading_on_a_missing_device_says_so_not_damaged(store):
    """probe2 A33: load(device="cuda") without CUDA called the intact checkpoint 'damaged'."""
    with pytest.raises(ValueError, match=r"TrainedRun.load\(device=...\): cuda: no CUDA device is available here"):
        store["result"].load(device="cuda")


def test_an_interrupted_run_says_what_was_kept_and_how_to_go_on(monkeypatch, tmp_path):
    """probe2 A50: Ctrl-C during bayesbench.run raised Interrupted('SIGINT') and said nothing more."""
    from bayesbench.running.interrupt import Interrupted
    from bayesbench.sweep import engine

    def stopped(*_args, **_kwargs):
        stop = Interrupted("SIGINT")
        stop.stopped.append({"run": "bijection / mlp", "step": 7, "steps": 20, "phase": "training",
                             "checkpoint": str(tmp_path / "runs" / "x" / "checkpoint.pt")})
        raise stop

    monkeypatch.setattr(engine, "run", stopped)
    with pytest.raises(KeyboardInterrupt) as err:
        bayesbench.run(seeds=1, db=str(tmp_path / "a.sqlite"), runs_dir=str(tmp_path / "runs"), **TINY)
    assert isinstance(err.value, Interrupted)
    message = str(err.value)
    assert message.startswith("bayesbench.run: interrupted by SIGINT: stopped bijection / mlp at step 7 of 20")
    assert f"checkpoints kept in {tmp_path / 'runs' / 'x'}" in message
    assert "call bayesbench.run again to continue" in message


def test_a_script_without_the_main_guard_is_told_to_add_it(tmp_path):
    """probe2 A55: a script calling bayesbench.run with two jobs at its top level failed every job with
    multiprocessing's bootstrapping error ('a worker process died 3 times'): the spawned workers run the
    script again. Now each worker says why in one line, and the error names the guard."""
    script = tmp_path / "study.py"
    script.write_text("import bayesbench\n"
                      "bayesbench.run(tasks='bijection', archs=['mlp', 'lstm'], steps=2, seeds=1, eval_sequences=64,\n"
                      "               curve_sequences=32, max_retries=0, quiet=True, db='s.sqlite')\n")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert "An attempt has been made to start a new process" not in proc.stderr
    assert "bayesbench.run was called while a worker process was starting" in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert f"The worker processes run your script {script} again" in last
    assert 'under `if __name__ == "__main__":`' in last


def test_a_slice_sum_or_copy_of_rows_is_rows():
    """probe2 A58, A59, A61: board[:3].to_pandas(), (a + b).to_pandas() and rows.copy().to_pandas() raised
    "'list' object has no attribute 'to_pandas'"."""
    rows = api.Rows([{"a": 1}, {"a": 2}, {"a": 3}])
    for got in (rows[:2], rows + rows, rows.copy(), rows[::-1]):
        assert isinstance(got, api.Rows)
    assert rows[:2] == [{"a": 1}, {"a": 2}] and len(rows + rows) == 6 and rows[1] == {"a": 2}


def test_a_quiet_replay_still_says_how_its_numbers_compare(store, tmp_path, capsys):
    """probe2 A67: run(replay=..., quiet=True) dropped the comparison with the stored numbers, the replay's result."""
    import glob

    key = store["rows"][0]["run_id"]
    (run_file,) = glob.glob(f"{store['runs']}/**/*-{key}/run.json", recursive=True)
    capsys.readouterr()
    bayesbench.run(replay=run_file, db=str(tmp_path / "q.sqlite"), runs_dir=str(tmp_path / "runs"), quiet=True)
    out = capsys.readouterr().out
    assert "every number equals the stored run's to the last digit" in out and "step" not in out


@pytest.mark.parametrize("tune_args", [["lrs=[0.001,0.01]", "selection_seeds=1", "selection_sequences=16"],
                                       "lrs=[0.001,0.01]",
                                       {"lrs": [0.001, 0.01], "selection_seeds": 1, "selection_sequences": 16}])
def test_run_with_tune_returns_tuned_rows(tmp_path, tune_args):
    """bayesbench.run(tune=True, tune_args=...) returned untuned rows (the keyword was read and
    dropped): it tunes as `bayesbench run --tune --tune-args ...` does, tune_args as KEY=VALUE
    strings (one or a list) or a dict, and tune_args alone implies tune."""
    tune = {"tune": True} if not isinstance(tune_args, str) else {}
    rows = bayesbench.run(tasks="sticky", archs="mlp", steps=2, seeds=1, eval_sequences=64, jobs=1, quiet=True,
                          db=str(tmp_path / "t.sqlite"), runs_dir=str(tmp_path / "runs"), tune_args=tune_args, **tune)
    (row,) = rows
    assert row["tuning"]["chosen"]["lr"] in (0.001, 0.01) and row["tuning"]["lrs"] == [0.001, 0.01]


def test_run_with_tune_refuses_a_fixed_rate_naming_the_keyword(tmp_path):
    with pytest.raises(ValueError, match=r"^bayesbench.run\(train_args=\.\.\.\) lr=\.\.\.: tune chooses the learning "
                                         r"rate, a fixed one would be dropped \(rule"):
        bayesbench.run(tasks="sticky", archs="mlp", steps=2, seeds=1, tune=True, train_args={"lr": 1e-3},
                       db=str(tmp_path / "t.sqlite"), runs_dir=str(tmp_path / "runs"), quiet=True)
