"""Outside code named in a file the user was handed (a run.json, a --config file, a sweep file, a
checkpoint) is imported only with --trust-code (`trust_code=True`), or when the user names it on the
command line; the refusal names the file and the code, and nothing of the code runs before it."""

from __future__ import annotations

import glob
import json
import os
import shutil

import pytest

import bayesbench
from bayesbench.cli import main

NET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "outside_net.py")
TINY = ["--eval-sequences", "64", "--curve-sequences", "32", "--no-progress"]


def payload(folder, marker) -> str:
    """A model file whose import leaves `marker` and then calls sys.exit(3) (which once ended bayesbench)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "payload.py"
    path.write_text(f"import os, sys\nos.mkdir({str(marker)!r})\nsys.exit(3)\n\ndef build(spec):\n    return None\n")
    return f"{path}:build"


@pytest.fixture(scope="module")
def own_run(tmp_path_factory):
    """A stored run of tests/outside_net.py (a model named on the command line) and its run.json."""
    root = tmp_path_factory.mktemp("own")
    assert main(["run", "--model", f"{NET}:build", "--tasks", "sticky", "--steps", "3", "--seeds", "1", *TINY,
                 "--db", str(root / "a.sqlite"), "--runs-dir", str(root / "runs")]) == 0
    (run_file,) = glob.glob(str(root / "runs" / "**" / "run.json"), recursive=True)
    return root, run_file


def test_replay_of_a_run_file_naming_outside_code_needs_trust_code(own_run, tmp_path, capsys):
    root, run_file = own_run
    capsys.readouterr()
    assert main(["run", "--replay", run_file, "--db", str(tmp_path / "b.sqlite"), "--runs-dir",
                 str(tmp_path / "runs"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{run_file} names outside model code '{NET}:build'" in err and "--trust-code" in err, err
    assert len(err.strip().splitlines()) == 1
    assert main(["run", "--replay", run_file, "--db", str(tmp_path / "b.sqlite"), "--runs-dir",
                 str(tmp_path / "runs"), "--no-progress", "--trust-code"]) == 0
    assert "every number equals the stored run's" in capsys.readouterr().out


def test_a_crafted_run_file_runs_nothing_of_its_code(own_run, tmp_path, capsys):
    """issue 39: identity.arch '/any/path/payload.py:build' was imported before any check, and its
    sys.exit ended the program."""
    _, run_file = own_run
    marker = tmp_path / "ran"
    spec = payload(tmp_path / "elsewhere", marker)
    doc = json.load(open(run_file))
    doc["config"]["identity"]["arch"] = spec
    edited = tmp_path / "run.json"
    edited.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["run", "--replay", str(edited), "--db", str(tmp_path / "c.sqlite")]) == 2
    err = capsys.readouterr().err
    assert f"{edited} names outside model code '{spec}'" in err, err
    assert not marker.exists()
    # trusted, the import runs; its sys.exit is an error of the import, not the end of bayesbench
    assert main(["run", "--replay", str(edited), "--db", str(tmp_path / "c.sqlite"), "--trust-code"]) == 2
    assert "it exited with 3 (sys.exit)" in capsys.readouterr().err and marker.exists()


def test_a_config_file_naming_outside_code_needs_trust_code_or_the_same_code_on_the_command_line(tmp_path, capsys):
    marker = tmp_path / "ran"
    spec = payload(tmp_path / "elsewhere", marker)
    config = tmp_path / "run.toml"
    config.write_text(f'tasks = ["sticky"]\nmodel = "{spec}"\nsteps = 3\n')
    assert main(["run", "--config", str(config), "--print-config"]) == 2
    err = capsys.readouterr().err
    assert f"{config} names outside model code '{spec}'" in err and not marker.exists(), err
    config.write_text(f'tasks = ["sticky"]\nmodel = "{NET}:build"\nsteps = 3\n')
    assert main(["run", "--config", str(config), "--print-config", "--trust-code"]) == 0
    assert main(["run", "--config", str(config), "--print-config", "--model", f"{NET}:build"]) == 0
    assert main(["--trust-code", "run", "--config", str(config), "--print-config"]) == 0  # as --debug: either place


def _sweep(tmp_path, arch: str):
    path = tmp_path / "s.toml"
    path.write_text(f'name = "t"\ntasks = ["bijection"]\narchs = ["{arch}"]\nseeds = [0]\nsteps = 2\n'
                    'eval_sequences = 64\n')
    return str(path)


def test_a_sweep_file_naming_outside_code_needs_trust_code_and_a_dry_run_imports_nothing(tmp_path, capsys):
    marker = tmp_path / "ran"
    spec = payload(tmp_path / "elsewhere", marker)
    path = _sweep(tmp_path, spec)
    for extra in ([], ["--dry-run"], ["--dry-run", "--json"]):
        assert main(["sweep", path, *extra, "--db", str(tmp_path / "r.sqlite")]) == 2
        err = capsys.readouterr().err
        assert f"{path} names outside model code '{spec}'" in err and "--trust-code" in err, err
        assert not marker.exists()
    shutil.copy(NET, tmp_path / "mine.py")
    path = _sweep(tmp_path, "./mine.py:build")
    assert main(["sweep", path, "--dry-run", "--db", str(tmp_path / "r.sqlite")]) == 2
    assert f"names outside model code '{tmp_path / 'mine.py'}:build'" in capsys.readouterr().err
    assert main(["sweep", path, "--dry-run", "--trust-code", "--db", str(tmp_path / "r.sqlite")]) == 0
    assert "1 jobs" in capsys.readouterr().out


def test_a_checkpoint_naming_outside_code_needs_trust_code(own_run, tmp_path, capsys):
    root, run_file = own_run
    run_dir = os.path.dirname(run_file)
    capsys.readouterr()
    assert main(["eval", run_dir, "--db", str(tmp_path / "e.sqlite")]) == 2
    err = capsys.readouterr().err
    assert f"{os.path.join(run_dir, 'checkpoint.pt')} names outside model code '{NET}:build'" in err, err
    assert main(["eval", run_dir, "--db", str(tmp_path / "e.sqlite"), "--trust-code"]) == 0


def test_the_api_replay_needs_trust_code(own_run, tmp_path):
    _, run_file = own_run
    with pytest.raises(ValueError, match=r"names outside model code .*trust_code=True"):
        bayesbench.run(replay=run_file, db=str(tmp_path / "b.sqlite"), runs_dir=str(tmp_path / "runs"), quiet=True)
    rows = bayesbench.run(replay=run_file, db=str(tmp_path / "b.sqlite"), runs_dir=str(tmp_path / "runs"),
                          quiet=True, trust_code=True)
    assert len(rows) == 1


def test_code_named_on_the_command_line_needs_no_trust_code(tmp_path, capsys):
    assert main(["run", "--model", f"{NET}:build", "--tasks", "sticky", "--steps", "3", "--print-config"]) == 0


def test_the_code_a_command_line_names(tmp_path, monkeypatch):
    from bayesbench import trust

    monkeypatch.chdir(tmp_path)
    argv = ["run", "--model=./m.py:build", "--archs", "mlp,pkg.nets:build", "hf:gpt2", "hfutils:build"]
    typed = trust.named(argv)
    assert {str(tmp_path / "m.py"), "pkg.nets", "hfutils"} <= typed and "hf" not in typed
    with trust.guard(False, argv):
        trust.check(f"{tmp_path / 'm.py'}:other", "model")  # the same file, another factory: named by the user
        with trust.source("s.toml"), pytest.raises(trust.UntrustedCode, match="s.toml names outside task code 'x:b'"):
            trust.check("x:b", "task")
        with trust.guard(True):
            trust.check("x:b", "task")
    trust.check("x:b", "task")  # no guard: a Python caller naming code itself
