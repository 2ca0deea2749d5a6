"""Every TrainConfig field's rule, checked where it is defined (`TrainConfig.__post_init__`): the
same error for the Python API, the command line and sweep files, each naming the field (issue 29,
section 2: beta1=1.5, beta2=-0.5 and weight_decay=-1 trained and were stored as 'ok')."""

from __future__ import annotations

import dataclasses
import math

import pytest

from bayesbench.checks import SettingError
from bayesbench.training.config import TrainConfig

NAN, INF = math.nan, math.inf

# field -> (values its rule refuses, values it accepts, words of the rule)
RULES = {
    "steps": ([0, -1, 1.5, True, "3"], [1, 10], "a positive integer"),
    "batch_size": ([0, -5, 2.0, True], [1, 64], "a positive integer"),
    "lr": ([-1, 0, 0.0, NAN, INF, -INF, True, "fast"], [1e-3, 1, 2.5], "a positive finite number"),
    "schedule": (["bogus", 3, None], ["constant", "cosine", "step"], "one of ('constant', 'cosine', 'step')"),
    "warmup_steps": ([-1, 1.5, True, NAN], [0, 100], "an integer >= 0"),
    "min_lr_ratio": ([-0.1, 1.5, NAN, INF, True], [0, 0.0, 0.1, 1.0], "a number in [0, 1]"),
    "weight_decay": ([-1, -1e-9, NAN, INF, True, "x"], [0, 0.0, 0.01, 2.0], "a finite number >= 0"),
    "beta1": ([1.5, 1.0, -0.5, NAN, INF, True], [0, 0.0, 0.9, 0.999], "a number in [0, 1)"),
    "beta2": ([-0.5, 1.0, 1.5, NAN, -INF, True], [0.0, 0.95, 0.999], "a number in [0, 1)"),
    "grad_clip": ([-1, 0, NAN, INF, True], [0.5, 1.0, 100], "a positive finite number"),
    "prefetch": ([0, -1, 1.5, True], [1, 16], "a positive integer"),
    "checkpoint_every": ([-1, 1.5, True], [0, 10], "an integer >= 0"),
    "compile": ([1, 0, "yes", None], [True, False], "true or false"),
    "precision": (["fp64", None], ["auto", "fp32", "tf32", "bf16"], "one of"),
    "sync_every": ([0, -1, True], [1, 20], "a positive integer"),
    "curves": ([1, "false", None], [True, False], "true or false"),
    "curve_every": ([-1, 2.0, True], [0, 5], "an integer >= 0"),
    "curve_sequences": ([0, -3, 8.0], [1, 256], "a positive integer"),
    "until": (["abc", -1, 0, NAN, INF, True], [None, 0.1, 2, "plateau"], "a threshold in bits"),
    "until_metric": (["mae", None], ["entropy_mae", "entropy_mae_positional", "kl"], "one of"),
}


def test_every_field_has_a_rule_here():
    assert set(RULES) == {f.name for f in dataclasses.fields(TrainConfig)}


@pytest.mark.parametrize("field", sorted(RULES))
def test_each_field_refuses_what_its_rule_refuses_naming_the_field(field):
    bad, good, words = RULES[field]
    base = {"steps": 10, "until": 0.1} if field == "until_metric" else {"steps": 10}
    for value in bad:
        with pytest.raises(SettingError) as err:
            TrainConfig(**{**base, field: value})
        assert str(err.value).startswith(f"{field} must be") and words in str(err.value), (value, str(err.value))
        assert err.value.fields == (field,) and isinstance(err.value, ValueError)
    for value in good:
        TrainConfig(**{**base, field: value})


def test_a_rule_between_fields_names_both():
    with pytest.raises(SettingError, match="until needs the learning curves") as err:
        TrainConfig(steps=10, until=0.5, curves=False)
    assert err.value.fields == ("until", "curves")


def test_check_settings_checks_a_part_without_steps():
    TrainConfig.check_settings({"beta1": 0.5})
    with pytest.raises(SettingError, match=r"beta1 must be a number in \[0, 1\), got 1.5"):
        TrainConfig.check_settings({"beta1": 1.5})
