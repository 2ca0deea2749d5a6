"""Tuned rows in the store (`bayesbench run --tune`, `bayesbench/sweep/tune.py`): which rows are
a search's selection candidates, what a reported tuned row says about its search, and the block
it ranks in.

A tuned row's `config["tuning"]` holds its search (the grid, rule, selection seeds and set) and
its outcome (every candidate's selection scores, the one chosen, the edge and floor flags). Its
identity holds the search, so it is never pooled with an untuned row (`store.database.row_settings`);
its task is shown as "<task> (tuned)" (`tuned_label`), a block of its own with its own floors and
"x best", so a tuned and an untuned row are never ranked together either. The figure of a search
is `report/tuning.py`'s.
"""

from __future__ import annotations

import math

from ..stats import log_auc
from .records import trained_part

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
    if tuning.get("selection_flops"):
        mantissa, exponent = f"{tuning['selection_flops']:.2e}".split("e")
        out.append(f"search {mantissa}e{int(exponent)} FLOPs")
    if tuning.get("at_floor"):
        out.append(f"at floor at every rate tried: {rates_text(lrs)}")
    elif tuning.get("edge"):
        rate = "the highest rate" if tuning["edge"] == "high" else "the lowest rate"
        out.append(f"best at the edge ({rate}): widen the grid")
    return out


# ---------------------------------------------------------------- a selection row's score

def member_lr(record) -> float:
    """The learning rate a stored selection row trained at (its member's, in a packed ensemble)."""
    train = (record.config or {}).get("train") or {}
    rates = train.get("member_lrs")
    return float(rates[record.member]) if rates else float(train["lr"])


def member_setting(record) -> dict:
    """The other axes' values a selection row trained with ({} without axes)."""
    tuning = (record.config or {}).get("tuning") or {}
    return dict(tuning.get("setting") or {})


def candidate_score(record, rule: str, metric: str) -> float:
    """A selection row's score by the search's rule: its selection curve's last point ("final")
    or its mean over log(step) ("auc"), in curve metric `metric`; +inf for a diverged member, a
    member stopped (pruned) before the budget under "final", or a curve without a finite value:
    it is never chosen over one that trained."""
    curve = record.learning_curve
    if record.status != "ok" or curve is None or metric not in curve.values:
        return math.inf
    steps, values = trained_part(curve, metric, record.stop_step)  # a pruned member: up to where it stopped
    if not steps:
        return math.inf
    if stopped_early(record):
        return math.inf  # pruned before the budget: not a finished candidate, whatever the rule
    if rule == "final":
        value = values[-1]
    else:
        value = log_auc(steps, values, steps[0], steps[-1]) if len(steps) > 1 else values[0]
    return value if value is not None and math.isfinite(value) else math.inf


def stopped_early(record) -> bool:
    """Whether a row's member stopped training before its budget (`config["train"]["steps"]`)
    without diverging: a pruned candidate (or one `--until` stopped)."""
    budget = ((record.config or {}).get("train") or {}).get("steps")
    return record.status == "ok" and record.stop_step is not None and budget is not None and record.stop_step < budget
