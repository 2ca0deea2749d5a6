"""`bayesbench plot --state`: the gap to Bayes against the recurrent state size, per task (issue 43).

zoology's recall-against-state picture (Arora et al. 2024, arXiv 2402.18668, Fig. 2) asked in
bits: one PNG per (task, evaluation) with one point per leaderboard row (an architecture and its
configuration, seeds pooled as the leaderboard pools them: `report.rows.aggregate`) at x = the
floats one member carries per sequence at the scored length (`models/state.py`, the row's
config["state"]) and y = the row's mean of the leaderboard's metric with its 95% interval over
seeds; the uniform floor and 0 (Bayes) drawn across. The x axis is logarithmic, linear below one
float so a model that holds nothing (the position-wise MLP, 0 floats) stays on the figure. Rows
stored without a state count (before it existed, outside models) are left out and counted in the
heading.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from ..figures import heading, save, subplots
from .rows import Row, aggregate, check_metric, short
from .selection import select_rows

FLOOR_STYLE = {"color": "0.35", "ls": "--", "lw": 1.2}
BAYES_STYLE = {"color": "k", "ls": "-", "lw": 1.5}
MARKERS = "osD^v<>pXh*"


def state_rows(rows: list[Row]) -> tuple[dict[tuple[str, str], list[Row]], dict[tuple[str, str], int]]:
    """The primary-evaluation rows with a state count, per (task, eval), and per (task, eval) how many
    rows lacked one."""
    out: dict[tuple[str, str], list[Row]] = {}
    lacking: dict[tuple[str, str], int] = {}
    for row in rows:
        if not row.primary:
            continue
        if not row.state or row.state.get("floats") is None:
            lacking[(row.task, row.eval)] = lacking.get((row.task, row.eval), 0) + 1
            continue
        out.setdefault((row.task, row.eval), []).append(row)
    return out, lacking


def plot_state(db: str | None = None, out_dir: str = "results/plots", *, task: str | None = None,
               metric: str = "entropy_mae") -> list[str]:
    """One PNG per (task, evaluation): `metric` (a final metric; the leaderboard's default, the entropy
    MAE) of each row against its state floats; returns the paths."""
    check_metric(metric)
    rows = aggregate(select_rows(db, task=task), metric)
    groups, lacking = state_rows(rows)
    paths = []
    for (label, name), group in sorted(groups.items()):
        slug = "".join(c if c.isalnum() else "_" for c in f"{label}_{name}").strip("_")
        paths.append(_figure(label, name, group, metric, lacking.get((label, name), 0),
                             os.path.join(out_dir, f"{slug}_state.png")))
    return paths


def _figure(label: str, name: str, group: list[Row], metric: str, lacking: int, path: str) -> str:
    points = [StatePoint(row.arch, row.state["floats"] if row.state else 0, row.means[metric], row.ci, len(row.seeds))
              for row in group]
    floors = next((row.floors for row in group if row.floors), None) or {}
    uniform = floors.get("uniform", {}).get(metric)
    return draw_state(path, label, name, points, metric, lacking=lacking,
                      uniform=uniform.mean if uniform is not None else None,
                      length=group[0].state.get("length") if group[0].state else None)


@dataclass(frozen=True)
class StatePoint:
    """One point of the state figure: an architecture's state floats, its mean of the metric over
    `n_seeds` seeds and that mean's 95% interval."""

    arch: str
    floats: int
    mean: float
    ci: tuple[float, float]
    n_seeds: int


def draw_state(path: str, label: str, name: str, points: list[StatePoint], metric: str, *,
               uniform: float | None, length: int | None, lacking: int = 0) -> str:
    """The state figure from its numbers (`plot_state` draws a store's rows with it,
    scripts/zoo_answer.py a summary's): `uniform` the uniform predictor's mean of `metric` on the
    same sequences, `length` the scored length the state is counted at, `lacking` how many rows had
    no count."""
    fig, ax = subplots(figsize=(9.0, 5.6))
    top = 0.0
    for i, pt in enumerate(sorted(points, key=lambda p: p.floats)):
        x, mean = float(pt.floats), pt.mean
        if not math.isfinite(mean):
            continue
        lo, hi = pt.ci
        err = ([[mean - max(lo, 0.0)], [hi - mean]] if math.isfinite(lo) and math.isfinite(hi) else None)
        ax.errorbar([x], [mean], yerr=err, fmt=MARKERS[i % len(MARKERS)], ms=7, capsize=4, mfc="none",
                    label=f"{pt.arch} ({pt.n_seeds} seed{'s' if pt.n_seeds != 1 else ''})")
        if len(points) > len(MARKERS):  # markers and colours repeat: name each point beside it
            ax.annotate(pt.arch, (x, mean), xytext=(5, -3), textcoords="offset points", fontsize=7)
        top = max(top, hi if math.isfinite(hi) else mean)
    if uniform is not None and math.isfinite(uniform):
        ax.axhline(uniform, **FLOOR_STYLE, label=f"uniform predictor (floor), {uniform:.3f} bits")
        top = max(top, uniform)
    ax.axhline(0.0, **BAYES_STYLE, label="Bayes (exact posterior): 0")
    xs = [float(pt.floats) for pt in points]
    if min(xs) > 0:
        ax.set_xscale("log")
    else:  # a model that carries nothing: linear below one float, log above, nothing left of 0
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlim(-0.5, 3 * max(max(xs), 1.0))
    ax.set_ylim(-0.03 * max(top, 1e-3), 1.1 * max(top, 1e-3))
    ax.set(xlabel=f"recurrent state per sequence (floats, log scale; 0 = nothing carried)"
                  f"{f' at length {length}' if length else ''}",
           ylabel=f"{short(metric)} (bits), mean over seeds, 95% interval")
    ax.legend(fontsize=8, loc="best")
    facts = [f"{len(points)} rows; each point one architecture and configuration (seeds pooled as the leaderboard "
             "pools them); state counted from each layer's recurrent reference (models/state.py)"]
    if lacking:
        facts.append(f"{lacking} row{'s' if lacking != 1 else ''} without a state count left out (stored before it, "
                     "an outside model, or predictions with no model)")
    heading(fig, f"{label}, eval {name}: {short(metric)} against recurrent state size", *facts)
    return save(fig, path, grid=True)
