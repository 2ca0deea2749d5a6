"""Overrides from the command line (--train-args, --task-args, --model-args), checked with one-line
errors, stored in the run record, and shown on the leaderboard where rows differ by them; and an
outside tunnel (--task ./file.py:build) trained like a preset task."""

from __future__ import annotations

import os

import pytest

from bayesbench.cli import main
from bayesbench.store.database import read_records, read_rows

TUNNEL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "outside_tunnel.py") + ":build"


def _common(tmp_path) -> list[str]:
    return ["--steps", "3", "--eval-sequences", "32", "--curve-sequences", "32", "--db", str(tmp_path / "r.sqlite"),
            "--runs-dir", str(tmp_path / "runs"), "--no-progress"]


def test_overrides_reach_the_job_the_record_and_the_leaderboard(tmp_path, capsys):
    common = _common(tmp_path)
    for lr in ("1e-3", "5e-4"):
        assert main(["train", "--task", "sticky", "--arch", "transformer", "--seeds", "0", *common,
                     "--train-args", f"lr={lr}", "batch_size=8", "--task-args", "L=12",
                     "--model-args", "d_model=32", "d_ffn=64"]) == 0
    capsys.readouterr()
    records = sorted(read_records(str(tmp_path / "r.sqlite")), key=lambda r: r.config["train"]["lr"])
    assert [r.config["train"]["lr"] for r in records] == [5e-4, 1e-3]
    r = records[0]
    assert r.config["train"]["batch_size"] == 8 and r.task_config["L"] == 12 and r.config["model_args"]["d_model"] == 32
    assert r.config["overrides"] == {"train": {"lr": 5e-4, "batch_size": 8, "curve_sequences": 32}, "task": {"L": 12},
                                     "model": {"d_model": 32, "d_ffn": 64}}
    assert r.task_label == "sticky V=8 L=12"  # another task than the preset's: its label says what ran
    assert main(["leaderboard", "--db", str(tmp_path / "r.sqlite")]) == 0
    md = capsys.readouterr().out
    assert "| task | eval | arch | settings |" in md.splitlines()[0]
    assert " | lr=0.0005 |" in md and " | lr=0.001 |" in md  # one row each, the setting that differs beside the arch


