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

import math
import os

from .curve_stats import log_auc
from .figures import count, heading, save, subplots, unique_legend

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
    steps, values = list(curve.step), list(curve.metric(metric))
    stop = record.stop_step
    if stop is not None:  # a pruned member: its curve up to where it stopped
        kept = [(s, v) for s, v in zip(steps, values) if s <= stop]
        steps, values = [s for s, _ in kept], [v for _, v in kept]
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


# ---------------------------------------------------------------- the figure

def plot_tuning(db: str | None = None, out_dir: str = "results/plots", *, task: str | None = None) -> list[str]:
    """`bayesbench plot --tuning`: one PNG per task and search: each architecture's selection
    score against the learning rate (the mean over its selection seeds, their range as a band),
    the rate chosen marked, the uniform floor of the selection set; returns the paths."""
    from .leaderboard import select_rows

    selection = select_rows(db, task=task, selection=True)
    finals = [r for r in select_rows(db, task=task) if tuning_of(r)]
    groups: dict[tuple, list] = {}
    for r in selection:
        tuning = r.config["tuning"]
        groups.setdefault((r.task_label, _search_key(tuning)), []).append(r)
    paths = []
    for i, ((label, search), rows) in enumerate(sorted(groups.items(), key=lambda kv: kv[0][0])):
        chosen = {f.arch: tuning_of(f)["chosen"]["lr"] for f in finals
                  if f.task_label == label and _search_key(tuning_of(f)) == search}
        suffix = "" if sum(1 for (lb, _) in groups if lb == label) == 1 else f"_{i}"
        name = "".join(c if c.isalnum() else "_" for c in label).strip("_") + f"_tuning{suffix}.png"
        paths.append(_tuning_figure(label, rows, chosen, os.path.join(out_dir, name)))
    return paths


def _search_key(tuning: dict) -> str:
    import json

    keep = ("lrs", "selection_seeds", "rule", "metric", "selection_sequences", "axes", "packed", "prune")
    return json.dumps({k: tuning.get(k) for k in keep}, sort_keys=True)


def _tuning_figure(label: str, rows: list, chosen: dict[str, float], path: str) -> str:
    tuning = rows[0].config["tuning"]
    rule, metric = tuning["rule"], tuning["metric"]
    fig, ax = subplots(figsize=(8.5, 5.2))
    by_arch: dict[str, list] = {}
    for r in rows:
        by_arch.setdefault(r.arch, []).append(r)
    floor = next((r.learning_curve.uniform.get(metric) for r in rows if r.learning_curve is not None), None)
    import matplotlib

    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    top = floor or 0.0
    for i, (arch, members) in enumerate(sorted(by_arch.items())):
        color = colors[i % len(colors)]
        scores: dict[float, list[float]] = {}
        for r in members:
            scores.setdefault(member_lr(r), []).append(candidate_score(r, rule, metric))
        lrs = sorted(scores)
        finite = [[v for v in scores[lr] if math.isfinite(v)] for lr in lrs]
        mean = [sum(v) / len(v) if v and len(v) == len(scores[lr]) else math.nan for v, lr in zip(finite, lrs)]
        lo = [min(v) if v else math.nan for v in finite]
        hi = [max(v) if v else math.nan for v in finite]
        ax.fill_between(lrs, lo, hi, color=color, alpha=0.2, lw=0)
        ax.plot(lrs, mean, color=color, marker="o", ms=4, mfc="none", lw=1.6, label=arch)
        diverged = [lr for lr, v, all_ in zip(lrs, finite, (scores[lr] for lr in lrs)) if len(v) < len(all_)]
        if diverged:
            ax.plot(diverged, [floor or 0.0] * len(diverged), ls="none", marker="x", color=color, ms=7,
                    label="a seed diverged (drawn at the floor)")
        if arch in chosen:
            at = lrs.index(chosen[arch]) if chosen[arch] in lrs else None
            if at is not None and math.isfinite(mean[at]):
                ax.plot([chosen[arch]], [mean[at]], marker="*", ms=14, color=color, ls="none",
                        label="rate chosen (re-trained on the reported seeds)")
        top = max([top, *(v for v in hi if math.isfinite(v))])
    if floor is not None:
        ax.axhline(floor, color="0.3", ls="--", lw=1.2, label=f"uniform predictor (floor), {floor:.3f} bits")
    ax.axhline(0.0, color="0.3", ls="-", lw=0.8, label="Bayes (exact posterior): 0")
    ax.set_xscale("log")
    ax.set_ylim(-0.02 * max(top, 0.1), 1.08 * max(top, 0.1))
    what = "last point" if rule == "final" else "mean over log(step)"
    from .leaderboard import SHORT

    ax.set(xlabel="peak learning rate (log scale)",
           ylabel=f"{SHORT.get(metric, metric)} on the selection set, {what} (bits)")
    unique_legend(ax)
    seeds = tuning["selection_seeds"]
    heading(fig, f"{label}: learning-rate search",
            f"{count(len(tuning['lrs']), 'rate')}, {count(seeds, 'selection seed')} each (seeds "
            f"{min(r.seed for r in rows)} .. {max(r.seed for r in rows)}; line: mean, band: range); "
            f"{tuning['selection_sequences']} held-out selection sequences (apart from the evaluation and curve "
            f"sets); rule: {rule}; {rows[0].steps} steps each")
    return save(fig, path, grid=True)
