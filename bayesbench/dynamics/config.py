"""What the studies' typed configurations share: an error that names the field it is about.

A study (profile, geometry, emsgd) takes a frozen dataclass config; its `__post_init__` checks
each field's range and raises `FieldError(field, rule)`, whose message reads "<field> <rule>".
The study knows field names only: the command line module that built the config from its
options (`bayesbench/cli/`) maps the field to the flag the user typed, so the user reads
"--every must be >= 1 ..." and a Python caller reads "every must be >= 1 ...".
"""

from __future__ import annotations

import math


class FieldError(ValueError):
    """A bad value of one field of a study's config (or of something the config names, e.g. a run
    that does not exist): `field` the dataclass field, `rule` the rest of the sentence."""

    def __init__(self, field: str, rule: str) -> None:
        self.field, self.rule = field, rule
        super().__init__(self._text(field))

    def _text(self, name: str) -> str:
        return f"{name}{'' if self.rule.startswith(':') else ' '}{self.rule}"

    def named(self, name: str) -> ValueError:
        """The same error with the field called `name` (a command-line flag)."""
        return ValueError(self._text(name))


def check_int(field: str, value, low: int, why: str = "") -> None:
    """An int (not a bool) >= low, else FieldError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        rule = "a positive integer" if low == 1 else f"an integer >= {low}"
        raise FieldError(field, f"must be {rule}{f' ({why})' if why else ''}, got {value!r}")


def check_positive_number(field: str, value) -> None:
    """A finite number > 0, else FieldError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value > 0 and math.isfinite(value)):
        raise FieldError(field, f"must be a positive number, got {value!r}")


def check_choice(field: str, value, choices) -> None:
    if value not in choices:
        raise FieldError(field, f"must be one of {tuple(choices)}, got {value!r}")
