"""make_jobs: what the command line's overrides do to a job (no training here)."""

from __future__ import annotations

import pytest

from bayesbench.models import count_params
from bayesbench.sweep.jobs import make_jobs


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
    with pytest.raises(ValueError, match=r"--model-args for " + arch) as err:
        make_jobs("quick", tasks=["sticky"], archs=[arch], model_args={option: 3})
    assert words in str(err.value)


def test_task_args_making_a_bijection_without_a_query_score_it_on_its_values():
    """Probe case 145: --task-args variant=paper (docs/dynamics.md's own profile example) was
    'supervise='both' needs query=True': the quick preset also scores 'values+query'."""
    (job,) = make_jobs("quick", tasks=["bijection"], archs=["mlp"], task_args={"variant": "paper", "L": 8})
    assert job.setup.eval_scored == ("values",) and job.task.query is False and job.task.L == 8
    (plain,) = make_jobs("quick", tasks=["bijection"], archs=["mlp"])
    assert plain.setup.eval_scored == ("values", "values+query")
