"""Configurations that replay: `run --config FILE` (TOML), `--print-config` (TOML that --config reads
back to the same jobs), `--replay RUN` (the stored run again, to the last digit)."""

from __future__ import annotations

import glob
import json
import os
import tomllib

import pytest

from bayesbench.cli import main
from bayesbench.store.database import read_records

TINY = ["--tasks", "bijection", "--archs", "mlp", "--steps", "20", "--eval-sequences", "64", "--curve-sequences", "32",
        "--no-progress"]


def _print_config(capsys, *argv, notes: list | None = None) -> str:
    capsys.readouterr()
    assert main(["run", *argv, "--print-config"]) == 0
    out = capsys.readouterr()
    if notes is not None:
        notes.append(out.err)
    return out.out


def test_print_config_reads_back_to_the_same_jobs(tmp_path, capsys):
    text = _print_config(capsys, *TINY, "--seeds", "2", "--train-args", "lr=1e-3", "schedule=cosine",
                         "--model-args", "depth=3")
    settings = tomllib.loads(text)
    assert settings == {"preset": "quick", "steps": 20, "eval_sequences": 64, "no_progress": True,
                        "curve_sequences": 32, "train_args": {"lr": 1e-3, "schedule": "cosine"},
                        "model_args": {"depth": 3}, "tasks": ["bijection"], "archs": ["mlp"], "seeds": 2}
    keys = [line for line in text.splitlines() if ": key " in line]
    assert len(keys) == 1 and "bijection V=8 L=7 repl / mlp: key " in keys[0]
    path = tmp_path / "tiny.toml"
    path.write_text(text)
    assert _print_config(capsys, "--config", str(path)) == text  # the same settings, the same job keys


