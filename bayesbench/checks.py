"""The one integer-count check, shared by configs, tasks, models, the oracle and the command line.

A count (steps, widths, layers, K, V, ...) must be a real int (not a bool, not a float) at or
above its minimum; the error names the argument and the rule, in one style:
"d_model must be a positive integer, got 0", "V must be an integer >= 2, got 1".
"""

from __future__ import annotations


def int_at_least(name: str, value, minimum: int, what: str | None = None) -> int:
    """Return `value` if it is an int >= minimum, else raise ValueError naming `name`, the rule and
    (if given) `what` it counts: "ensemble must be a positive integer (number of members), got 0"."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        rule = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        meaning = f" ({what})" if what else ""
        raise ValueError(f"{name} must be {rule}{meaning}, got {value!r}")
    return value


def positive_int(name: str, value, what: str | None = None) -> int:
    """`int_at_least(name, value, 1, what)`: a count that must be at least one."""
    return int_at_least(name, value, 1, what)
