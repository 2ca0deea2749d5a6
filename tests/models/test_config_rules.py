"""Every setting of every built-in architecture checked for type and range where it is defined (its
config's __post_init__; `match_params` by the registry, for every architecture that takes it), as
a SettingError naming the setting (issue 29, section 2: a bool, NaN or inf passed for a number, or
a number for a switch, was accepted or failed deep inside torch)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from bayesbench.checks import SettingError
from bayesbench.models import count_params
from bayesbench.models.registry import _MODELS, homes, model_options
from bayesbench.tasks import get_task

NAN, INF = math.nan, math.inf
TASK = get_task("sticky", V=4, L=8)
INTS = [0, -1, 1.5, True, "8"]
SMALL = {"transformer": {"n_layer": 2, "n_head": 2, "d_model": 8, "d_ffn": 8},
         "linear-attention": {"n_layer": 1, "n_head": 2, "d_model": 8, "d_ffn": 8},
         "mamba": {"n_layer": 1, "d_model": 8}, "mlp": {"depth": 1, "width": 8}, "rnn": {"n_layer": 1, "d_model": 8},
         "toy-attention": {"d_model": 8}}
TRANSFORMER = {"n_layer": INTS, "n_head": INTS, "d_model": INTS, "d_ffn": INTS,
               "dropout": [-0.1, 1.0, NAN, INF, True, "0.1"], "bias": [1, 0, "yes", None],
               "attention": ["flash", None], "attn_off_top": [-1, 3, 1.5, True], "position": ["alibi"],
               "pointer": ["both", True], "size": ["paper-huge", 3]}
RULES = {  # arch -> (base config, {setting: values its rule refuses})
    "transformer": (SMALL["transformer"], TRANSFORMER),
    "transformer-no-late-attention": (SMALL["transformer"], TRANSFORMER),
    "linear-attention": (SMALL["linear-attention"], {"n_layer": INTS, "n_head": INTS, "d_model": INTS, "d_ffn": INTS,
                                                     "eps": [0, -1e-6, NAN, INF, True], "form": ["cumprod", 1]}),
    "mamba": (SMALL["mamba"], {"n_layer": INTS, "d_model": INTS, "d_state": INTS, "d_conv": INTS,
                               "d_inner": INTS, "dt_rank": INTS, "dt_min": [0, -1e-3, NAN, True, 0.5],
                               "dt_max": [INF, NAN, True, 1e-4], "scan": ["fast", None]}),
    "mlp": (SMALL["mlp"], {"depth": INTS, "width": INTS, "prefix_dim": INTS, "prefix": [True, False, 1]}),
    "mlp-prefix": (SMALL["mlp"], {"depth": INTS, "width": INTS, "prefix_dim": INTS, "prefix": [True, False]}),
    "lstm": (SMALL["rnn"], {"n_layer": INTS, "d_model": INTS, "d_embed": INTS}),
    "gru": (SMALL["rnn"], {"n_layer": INTS, "d_model": INTS, "d_embed": INTS}),
    "toy-attention": (SMALL["toy-attention"], {"d_model": INTS, "d_head": INTS,
                                               "init_std": [0, -0.1, NAN, INF, True, "0.1"]}),
}
MATCH_PARAMS = [0, -5, 1.5, True, "3000", NAN, INF]


BUILTIN = sorted(homes())  # every architecture the package's model files register (tests may register more)
NOT_A_VALUE = "not a value of any setting"


def test_the_rules_cover_every_setting_of_every_architecture_they_name():
    assert set(RULES) <= set(BUILTIN), set(RULES) - set(BUILTIN)  # a rule for an architecture that is gone
    for arch, (_, rules) in RULES.items():
        options = set(model_options(arch)) - {"match_params"}
        assert set(rules) == options, (arch, options ^ set(rules))
        config = _MODELS[arch].config
        assert {f.name for f in dataclasses.fields(config)} <= set(rules) | {"attn_off_top"}, arch


@pytest.mark.parametrize("arch", sorted(RULES))
def test_every_setting_refuses_values_outside_its_rule_naming_it(arch):
    base, rules = RULES[arch]
    count_params(arch, TASK, **base)  # the base is valid
    for setting, values in rules.items():
        for value in values:
            with pytest.raises(SettingError) as err:
                count_params(arch, TASK, **{**base, setting: value})
            # the message starts with a setting it is about (a rule between two, e.g. dt_min <= dt_max,
            # names both), and this one is among them
            first = str(err.value).split(" ")[0]
            assert first in err.value.fields and setting in err.value.fields, (arch, setting, value, str(err.value))


@pytest.mark.parametrize("arch", BUILTIN)
def test_every_setting_of_every_architecture_refuses_a_value_of_no_type_naming_it(arch):
    """The check every architecture gets, whether RULES names it or not (a new model file is checked
    with no edit here): each of its settings refuses a value of no setting's type, as a SettingError
    naming it, over its small base in RULES, else over the builder's defaults."""
    base = RULES[arch][0] if arch in RULES else {}
    count_params(arch, TASK, **base)  # the base is valid
    for setting in set(model_options(arch)) - {"match_params"}:
        with pytest.raises(SettingError) as err:
            count_params(arch, TASK, **{**base, setting: NOT_A_VALUE})
        assert setting in err.value.fields, (arch, setting, str(err.value))


@pytest.mark.parametrize("arch", sorted(a for a in BUILTIN if "match_params" in model_options(a)))
def test_match_params_must_be_a_positive_integer(arch):
    for value in MATCH_PARAMS:  # int() truncated 1.5 and True, took '3000', and raised OverflowError for inf
        with pytest.raises(SettingError, match="^match_params must be a positive integer"):
            count_params(arch, TASK, match_params=value)