@pytest.mark.parametrize("argv,words", [
    (["--train-args", "lrr=1"], "--train-args: unknown training setting 'lrr' (did you mean 'lr'?)"),
    (["--train-args", "lr=fast"], "--train-args lr must be a positive finite number, got 'fast'"),
    (["--train-args", "steps=5"], "--train-args: steps has its own option, --steps"),
    (["--train-args", "lr=1e-3", "lr=2e-3"], "--train-args: lr given twice"),
    (["--task-args", "LL=3"], "--task-args for task 'sticky': 'LL' is not a setting of task 'sticky' (did you mean "
                              "'L'?); its settings: V, L, a, b"),
    # issue 29, section 3: Python's "get_task() got multiple values for argument 'name'"
    (["--task-args", "name=foo"], "--task-args for task 'sticky': 'name' is not a setting of task 'sticky'; its "
                                  "settings: V, L, a, b"),
    (["--task-args", "task=hmm"], "--task-args for task 'sticky': 'task' is not a setting of task 'sticky' (the task "
                                  "is --task's); its settings: V, L, a, b"),
    (["--task-args", "a=true"], "--task-args for task 'sticky': a must be a positive finite number"),
    (["--model-args", "d_modl=3"], "--model-args for transformer: bad configuration for model 'transformer'"),
])
def test_bad_overrides_are_one_line_and_train_nothing(tmp_path, capsys, argv, words):
    assert main(["train", "--task", "sticky", "--arch", "transformer", *_common(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1, err
    assert not read_rows(str(tmp_path / "r.sqlite"))


# Issue 29, sections 2 and 3: values out of range trained (beta1, beta2, weight_decay), or were refused
# without the flag named (the rest); NaN read as nan while inf was "not a number".
RANGES = [
    ("beta1=1.5", "--train-args beta1 must be a number in [0, 1), got 1.5"),
    ("beta2=-0.5", "--train-args beta2 must be a number in [0, 1), got -0.5"),
    ("weight_decay=-1", "--train-args weight_decay must be a finite number >= 0"),
    ("lr=-1", "--train-args lr must be a positive finite number, got -1"),
    ("lr=0", "--train-args lr must be a positive finite number, got 0"),
    ("lr=NaN", "--train-args lr must be a positive finite number, got nan"),
    ("lr=inf", "--train-args lr must be a positive finite number, got inf"),
    ("batch_size=0", "--train-args batch_size must be a positive integer, got 0"),
    ("batch_size=-5", "--train-args batch_size must be a positive integer, got -5"),
    ("schedule=bogus", "--train-args schedule must be one of ('constant', 'cosine', 'step'), got 'bogus'"),
    ("grad_clip=-1", "--train-args grad_clip must be a positive finite number"),
    ("prefetch=0", "--train-args prefetch must be a positive integer, got 0"),
    ("sync_every=0", "--train-args sync_every must be a positive integer, got 0"),
    ("until=abc", "--train-args until must be a threshold in bits"),
    ("curves=yes", "--train-args curves must be true or false, got 'yes'"),
]


@pytest.mark.parametrize("item,words", RANGES, ids=[i for i, _ in RANGES])
def test_train_args_out_of_range_are_refused_naming_the_flag(tmp_path, capsys, item, words):
    assert main(["train", "--task", "sticky", "--arch", "mlp", "--seeds", "0", *_common(tmp_path),
                 "--train-args", item]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"bayesbench train: {words}") and "\n" not in err, err
    assert not read_rows(str(tmp_path / "r.sqlite")) and not (tmp_path / "runs").exists()


def test_a_rule_between_a_train_arg_and_an_option_names_both(tmp_path, capsys):
    assert main(["train", "--task", "sticky", "--arch", "mlp", "--seeds", "0", *_common(tmp_path),
                 "--train-args", "curves=false", "--until", "0.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("bayesbench train: --until with --train-args curves: until needs the learning curves "
                   "(curves=true): a member stops on its curve"), err


def test_model_args_name_one_architecture(tmp_path, capsys):
    assert main(["run", "--tasks", "sticky", *_common(tmp_path), "--model-args", "d_model=32"]) == 2
    assert "--model-args are one architecture's options" in capsys.readouterr().err


def test_an_outside_tunnel_trains_in_worker_processes_and_a_broken_one_is_refused(tmp_path, capsys):
    assert main(["run", "--tasks", TUNNEL, "--task-args", "L=6", "--archs", "transformer", "lstm", "--jobs", "2",
                 "--seeds", "2", *_common(tmp_path)]) == 0
    assert "| coin(L=6, wrong=False) | standard (trained) |" in capsys.readouterr().out
    rows = read_rows(str(tmp_path / "r.sqlite"))
    assert {r["arch"] for r in rows} == {"transformer", "lstm"} and {r["task"] for r in rows} == {"coin"}
    assert rows[0]["task_config"] == {"task": "outside", "spec": TUNNEL, "options": {"L": 6}}
    assert main(["train", "--task", TUNNEL, "--task-args", "wrong=true", "--arch", "mlp",
                 *_common(tmp_path)]) == 2  # checked before any training
    assert "the posterior disagrees with the sampler" in capsys.readouterr().err
    assert len(read_rows(str(tmp_path / "r.sqlite"))) == 4


def test_a_task_label_says_the_settings_that_ran_not_the_presets(tmp_path, capsys):
    """`--task-args V=20 L=19 variant=code` over the quick bijection (V=8, L=7, repl): the row and the
    printed line say 'bijection V=20 L=19 repl' (they said 'bijection V=8 L=7 repl [L=19 V=20
    variant=code]': the preset's V and L, then the ones that ran); a setting no word of the label
    names is said in brackets; options all equal to the preset's give the preset's own task; and
    rows of different settings stay apart on the leaderboard."""
    from bayesbench.presets import QUICK
    from bayesbench.report.rows import aggregate
    from bayesbench.report.selection import select_rows
    from bayesbench.sweep.jobs import task_setup

    common = [*_common(tmp_path), "--arch", "mlp", "--seeds", "0", "--task", "bijection"]
    assert main(["train", *common, "--task-args", "V=20", "L=19", "variant=code"]) == 0
    assert "done: bijection V=20 L=19 repl / mlp" in capsys.readouterr().out
    assert main(["train", *common, "--task-args", "supervise=authors"]) == 0
    assert main(["train", *common]) == 0
    rows = read_rows(str(tmp_path / "r.sqlite"))
    assert sorted(r["task_label"] for r in rows) == ["bijection V=20 L=19 repl", "bijection V=8 L=7 repl",
                                                     "bijection V=8 L=7 repl [supervise=authors]"]
    assert len({row.task for row in aggregate(select_rows(str(tmp_path / "r.sqlite")))}) == 3
    assert task_setup(QUICK, "bijection", {"V": 8, "variant": "code"}) is QUICK.tasks["bijection"]
    keys = task_setup(QUICK, "bijection", {"keys": "permutation"}).label  # 'repl' stands for keys=replacement
    assert keys == "bijection V=8 L=7 [keys=permutation]"