def test_flags_after_config_override_it_and_flags_before_keep_their_values(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text('tasks = "bijection"\narchs = ["mlp"]\nsteps = 20\nseeds = [3, 5]\n[train_args]\nlr = 0.002\n')
    after = tomllib.loads(_print_config(capsys, "--config", str(path), "--steps", "30"))
    before = tomllib.loads(_print_config(capsys, "--steps", "40", "--config", str(path)))
    assert (after["steps"], before["steps"]) == (30, 40)
    assert after["seeds"] == [3, 5] and after["train_args"] == {"lr": 0.002}
    assert "seeds [3, 5]" in _print_config(capsys, "--config", str(path))  # explicit seeds reach the job


@pytest.mark.parametrize("text,message", [
    ("epochs = 3\n", "unknown setting 'epochs'"),
    ("step = 3\n", "unknown setting 'step' (did you mean 'steps'?)"),
    ("steps = 0\n", "steps must be a positive integer, got '0'"),
    ("preset = 'huge'\n", "preset must be one of paper, quick, got 'huge'"),
    ("compile = 1\n", "compile must be true or false, got 1"),
    ("seeds = [0, 0]\n", "seeds must list distinct non-negative integers"),
    ("[train_args]\nlrr = 1\n", "train_args: unknown training setting 'lrr' (did you mean 'lr'?)"),
    ("[train_args]\nbeta1 = 1.5\n", "train_args beta1 must be"),
    ("steps = \n", "is not valid TOML"),
])
def test_a_bad_file_is_one_error_naming_the_key_and_the_file(tmp_path, capsys, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--config", str(path)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("bayesbench run: error: argument --config: ") and str(path) in err and message in err, err


def test_a_file_that_is_not_utf8_is_named(tmp_path, capsys):
    """issue 39: a UTF-16 config file was "argument --config: 'utf-8' codec can't decode byte 0xff in position 0",
    naming no file."""
    path = tmp_path / "u16.toml"
    path.write_text("steps = 20\n", encoding="utf-16")
    with pytest.raises(SystemExit):
        main(["run", "--config", str(path)])
    assert (f"argument --config: {path} is not UTF-8 text (byte 0: invalid start byte) (it is UTF-16: save it as "
            "UTF-8); a TOML file is UTF-8") in capsys.readouterr().err
    import bayesbench

    with pytest.raises(ValueError, match=f"bayesbench.run\\(config=...\\): {path} is not UTF-8 text"):
        bayesbench.run(config=str(path))
    path.write_text("steps = 20\n", encoding="utf-8-sig")  # UTF-8 with a byte-order mark: read
    assert tomllib.loads(_print_config(capsys, "--config", str(path)))["steps"] == 20


def test_a_missing_file_is_named(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["run", "--config", str(tmp_path / "none.toml")])
    assert f"{tmp_path / 'none.toml'}: no such file" in capsys.readouterr().err


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory):
    """A tiny stored run (2 seeds, 20 steps) and its run.json."""
    root = tmp_path_factory.mktemp("stored")
    assert main(["run", *TINY, "--seeds", "2", "--train-args", "lr=2e-3", "--db", str(root / "a.sqlite"),
                 "--runs-dir", str(root / "runs"), "--json"]) == 0
    (run_file,) = glob.glob(str(root / "runs" / "**" / "run.json"), recursive=True)
    return root, run_file


def _numbers(db: str) -> dict:
    return {(r.seed, name, metric): s.mean for r in read_records(db) for name, ev in r.evals.items()
            for metric, s in ev.metrics().items()} | {(r.seed, "loss"): r.final_loss for r in read_records(db)}


def test_replay_reproduces_the_stored_run_to_the_last_digit(stored_run, tmp_path, capsys):
    root, run_file = stored_run
    capsys.readouterr()
    assert main(["run", "--replay", run_file, "--db", str(tmp_path / "b.sqlite"), "--runs-dir", str(tmp_path / "runs"),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "--replay: every number equals the stored run's to the last digit (14 numbers" in out, out
    again, before = _numbers(str(tmp_path / "b.sqlite")), _numbers(str(root / "a.sqlite"))
    assert again == before and len(again) == 14
    (new_file,) = glob.glob(str(tmp_path / "runs" / "**" / "run.json"), recursive=True)
    assert json.load(open(new_file))["run_id"] == json.load(open(run_file))["run_id"]  # the same key


def test_replay_into_the_store_that_holds_it_trains_nothing(stored_run, capsys):
    root, run_file = stored_run
    capsys.readouterr()
    assert main(["run", "--replay", run_file, "--db", str(root / "a.sqlite"), "--runs-dir", str(root / "runs"),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "already holds this run" in out and "nothing was trained" in out


def test_replay_refuses_a_setting_that_would_change_the_run(stored_run, capsys):
    _, run_file = stored_run
    capsys.readouterr()
    assert main(["run", "--replay", run_file, "--steps", "30"]) == 2
    assert "--steps would change it" in capsys.readouterr().err


def test_replay_says_when_its_run_directory_exists(stored_run, tmp_path, capsys):
    root, run_file = stored_run
    notes = []
    _print_config(capsys, "--replay", run_file, "--db", str(tmp_path / "new.sqlite"), "--runs-dir", str(root / "runs"),
                  notes=notes)
    assert "its run directory" in notes[0] and "evaluated again, not trained again" in notes[0]
    assert main(["run", "--replay", str(run_file) + ".missing"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_replay_says_where_the_code_and_the_package_differ(stored_run, tmp_path, capsys):
    _, run_file = stored_run
    doc = json.load(open(run_file))
    doc["code"]["training"] = {"version": 99}
    doc["environment"].update(bayesbench="0.0.1", git_commit="0123456789abcdef", git_dirty=False)
    edited = tmp_path / "run.json"
    edited.write_text(json.dumps(doc))
    notes = []
    settings = tomllib.loads(_print_config(capsys, "--replay", str(edited), notes=notes))  # stdout: only the TOML
    assert "the code differs from the run's: the trainer code changed (version 99 then, version 1 now)" in notes[0]
    assert "the run was made by bayesbench 0.0.1 (commit 0123456789ab)" in notes[0]
    assert settings["seeds"] == [0, 1] and settings["train_args"]["lr"] == 2e-3 and settings["steps"] == 20


def test_replay_refuses_a_run_its_settings_no_longer_make(stored_run, tmp_path, capsys):
    _, run_file = stored_run
    doc = json.load(open(run_file))
    doc["config"]["identity"]["max_len"] += 1  # as if the preset's evaluation lengths had changed since
    edited = tmp_path / "run.json"
    edited.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["run", "--replay", str(edited), "--db", str(tmp_path / "c.sqlite")]) == 2
    assert "no longer resolve to the run it was: max_len differs (16 there, 15 here)" in capsys.readouterr().err


def test_replay_of_your_own_model(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    net = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "outside_net.py")
    common = ["--no-progress", "--eval-sequences", "64", "--curve-sequences", "32"]
    assert main(["run", "--model", f"{net}:build", "--tasks", "sticky", "--steps", "5", "--seeds", "1", *common,
                 "--db", "a.sqlite", "--runs-dir", "runs"]) == 0
    (run_file,) = glob.glob("runs/**/run.json", recursive=True)
    capsys.readouterr()
    assert main(["run", "--replay", run_file, "--db", "b.sqlite", "--runs-dir", "again", "--no-progress",
                 "--trust-code"]) == 0  # the run file names the model's file (tests/test_trust.py)
    assert "--replay: every number equals the stored run's to the last digit" in capsys.readouterr().out
    assert _numbers("a.sqlite") == _numbers("b.sqlite")


def test_an_empty_replay_is_refused_not_the_whole_preset(monkeypatch, capsys):
    """probe2 R7: `--replay ''` (an unset shell variable) ran the whole quick preset (13 jobs)."""
    from bayesbench.sweep import engine

    def would_run(*_args, **_kwargs):
        raise AssertionError("--replay '' started the preset's jobs")

    monkeypatch.setattr(engine, "run", would_run)
    assert main(["run", "--replay", ""]) == 2
    assert "--replay is empty: give a stored run's run.json or its run directory" in capsys.readouterr().err


def test_replay_says_when_a_run_file_does_not_hold_together(stored_run, tmp_path, capsys):
    """probe2 R10, R13: a run.json edited by hand (its lr, or its record of the code) was replayed without a
    word that its run_id is not the key of what it records; an edited code record said 'a new result (key K,
    the run's K)'."""
    _, run_file = stored_run
    doc = json.load(open(run_file))
    doc["config"]["identity"]["train"]["lr"] = 1e-3
    edited = tmp_path / "run.json"
    edited.write_text(json.dumps(doc))
    notes = []
    settings = tomllib.loads(_print_config(capsys, "--replay", str(edited), notes=notes))
    assert settings["train_args"]["lr"] == 1e-3  # it runs what the file records
    assert f"{edited} does not hold together: its run_id {doc['run_id']} is not the key" in " ".join(notes)
    doc = json.load(open(run_file))
    doc["code"]["metrics"] = {"entropy_mae": 1, "entropy_mae_positional": 1, "kl": 0}
    edited.write_text(json.dumps(doc))
    notes = []
    _print_config(capsys, "--replay", str(edited), notes=notes)
    text = " ".join(notes)
    assert f"its key is the run's ({doc['run_id']}), so the run file's record of its code was edited" in text
    assert "does not hold together" not in text and "it is a new result" not in text


def test_print_config_of_your_own_model_is_toml_alone(tmp_path, capsys, monkeypatch):
    """probe2 C34: with --model, the capacity note went to stdout, so `--print-config > run.toml` wrote a file
    that --config refused as "not valid TOML"."""
    monkeypatch.chdir(tmp_path)
    net = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "outside_net.py")
    notes = []
    text = _print_config(capsys, "--model", f"{net}:build", "--tasks", "sticky", "--steps", "5", notes=notes)
    assert tomllib.loads(text)["model"] == f"{net}:build"
    assert "capacity:" in notes[0]


def test_replay_of_an_unknown_architecture_names_the_run_file(stored_run, tmp_path, capsys):
    """probe2 R18: a run.json naming an architecture this version lacks said "unknown arch 'gpt5'", not which file."""
    _, run_file = stored_run
    doc = json.load(open(run_file))
    doc["config"]["identity"]["arch"] = "gpt5"
    edited = tmp_path / "run.json"
    edited.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["run", "--replay", str(edited), "--db", str(tmp_path / "c.sqlite")]) == 2
    assert f"--replay {edited}: its architecture 'gpt5' is not one of this bayesbench's (" in capsys.readouterr().err


def test_a_key_value_flag_overrides_the_files_table_key_by_key(tmp_path, capsys):
    """probe2 C39: `--config f.toml --train-args lr=2e-3` dropped the file's batch_size = 32 (the flag replaced
    the whole table), a silently different job."""
    path = tmp_path / "f.toml"
    path.write_text('tasks = ["bijection"]\narchs = ["mlp"]\nsteps = 20\n[train_args]\nlr = 1e-3\nbatch_size = 32\n')
    for argv in (["--config", str(path), "--train-args", "lr=2e-3"],
                 ["--train-args", "lr=2e-3", "--config", str(path)]):
        settings = tomllib.loads(_print_config(capsys, *argv))
        assert settings["train_args"] == {"lr": 2e-3, "batch_size": 32}, argv


def test_a_bad_table_value_of_a_file_names_the_file(tmp_path, capsys):
    """probe2 C10, C20: a [task_args] / [model_args] value of a --config file was refused naming --task-args /
    --model-args, a flag the user never typed; a flag's own value is still named as the flag."""
    path = tmp_path / "t.toml"
    path.write_text('tasks = ["bijection"]\narchs = ["mlp"]\nsteps = 20\n[task_args]\nV = 0\n[model_args]\nbogus = 1\n')
    capsys.readouterr()
    assert main(["run", "--config", str(path), "--print-config"]) == 2
    assert f"bayesbench run: {path}: task_args for task 'bijection': V must be an integer >= 2, got 0" in \
        capsys.readouterr().err
    assert main(["run", "--config", str(path), "--task-args", "V=8", "--print-config"]) == 2
    assert f"{path}: model_args for mlp: bad configuration for model 'mlp': unknown option 'bogus'" in \
        capsys.readouterr().err
    assert main(["run", "--config", str(path), "--task-args", "V=1", "--print-config"]) == 2
    assert "bayesbench run: --task-args for task 'bijection': V must be an integer >= 2, got 1" in \
        capsys.readouterr().err


def test_print_config_with_tune_shows_each_search_and_checks_its_settings(tmp_path, capsys):
    """--print-config --tune printed the untuned jobs as if they ran at the preset's lr and took
    any --tune-args (a bad grid, an unknown key) without a word (probe2 case T1)."""
    base = ["run", "--tune", "--tasks", "bijection", "--archs", "mlp", "--steps", "20", "--seeds", "1",
            "--db", str(tmp_path / "p.sqlite"), "--runs-dir", str(tmp_path / "runs"), "--print-config"]
    assert main([*base, "--tune-args", "lrs=[1e-3,3e-3]", "selection_seeds=1"]) == 0
    out = capsys.readouterr().out
    assert "# --tune: each job above trains at the rate its search chooses" in out
    assert "bijection V=8 L=7 repl / mlp: 2 rates 1e-3 .. 3e-3, 1 selection seed(s) each" in out
    assert tomllib.loads(out)["tune"] is True
    for bad, message in [("bogus=1", "--tune-args: unknown setting(s) ['bogus']"),
                         ("rule=bogus", "--tune-args rule must be one of"),
                         ("lrs=[1e-3,1e-3]", "--tune-args lrs must be at least 2 distinct positive learning rates")]:
        assert main([*base, "--tune-args", bad]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""  # nothing printed before the error
        assert message in captured.err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("edit,message", [
    (lambda doc: doc["config"]["identity"].pop("task"), "config.identity.task is missing (it must be the task's"),
    (lambda doc: doc["config"]["identity"].update(task="bijection"), "config.identity.task must be the task's"),
    (lambda doc: doc["config"]["identity"].pop("arch"), "config.identity.arch is missing"),
    (lambda doc: doc["config"].update(seeds=["a", "b"]),
     "config.seeds must be a list of distinct non-negative integer seeds, got ['a', 'b']"),
    (lambda doc: doc["seeds"][0].update(seed="a"),
     "seeds must be a list of per-seed results, each with a non-negative"),
    (lambda doc: doc["seeds"][1]["evals"].update(values=5), "seeds[1].evals.values is not an evaluation's result"),
    (lambda doc: doc["seeds"][0].update(final_loss_nats="low"), "seeds[0].final_loss_nats must be a number or null"),
    (lambda doc: doc.update(preset=5), "preset must be one of ('quick', 'paper'), got 5"),
    (lambda doc: doc["config"]["identity"].update(tuning={"role": "final"}),
     "config.identity.tuning.chosen must be the candidate the search chose, a table with its lr, got None"),
    (lambda doc: doc["config"]["identity"].update(tuning={"role": "final", "chosen": {"lr": 1e-3}}),
     "config.identity.tuning: lrs (the learning rates to try) is required"),
])
def test_replay_of_a_run_file_missing_or_mistyping_a_field_names_it(stored_run, tmp_path, capsys, edit, message):
    """issue 39: a run.json without identity.task was "internal error: KeyError"; seeds ["a","b"] said only
    "invalid literal for int()"."""
    _, run_file = stored_run
    doc = json.load(open(run_file))
    edit(doc)
    edited = tmp_path / "run.json"
    edited.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["run", "--replay", str(edited), "--db", str(tmp_path / "c.sqlite"), "--runs-dir",
                 str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and f"bayesbench run: --replay {edited}: {message}" in err, err
    assert not (tmp_path / "runs").exists()


TUNE = [*TINY, "--seeds", "1", "--tune", "--tune-args", "lrs=[1e-3,3e-3]", "selection_seeds=1",
        "selection_sequences=32"]


def test_print_config_with_tune_args_and_axes_reads_back_to_the_same_settings(tmp_path, capsys):
    """issue 39: `--print-config --tune --tune-args ...` printed `tune_args = [["lrs", ...]]`, which --config
    refused ("tune_args must be a list of names"), and a [tune_args] table could not be written by hand."""
    text = _print_config(capsys, *TUNE, 'axes={"warmup_steps":[0,5]}', "packed=false")
    settings = tomllib.loads(text)
    assert settings["tune"] is True
    assert settings["tune_args"] == {"lrs": [1e-3, 3e-3], "selection_seeds": 1, "selection_sequences": 32,
                                     "axes": {"warmup_steps": [0, 5]}, "packed": False}
    path = tmp_path / "tune.toml"
    path.write_text(text)
    assert _print_config(capsys, "--config", str(path)) == text
    path.write_text('tasks = ["bijection"]\narchs = ["mlp"]\nsteps = 20\n[tune_args]\nlrs = [1e-3, 3e-3]\nlr = 1\n')
    with pytest.raises(SystemExit):
        main(["run", "--config", str(path), "--print-config"])
    assert f"argument --config: {path}: tune_args: unknown setting(s) ['lr']; settings: lrs," in capsys.readouterr().err


@pytest.fixture(scope="module")
def tuned_run(tmp_path_factory):
    """A tiny tuned run (2 rates, 1 selection seed, 20 steps) and its final job's run.json."""
    root = tmp_path_factory.mktemp("tuned")
    assert main(["run", *TUNE, "--db", str(root / "a.sqlite"), "--runs-dir", str(root / "runs")]) == 0
    (run_file,) = glob.glob(str(root / "runs" / "**" / "*-tune-final-*" / "run.json"), recursive=True)
    return root, run_file


def test_a_tuned_runs_printed_config_runs_the_same_jobs(tuned_run, tmp_path, capsys):
    """issue 39: the documented round trip (`run ... --tune --print-config > c.toml; run --config c.toml`)
    failed for a tuned run; now it trains the same selection and final jobs, to the same numbers."""
    root, _ = tuned_run
    path = tmp_path / "c.toml"
    path.write_text(_print_config(capsys, *TUNE))
    assert main(["run", "--config", str(path), "--db", str(tmp_path / "b.sqlite"), "--runs-dir",
                 str(tmp_path / "runs")]) == 0
    keys = lambda db: sorted(r.run_id for r in read_records(db))  # noqa: E731
    assert keys(str(root / "a.sqlite")) == keys(str(tmp_path / "b.sqlite"))
    assert _numbers(str(root / "a.sqlite")) == _numbers(str(tmp_path / "b.sqlite"))


def test_a_tuned_run_replays_to_the_last_digit(tuned_run, tmp_path, capsys):
    """issue 39: replaying a tuned run's run.json said "its settings no longer resolve to the run it was:
    tuning differs ... (a preset or a default changed since)" when nothing had changed."""
    root, run_file = tuned_run
    settings = tomllib.loads(_print_config(capsys, "--replay", run_file))
    assert settings["tune"] is True and settings["tune_args"]["lrs"] == [1e-3, 3e-3]
    capsys.readouterr()
    assert main(["run", "--replay", run_file, "--db", str(tmp_path / "c.sqlite"), "--runs-dir",
                 str(tmp_path / "runs"), "--no-progress"]) == 0
    assert "--replay: every number equals the stored run's to the last digit" in capsys.readouterr().out
    assert _numbers(str(root / "a.sqlite")) == _numbers(str(tmp_path / "c.sqlite"))
    import bayesbench  # the Python API replays it too (it ran a tuned run untuned: tune=True was ignored)

    rows = bayesbench.run(replay=run_file, db=str(tmp_path / "d.sqlite"), runs_dir=str(tmp_path / "api"), quiet=True)
    assert "--replay: every number equals the stored run's to the last digit" in capsys.readouterr().out
    assert [r["run_id"] for r in rows] == [json.load(open(run_file))["run_id"]]
    doc = json.load(open(run_file))  # a run whose search chose the other rate: this search does not
    chosen = doc["config"]["identity"]["tuning"]["chosen"]["lr"]
    other = next(lr for lr in doc["config"]["identity"]["tuning"]["lrs"] if lr != chosen)
    doc["config"]["identity"]["tuning"]["chosen"]["lr"] = doc["config"]["identity"]["train"]["lr"] = other
    edited = tmp_path / "run.json"
    edited.write_text(json.dumps(doc))
    assert main(["run", "--replay", str(edited), "--db", str(tmp_path / "c.sqlite"), "--runs-dir",
                 str(tmp_path / "runs"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"--replay: the search chose {{'lr': {chosen}}} this time, the stored run {{'lr': {other}}}" in out
    assert out.count("--replay: the run was made by") <= 1  # each note once, though each phase checks the job


def test_reported_seeds_that_are_selection_seeds_are_refused_before_any_training(tmp_path, capsys, monkeypatch):
    """issue 39: seeds overlapping the search's selection seeds were refused only once the whole search had
    trained."""
    from bayesbench.sweep import engine

    def would_run(*_args, **_kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(engine, "drive", would_run)
    path = tmp_path / "c.toml"
    path.write_text('tasks = ["bijection"]\narchs = ["mlp"]\nsteps = 20\nseeds = [0, 1000001]\n'
                    '[tune_args]\nlrs = [1e-3, 3e-3]\nselection_seeds = 1\n')
    for extra in ([], ["--print-config"]):
        capsys.readouterr()
        assert main(["run", "--config", str(path), "--db", str(tmp_path / "d.sqlite"), *extra]) == 2
        err = capsys.readouterr().err
        assert "seeds [1000001] of bijection V=8 L=7 repl / mlp are selection seeds of its search" in err, err
        assert err.startswith(f"bayesbench run: {path}: tune_args: ") and len(err.splitlines()) == 1
