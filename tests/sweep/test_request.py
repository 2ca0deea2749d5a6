"""The run request (`sweep/request.py`): one typed value both front ends build, whose errors
name the field and leave the wording to the front end (issue 40)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bayesbench.sweep.request import FieldError, RunRequest

ROOT = Path(__file__).resolve().parents[2] / "bayesbench"


def _cli(field: str) -> str:
    from bayesbench.cli.errors import flag_of

    return flag_of("run")(field)


def test_a_rule_between_fields_is_phrased_by_each_front_end():
    with pytest.raises(FieldError) as err:
        RunRequest(until=0.1, no_curves=True).train()
    assert err.value.field == "until"
    assert err.value.phrase(_cli) == "--until reads the learning curves: it cannot be combined with --no-curves"
    assert str(err.value) == "until reads the learning curves: it cannot be combined with no_curves"


def test_values_by_name_are_checked_and_put_in_the_fields_form():
    request = RunRequest.of({"tasks": "bijection,hmm", "seeds": 2, "train_args": ["lr=0.001"]})
    assert (request.tasks, request.seeds, request.train_args, request.tuning) == (
        ("bijection", "hmm"), (0, 1), {"lr": 0.001}, None)
    assert RunRequest.of({"tune_args": {"selection_seeds": 1}}).tuning == {"selection_seeds": 1}
    with pytest.raises(FieldError, match=r"^steps must be a positive integer, got 0$"):
        RunRequest.of({"steps": 0})
    with pytest.raises(FieldError, match=r"unknown setting 'stepz' \(did you mean 'steps'\?\)"):
        RunRequest.of({"stepz": 3})


def test_tuning_refuses_a_fixed_rate():
    with pytest.raises(FieldError) as err:
        RunRequest(train_args={"lr": 1e-3}, tuning={})
    assert err.value.phrase(_cli).startswith("--train-args lr=...: --tune chooses the learning rate")


def test_the_train_command_names_its_one_task_and_arch():
    from bayesbench.cli.errors import flag_of

    with pytest.raises(FieldError) as err:
        RunRequest(command="train", tasks=("bijection",))
    assert err.value.phrase(flag_of("train")) == ("give exactly one of --arch (a built-in architecture) and --model "
                                                   "(your own)")


def test_the_api_builds_a_request_without_the_command_line():
    """No Namespace, parser or re-wording of the command line's messages in api.py."""
    text = (ROOT / "api.py").read_text()
    assert "argparse" not in text and "_namespace" not in text and "re.sub" not in text
    assert "cli.run" not in text and "cli.train" not in text and "cli.tune" not in text


def test_the_engine_path_names_no_flag():
    """The engine and the request say fields, never `--flags` (a front end phrases them)."""
    for name in ("request.py", "engine.py", "driver.py", "replay.py", "local.py", "ray_executor.py"):
        for line in (ROOT / "sweep" / name).read_text().splitlines():
            if "raise " in line or "Error(" in line:
                assert not re.search(r"[\"' ]--[a-z]", line), (name, line)
