"""The discrete tunnels' named setups (issue 42): markov-k, vomc, mess3, hmm_mixture and the
authors' recurrence in the quick and paper presets by name only, never in a preset's default task
list (`make run` keeps its ~15 minutes and its keys)."""

from __future__ import annotations

import pytest

from bayesbench.presets import PRESETS, get_preset
from bayesbench.sweep.jobs import preset_task_names, task_setup
from bayesbench.tasks import task_from_config

DISCRETE = ("markov-k", "vomc", "mess3", "hmm_mixture", "recurrence")


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_the_discrete_tunnels_run_by_name_only(preset):
    p = get_preset(preset)
    assert not set(DISCRETE) & set(p.tasks)
    assert set(DISCRETE) <= set(preset_task_names(p)) and set(DISCRETE) <= set(p.named)
    for name in DISCRETE:
        setup = p.named[name]
        assert task_setup(p, name) == setup
        task = task_from_config(setup.task)
        assert task.name == name and task.head == "categorical"
        for word in setup.label.split(" ")[1:]:  # every name=value of the label is the task's
            key, value = word.split("=")
            assert str(task.config()[key]) == value, (name, word)
        assert setup.model("transformer") and setup.tune is not None


def test_quick_sizes_fit_a_2_core_cpu_and_name_the_compared_architectures():
    quick = get_preset("quick")
    for name in DISCRETE:
        setup = quick.named[name]
        assert task_from_config(setup.task).seq_len <= 32
        assert setup.train["steps"] <= 2000 and setup.seeds == 2
        assert setup.archs == ("transformer", "lstm", "mamba", "mlp")
    orders = quick.named["markov-k"].task, quick.named["vomc"].task
    assert orders[0]["order"] == 2 and orders[1]["depth"] == 2


def test_the_paper_recurrence_is_the_authors_run_and_options_apply_over_the_quick_ones():
    paper = get_preset("paper").named["recurrence"]
    assert task_from_config(paper.task).config() == {"task": "recurrence", "p": 17, "L": 16, "pi": 0.5,
                                                     "tokens": "integer"}
    assert paper.train == {"steps": 150_000, "batch_size": 64, "lr": 3e-4, "schedule": "cosine", "warmup_steps": 0}
    assert paper.models["transformer"] == {"size": "paper-bijection", "dropout": 0.1}  # 6 x 192, 6 heads, d_ff 768
    ran = task_setup(get_preset("quick"), "vomc", {"depth": 3})
    assert ran.task["depth"] == 3 and ran.label == "vomc V=2 depth=3 L=32"
    ran = task_setup(get_preset("quick"), "recurrence", {"tokens": "opaque"})
    assert ran.label == "recurrence p=17 L=16 tokens=opaque"
