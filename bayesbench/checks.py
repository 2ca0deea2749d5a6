"""The one positive-integer check, shared by configs, tasks, models and the command line.

A count (steps, widths, layers, K, ...) must be a real int (not a bool, not a float) >= 1; the
error names the argument and the rule: "d_model must be a positive integer, got 0".
"""

from __future__ import annotations


def positive_int(name: str, value, what: str | None = None) -> int:
    """Return `value` if it is an int >= 1, else raise ValueError naming `name` (and, if given,
    `what` it counts: "ensemble must be a positive integer (number of members), got 0")."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        meaning = f" ({what})" if what else ""
        raise ValueError(f"{name} must be a positive integer{meaning}, got {value!r}")
    return value
