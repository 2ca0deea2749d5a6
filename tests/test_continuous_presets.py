"""The continuous tunnels' named setups (issue 41): in the quick and paper presets by name only,
never in a preset's default task list (`make run` keeps its ~15 minutes)."""

from __future__ import annotations

import pytest

from bayesbench.presets import PRESETS, get_preset
from bayesbench.sweep.jobs import preset_task_names, task_setup
from bayesbench.tasks import task_from_config


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_the_continuous_tunnels_run_by_name_only(preset):
    p = get_preset(preset)
    assert not {"linreg", "mixreg", "kalman"} & set(p.tasks)
    assert {"linreg", "mixreg", "kalman"} <= set(preset_task_names(p))
    assert {"linreg", "mixreg", "kalman"} <= set(p.named)
    for name in ("linreg", "mixreg", "kalman"):  # the discrete tunnels' setups: tests/test_discrete_presets.py
        setup = p.named[name]
        assert task_setup(p, name) == setup
        task = task_from_config(setup.task)
        assert task.head in ("gaussian", "mixture:2")
        if name == "kalman":
            K = task.K
            assert setup.eval_lengths == (K, int(1.5 * K), int(2.5 * K))


def test_paper_sizes_are_garg_et_als_and_options_apply_over_the_quick_ones():
    paper = get_preset("paper").named["linreg"].task
    assert (paper["d"], paper["n"], paper["tau"]) == (20, 40, 1.0)
    ran = task_setup(get_preset("quick"), "linreg", {"d": 3})
    assert ran.task["d"] == 3 and ran.task["n"] == 8 and ran.label == "linreg d=3 n=8"
