"""Tuned rows in the store (`bayesbench run --tune`, `bayesbench/sweep/tune.py`): which rows are
a search's selection candidates, what a reported tuned row says about its search, and the block
it ranks in.

A tuned row's `config["tuning"]` holds its search (the grid, rule, selection seeds and set) and
its outcome (every candidate's selection scores, the one chosen, the edge and floor flags). Its
identity holds the search, so it is never pooled with an untuned row (`leaderboard.row_settings`);
its task is shown as "<task> (tuned)" (`tuned_label`), a block of its own with its own floors and
"x best", so a tuned and an untuned row are never ranked together either.
"""

from __future__ import annotations

TUNED = " (tuned)"


def is_selection(record) -> bool:
    """Whether a row is a tuning's selection candidate (`config["tuning"]["role"] == "selection"`):
    scored for choosing, never shown on a leaderboard."""
    return ((record.config or {}).get("tuning") or {}).get("role") == "selection"


def tuning_of(record) -> dict | None:
    """A reported tuned row's search and outcome (`config["tuning"]`); None for an untuned row."""
    tuning = (record.config or {}).get("tuning")
    return tuning if tuning and tuning.get("role") != "selection" else None


def tuned_label(record) -> str:
    """The task column of a row: its label, with " (tuned)" for a tuned row (a block of its own)."""
    return record.task_label + (TUNED if tuning_of(record) else "")


def short(x: float) -> str:
    """A rate as rows say it, to two significant digits: 3.2e-3, 1e-4, 0.02 -> 2e-2."""
    mantissa, exponent = f"{x:.1e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def rates_text(rates) -> str:
    """'1e-4 .. 1e-2': a grid's range."""
    return f"{short(min(rates))} .. {short(max(rates))}"


def tuning_marks(tuning: dict | None) -> list[str]:
    """What a tuned row must be read with: the rate that won of which grid (and any other axes'
    values), and the flags: 'best at the edge: widen the grid', 'at floor at every rate tried: ..'."""
    if not tuning:
        return []
    lrs = tuning.get("lrs") or []
    chosen = tuning.get("chosen") or {}
    out = []
    if chosen and lrs:
        out.append(f"lr {short(chosen['lr'])} chosen of {len(lrs)} rates {rates_text(lrs)}")
        out += [f"{k}={v}" for k, v in chosen.items() if k != "lr"]
    if tuning.get("at_floor"):
        out.append(f"at floor at every rate tried: {rates_text(lrs)}")
    elif tuning.get("edge"):
        rate = "the highest rate" if tuning["edge"] == "high" else "the lowest rate"
        out.append(f"best at the edge ({rate}): widen the grid")
    return out
