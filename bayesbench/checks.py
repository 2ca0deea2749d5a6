"""The checks of a setting's value, shared by configs, tasks, models, the oracle and the command line.

A count (steps, widths, layers, K, V, ...) must be a real int (not a bool, not a float) at or
above its minimum; a real-valued setting (a learning rate, a prior's parameter, a probability)
a number (not a bool, not NaN or inf) in its range; a switch true or false; a choice one of its
names. The error names the setting and the rule, in one style: "d_model must be a positive
integer, got 0", "beta1 must be a number in [0, 1), got 1.5".

Every such error is a `SettingError` (a ValueError) that also carries the names of the settings it
is about (`fields`), so a caller that knows where a value came from puts that in front of the
message: the command line its flag ("--train-args beta1 must be ..."), a sweep file its path and
key ("sweep file s.toml: train.beta1 must be ..."). The rule itself is written once, where the
setting is defined (`TrainConfig.__post_init__`, a task's or a model config's `__post_init__`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable


class SettingError(ValueError):
    """A setting that breaks its rule. `fields`: the settings involved, the one the message starts
    with first (one for a range, several for a rule between settings)."""

    def __init__(self, message: str, fields: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.fields = tuple(fields)


def int_at_least(name: str, value, minimum: int, what: str | None = None) -> int:
    """Return `value` if it is an int >= minimum, else raise SettingError naming `name`, the rule and
    (if given) `what` it counts: "ensemble must be a positive integer (number of members), got 0"."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        rule = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        meaning = f" ({what})" if what else ""
        raise SettingError(f"{name} must be {rule}{meaning}, got {value!r}", (name,))
    return value


def positive_int(name: str, value, what: str | None = None) -> int:
    """`int_at_least(name, value, 1, what)`: a count that must be at least one."""
    return int_at_least(name, value, 1, what)


def number_in(name: str, value, low: float | None = None, high: float | None = None, *, low_open: bool = False,
              high_open: bool = False, what: str | None = None) -> float:
    """Return `value` if it is a finite real number (an int or a float; not a bool, NaN or inf)
    within [low, high] (`low_open`/`high_open`: that end excluded; None: unbounded), else raise
    SettingError: "lr must be a positive finite number, got nan", "beta1 must be a number in
    [0, 1), got 1.5"."""
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        if low == 0 and high is None:
            rule = "a positive finite number" if low_open else "a finite number >= 0"
        elif high is None:
            rule = f"a finite number {'>' if low_open else '>='} {low:g}"
        elif low is None:
            rule = f"a finite number {'<' if high_open else '<='} {high:g}"
        else:
            rule = f"a number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        meaning = f" ({what})" if what else ""
        raise SettingError(f"{name} must be {rule}{meaning}, got {value!r}", (name,))
    return value


def positive_number(name: str, value, what: str | None = None) -> float:
    """`number_in(name, value, 0, low_open=True)`: a finite number > 0."""
    return number_in(name, value, 0, low_open=True, what=what)


def boolean(name: str, value) -> bool:
    """Return `value` if it is True or False (not 0/1, not a string), else raise SettingError."""
    if not isinstance(value, bool):
        raise SettingError(f"{name} must be true or false, got {value!r}", (name,))
    return value


def one_of(name: str, value, choices: Iterable) -> object:
    """Return `value` if it is one of `choices`, else raise SettingError listing them."""
    choices = tuple(choices)
    if isinstance(value, bool) or value not in choices:
        raise SettingError(f"{name} must be one of {choices}, got {value!r}", (name,))
    return value


def read_toml(path: str) -> dict:
    """The table of a TOML file. Bad TOML, or text that is not UTF-8 (a UTF-16 file, say), is a
    ValueError saying so ("is not valid TOML: ..."), for the caller to put the file's name before;
    a missing file is the OSError of opening it."""
    import tomllib

    with open(path, "rb") as f:
        data = f.read()
    try:
        return tomllib.loads(data.decode("utf-8-sig"))  # a byte-order mark (Windows editors write one) is skipped
    except UnicodeDecodeError as err:
        utf16 = " (it is UTF-16: save it as UTF-8)" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise ValueError(f"is not UTF-8 text (byte {err.start}: {err.reason}){utf16}; a TOML file is UTF-8") from None
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"is not valid TOML: {err}") from None


ID_MAX_CHARS = 200


def file_id(name: str, value) -> str:
    """Return `value` if it can name a file of its own (a run or study id: pages, figures and
    folders are named by it): a non-empty string of at most 200 characters without '/', '\\', a
    control character or a leading '.', so that it never reaches outside the folder it is put in
    ('../../x'); else raise SettingError naming `name`."""
    if not isinstance(value, str) or not value or len(value) > ID_MAX_CHARS or value.startswith(".") \
            or any(c in "/\\" or not c.isprintable() for c in value):
        raise SettingError(f"{name} must be a non-empty name of at most {ID_MAX_CHARS} printable characters without "
                           f"'/', '\\' or a leading '.', got {value!r}", (name,))
    return value


def inside(folder: str, name: str, what: str) -> str:
    """os.path.join(folder, name), checked to lie inside `folder` (links resolved): a path built
    from a stored value never writes elsewhere. ValueError naming `what` otherwise."""
    path = os.path.join(folder, name)
    root = os.path.realpath(folder)
    if os.path.commonpath([root, os.path.realpath(path)]) != root or os.path.realpath(path) == root:
        raise ValueError(f"{what}: {name!r} would be written outside {folder}; nothing was written there")
    return path
