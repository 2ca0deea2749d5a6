"""Points resolved into jobs: what the command line's overrides do to a job, and the one resolver that the
command line and sweep files share (no training here)."""

from __future__ import annotations

import pytest

from bayesbench.models import count_params
from bayesbench.sweep.jobs import make_jobs
from bayesbench.sweep.request import FieldError


def test_a_warm_up_the_user_sets_is_kept_with_fewer_steps():
    """Probe case 33: --steps shrank every warm-up over a tenth of the steps, the user's own too
    (stored 0 while the row's overrides said 1000, under the plain command's key)."""
    (job,) = make_jobs("quick", tasks=["sticky"], archs=["mlp"], steps=20, train={"warmup_steps": 1000})
    assert job.train.warmup_steps == 1000
    (plain,) = make_jobs("quick", tasks=["sticky"], archs=["mlp"], steps=20)
    assert plain.train != job.train


def test_a_preset_warm_up_still_shrinks_with_fewer_steps():
    (job,) = make_jobs("quick", tasks=["sticky"], archs=["mlp"], steps=20, train={"warmup_steps": 1000, "lr": 1e-3})
    (preset,) = make_jobs("quick", tasks=["sticky"], archs=["mlp"], steps=20, train={"lr": 1e-3})
    assert job.train.warmup_steps == 1000 and preset.train.warmup_steps == 0  # the preset's 8 of 800 steps


@pytest.mark.parametrize("model_args", [{"width": 64}, {"width": 64, "match_params": None}])
def test_a_width_in_model_args_replaces_the_presets_capacity_match(model_args):
    """Probe cases 34 and 41: 'give either width or match_params, not both' for a width alone."""
    (job,) = make_jobs("quick", tasks=["sticky"], archs=["mlp"], model_args=model_args)
    assert job.model["width"] == 64 and "match" not in job.model and "match_params" not in job.model
    assert job.params == count_params("mlp", job.task, max_len=job.max_len, depth=job.model["depth"], width=64)


def test_model_args_without_a_size_keep_the_match():
    from bayesbench.sweep.jobs import with_model_args

    assert with_model_args({"depth": 4, "match": "transformer"}, {"depth": 2}) == {"depth": 2, "match": "transformer"}
    assert with_model_args({"depth": 4, "match": "transformer"}, {"match_params": 5000}) == {"depth": 4,
                                                                                              "match_params": 5000}


@pytest.mark.parametrize("arch,option,words", [
    ("mlp", "d_model", "unknown option 'd_model'; options: match_params, depth, width"),
    ("transformer", "n_heads", "unknown option 'n_heads' (did you mean 'n_head'?); options: size, n_layer, n_head"),
])
def test_an_unknown_model_option_is_named_with_the_options_there_are(arch, option, words):
    """Probe cases 35 and 40: 'match_mlp() got an unexpected keyword argument' (a function's name,
    no options listed)."""
    with pytest.raises(FieldError, match=r"^model_args for " + arch) as err:  # the field; a front end names it
        make_jobs("quick", tasks=["sticky"], archs=[arch], model_args={option: 3})
    assert words in str(err.value) and err.value.field == "model_args"
    assert err.value.phrase(lambda name: "--" + name.replace("_", "-")).startswith(f"--model-args for {arch}")


def test_task_args_making_a_bijection_without_a_query_score_it_on_its_values():
    """Probe case 145: --task-args variant=paper (docs/dynamics.md's own profile example) was
    'supervise='both' needs query=True': the quick preset also scores 'values+query'."""
    (job,) = make_jobs("quick", tasks=["bijection"], archs=["mlp"], task_args={"variant": "paper", "L": 8})
    assert job.setup.eval_scored == ("values",) and job.task.query is False and job.task.L == 8
    (plain,) = make_jobs("quick", tasks=["bijection"], archs=["mlp"])
    assert plain.setup.eval_scored == ("values", "values+query")


# ---------------------------------------------------------------- one resolver for every command

TWO_OPTIONS = """name = "two"
preset = "quick"
tasks = ["bijection"]
archs = ["mlp"]
seeds = [0, 1]
steps = 40
eval_sequences = 64
task_options = {variant = "paper", L = 8}
train = {weight_decay = 0.0}
"""


