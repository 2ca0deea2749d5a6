"""What the dynamics commands (`profile`, `emsgd`, `geometry`) share: turning the command line
into a study's typed config and running it, with a bad field named by its flag and Ctrl-C
handled (docs/dynamics.md).

Each command keeps its own `FLAGS` (the flag of each config field not spelled "--" + field) and
its own `config_from_args`; this module runs them the one way.
"""

from __future__ import annotations


def flag_of(field: str, flags: dict[str, str]) -> str:
    """The command-line flag of a study config's field: `flags[field]`, else "--" + field with
    "-" for "_"."""
    return flags.get(field, "--" + field.replace("_", "-"))


def run_study(args, config_from_args, study, flags: dict[str, str]):
    """(config, study(config)): builds the typed config from `args` and runs the study under the
    interrupt handler (Ctrl-C or SIGTERM: the step ends, the partial study is removed, one line
    says so). A field the config refuses is re-raised naming its flag, not the field."""
    from ..dynamics.config import FieldError
    from ..running import interrupt

    try:
        config = config_from_args(args)
        with interrupt.handling():
            return config, study(config)
    except FieldError as err:
        raise err.named(flag_of(err.field, flags)) from None


def print_study(args, config_from_args, study, flags: dict[str, str]) -> int:
    """`run_study`, then the summary printed (its headline and report path, or JSON with --json)."""
    from ..dynamics.report import print_summary

    config, summary = run_study(args, config_from_args, study, flags)
    print_summary(summary, config.as_json)
    return 0