def test_the_same_point_from_the_command_line_and_a_sweep_file_is_the_same_job_and_key(tmp_path):
    """Two task options (the label formats once differed: "[L=8 variant=paper]" against
    "[L=8, variant=paper]", so the same job had two keys), a training override and fewer steps."""
    from bayesbench.cli import build_parser
    from bayesbench.cli.train import jobs_of
    from bayesbench.sweep import expand, load_sweep

    path = tmp_path / "two.toml"
    path.write_text(TWO_OPTIONS)
    (from_file,) = expand(load_sweep(str(path)))
    args = build_parser().parse_args(["train", "--task", "bijection", "--arch", "mlp", "--seeds", "0,1", "--steps",
                                      "40", "--eval-sequences", "64", "--task-args", "variant=paper", "L=8",
                                      "--train-args", "weight_decay=0"])
    (from_flags,) = jobs_of(args, place=lambda d: "cpu")
    assert from_file.job == from_flags.job and from_file.key == from_flags.key
    assert from_file.job.setup.label == ("bijection V=8 L=8 [keys=permutation query=False supervise=values "
                                         "variant=paper]")
    assert from_file.job.identity == from_flags.job.identity
    assert from_file.job.overrides == from_flags.job.overrides == {"train": {"weight_decay": 0.0},
                                                                   "task": {"variant": "paper", "L": 8}}
    assert from_file.run_dir("runs").endswith(from_flags.key) and from_file.group_id != from_flags.group_id


def test_the_warm_up_rule_is_applied_once_by_the_one_resolver(tmp_path, monkeypatch):
    """`scaled_warmup` is the only place that shortens the preset's warm-up for fewer steps: each
    command calls it once per job (through `resolve`), with the same result."""
    from bayesbench.sweep import expand, jobs, load_sweep

    calls, rule = [], jobs.scaled_warmup

    def counted(warmup: int, steps: int) -> int:
        calls.append((warmup, steps))
        return rule(warmup, steps)

    monkeypatch.setattr(jobs, "scaled_warmup", counted)
    (plain,) = make_jobs("quick", tasks=["sticky"], archs=["mlp"], steps=50)
    path = tmp_path / "s.toml"
    path.write_text('tasks = ["sticky"]\narchs = ["mlp"]\nsteps = 50\n')
    (swept,) = expand(load_sweep(str(path)))
    assert calls == [(8, 50), (8, 50)]  # the preset's 8 of 800 steps, for a run of 50
    assert plain.train.warmup_steps == swept.job.train.warmup_steps == 0  # 8 > 50 // 10: 1% of 50
    assert rule(8, 80) == 8 and rule(8, 79) == 0 and rule(1000, 20_000) == 1000
    calls.clear()
    (kept,) = make_jobs("quick", tasks=["sticky"], archs=["mlp"], steps=50, train={"warmup_steps": 30})
    assert kept.train.warmup_steps == 30 and calls == []  # a warm-up given stays


def test_a_resolver_error_names_the_setting_and_each_caller_its_source(tmp_path):
    from bayesbench.checks import SettingError
    from bayesbench.sweep import expand, load_sweep
    from bayesbench.sweep.jobs import point, resolve

    with pytest.raises(SettingError) as err:
        resolve(point(task="bijection", arch="mlp", task_options={"supervise": "all"}), lambda d: "cpu")
    assert err.value.fields == ("task_options",) and str(err.value).startswith("supervise must be one of")
    with pytest.raises(FieldError, match=r"^task_args for task 'bijection': supervise must be one of"):
        make_jobs("quick", tasks=["bijection"], archs=["mlp"], task_args={"supervise": "all"})
    path = tmp_path / "s.toml"
    path.write_text('tasks = ["bijection"]\narchs = ["mlp"]\nseeds = [0]\ntask_options = {supervise = "all"}\n')
    with pytest.raises(ValueError, match=r"^sweep file .*s.toml: job 1 \(bijection / mlp\): bad task settings: "
                                         r"supervise must be one of"):
        expand(load_sweep(str(path)))
    with pytest.raises(SettingError) as err:
        resolve(point(task="sticky", arch="mlp", models={"mlp": {"depht": 2}}), lambda d: "cpu")
    assert err.value.fields == ("models",)
    with pytest.raises(TypeError, match="unknown point settings"):
        point(task="sticky", arch="mlp", task_args={"L": 3})


def test_the_presets_resolved_tasks_are_what_the_tasks_resolve_to():
    """presets.RESOLVED_TASKS (read by the store's migration of old labels, below tasks/) is each
    preset task's `Task.config()`, and every preset task has one."""
    from bayesbench.presets import PRESETS, RESOLVED_TASKS
    from bayesbench.tasks import task_from_config

    setups = {s.label: s for p in PRESETS.values() for s in p.tasks.values()}
    assert set(setups) == set(RESOLVED_TASKS)
    for label, setup in setups.items():
        assert task_from_config(setup.task).config() == RESOLVED_TASKS[label], label
