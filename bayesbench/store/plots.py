"""Figures from the results store (matplotlib, Agg backend: PNG files, no display needed).

One PNG per (task, evaluation): left, each architecture's predictive entropy per scored
position (mean over sequences, one thin line per seed) against the Bayes entropy (the gap
between these two curves, averaged over positions, is the positional entropy MAE); right, the
per-sequence entropy MAE at each position, mean over sequences of |H(model) - H(Bayes)|, on a
log scale. Every axis names its metric (docs/science.md, "Metrics"). For tasks evaluated at several
lengths (HMM K = 20, 30, 50), one more PNG: the error per position at the longest length with
the trained length marked, and the mean error against K (length generalisation).

`plot_learning_curves` (`bayesbench plot --curves`): one PNG per task, a metric of the learning
curves against the training step (log axis) for every architecture (the latest run of each): the
mean over its seeds with a band spanning them, the uniform predictor's value on the same
sequences (the floor), the threshold of the leaderboard's "steps to" column, and 0 (Bayes).
"""

from __future__ import annotations

import math
import os
import re

from .figures import pyplot, save
from .leaderboard import (
    DEFAULT_THRESHOLD,
    METRICS,
    SHORT,
    check_metric,
    check_threshold,
    eval_length,
    latest_runs,
    select_rows,
)
from .records import RunRecord


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9=.-]+", "_", text).strip("_")


def plot(db: str | None = None, out_dir: str = "results/plots", *, task: str | None = None,
         group_id: str | None = None) -> list[str]:
    """Write the figures of the latest run of each (task, arch); returns the PNG paths."""
    plt = pyplot()
    records = select_rows(db, task=task, group_id=group_id, latest=True)
    panels: dict[tuple[str, str], list[RunRecord]] = {}
    for r in records:
        for name in r.curves:
            panels.setdefault((r.task_label, name), []).append(r)
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for (label, name), group in sorted(panels.items()):
        fig, (ax_h, ax_e) = plt.subplots(1, 2, figsize=(11, 4.2))
        archs = sorted({r.arch for r in group})
        bayes = None
        for i, arch in enumerate(archs):
            color = colors[i % len(colors)]
            for j, r in enumerate(x for x in group if x.arch == arch):
                c = r.curves[name]
                x = list(range(1, len(c.position) + 1))
                bayes = (x, c.bayes_entropy)
                lab = arch if j == 0 else None
                ax_h.plot(x, c.model_entropy, color=color, lw=1.2, alpha=0.8, label=lab)
                ax_e.semilogy(x, [max(v, 1e-6) for v in c.entropy_mae], color=color, lw=1.2, alpha=0.8, label=lab)
        if bayes is not None:
            ax_h.plot(*bayes, "k--", lw=2, label="Bayes (exact)")
        ax_h.set(xlabel="scored position (1 = first prediction)", ylabel="entropy (bits)",
                 title=f"{label}, eval {name}: predictive entropy")
        ax_e.set(xlabel="scored position", ylabel="mean over sequences of |H(model) - H(Bayes)| (bits)",
                 title="entropy MAE per position (per-sequence metric; one line per seed)")
        paths.append(save(fig, os.path.join(out_dir, f"{_slug(label)}_{_slug(name)}.png"), grid=True, legend=True))
    paths += _length_generalisation(records, out_dir, plt, colors)
    return paths


def _length_generalisation(records: list[RunRecord], out_dir: str, plt, colors: list[str]) -> list[str]:
    """One PNG per task scored at several K: error per position at the longest K, and error vs K."""
    by_task: dict[str, list[RunRecord]] = {}
    for r in records:
        if sum(eval_length(n) is not None for n in r.curves) >= 2:
            by_task.setdefault(r.task_label, []).append(r)
    paths = []
    for label, group in sorted(by_task.items()):
        fig, (ax_p, ax_k) = plt.subplots(1, 2, figsize=(11, 4.2))
        trained = eval_length(group[0].primary)
        for i, arch in enumerate(sorted({r.arch for r in group})):
            color = colors[i % len(colors)]
            members = [r for r in group if r.arch == arch]
            ks = sorted(k for k in (eval_length(n) for n in members[0].curves) if k is not None)
            longest = f"K={ks[-1]}"
            curves = [m.curves[longest].entropy_mae for m in members]
            mean_curve = [sum(c[t] for c in curves) / len(curves) for t in range(len(curves[0]))]
            ax_p.semilogy(range(1, len(mean_curve) + 1), [max(v, 1e-6) for v in mean_curve], color=color,
                          lw=1.5, label=arch)
            per_k = [[m.evals[f"K={k}"].entropy_mae.mean for m in members] for k in ks]
            means = [sum(v) / len(v) for v in per_k]
            ax_k.errorbar(ks, means, yerr=[[m - min(v) for m, v in zip(means, per_k)],
                                           [max(v) - m for m, v in zip(means, per_k)]],
                          color=color, marker="o", capsize=3, label=arch)
        if trained is not None:
            ax_p.axvline(trained, color="k", ls="--", lw=1, label=f"trained K={trained}")
        ax_p.set(xlabel="observation t", ylabel="mean |H(model) - H(Bayes)| (bits), mean over seeds",
                 title=f"{label}: error per position at the longest K")
        ax_k.set(xlabel="evaluation length K", ylabel="entropy MAE per (sequence, position) (bits)", yscale="log",
                 title="length generalisation (mean over seeds, bars: seed range)")
        paths.append(save(fig, os.path.join(out_dir, f"{_slug(label)}_length_generalisation.png"), grid=True,
                          legend=True))
    return paths


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _band(records: list[RunRecord], metric: str) -> tuple[list[int], list[float], list[float], list[float]]:
    """(steps, mean, low, high) over the seeds' curves at the steps they all measured."""
    curves = [r.learning_curve for r in records]
    steps = sorted(set.intersection(*(set(c.step) for c in curves)))
    cols = [[c.metric(metric)[c.step.index(s)] for c in curves] for s in steps]
    finite = [[v for v in col if math.isfinite(v)] for col in cols]
    mean = [sum(v) / len(v) if v else math.nan for v in finite]
    return steps, mean, [min(v) if v else math.nan for v in finite], [max(v) if v else math.nan for v in finite]


def plot_learning_curves(db: str | None = None, out_dir: str = "results/plots", *, task: str | None = None,
                         metric: str = "entropy_mae", threshold: float = DEFAULT_THRESHOLD,
                         group_id: str | None = None) -> list[str]:
    """One PNG per task: `metric` of the latest run with curves of each architecture against the
    training step, on the evaluation its curves measure; returns the paths (a newer run without
    curves, e.g. --no-curves, does not hide the older ones)."""
    check_metric(metric, tuple(METRICS))
    threshold = check_threshold(threshold)
    plt = pyplot()
    records = latest_runs([r for r in select_rows(db, task=task, group_id=group_id)
                           if r.learning_curve is not None and metric in r.learning_curve.values])
    by_task: dict[tuple[str, str], list[RunRecord]] = {}
    for r in records:
        by_task.setdefault((r.task_label, r.learning_curve.eval or r.primary), []).append(r)
    paths = []
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for (label, name), group in sorted(by_task.items()):
        fig, ax = plt.subplots(figsize=(8.5, 5.4))
        top = 0.0
        seeds = set()
        for i, arch in enumerate(sorted({r.arch for r in group})):
            members = [r for r in group if r.arch == arch]
            steps, mean, lo, hi = _band(members, metric)
            color = colors[i % len(colors)]
            ax.fill_between(steps, lo, hi, color=color, alpha=0.2, lw=0)
            ax.plot(steps, mean, color=color, lw=1.6, marker=MARKERS[i % len(MARKERS)], ms=4, mfc="none",
                    label=f"{arch} ({len(members)} seeds)")  # open markers: curves on top of each other stay visible
            top = max([top, *(v for v in hi if math.isfinite(v))])
            seeds.add(len(members))
        curve = group[0].learning_curve
        floor = curve.uniform.get(metric, math.nan)
        if math.isfinite(floor):
            ax.axhline(floor, color="0.4", ls="--", lw=1.2, label=f"uniform predictor (floor), {floor:.3f} bits")
            top = max(top, floor)
        ax.axhline(threshold, color="0.4", ls=":", lw=1.2, label=f"threshold of 'steps to', {threshold:g} bits")
        ax.axhline(0.0, color="k", lw=1.5, label="Bayes (exact posterior): 0")
        ax.set_xscale("log")
        ax.set_ylim(-0.02 * max(top, threshold), 1.08 * max(top, threshold))
        n_seeds = f"{seeds.pop()} seeds" if len(seeds) == 1 else "seeds per architecture in the legend"
        ev = group[0].evals.get(name)
        where = f"scored at {ev.positions}\n" if ev is not None else ""
        ax.set(xlabel="training step (log scale)", ylabel=f"{SHORT[metric]} (bits)",
               title=f"{label}, eval {name}: {SHORT[metric]} during training\n{where}"
                     f"{curve.n_sequences} fixed curve sequences; line: mean over {n_seeds}, band: their range")
        ax.title.set_fontsize(10)
        paths.append(save(fig, os.path.join(out_dir, f"{_slug(label)}_curves_{metric}.png"), grid=True, legend=True))
    return paths


def plot_comparison(a: list[RunRecord], b: list[RunRecord], comparison, path: str) -> str:
    """Two runs' curves of the compared metric (mean over seeds, band over them) and the step from
    which their difference is significant (`store.compare.Comparison`), to the PNG `path`."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 5.2))
    metric = comparison.metric
    for records, name, color in ((a, "A", "C0"), (b, "B", "C1")):
        members = [r for r in records if r.learning_curve is not None]
        steps, mean, lo, hi = _band(members, metric)
        ax.fill_between(steps, lo, hi, color=color, alpha=0.2, lw=0)
        ax.plot(steps, mean, color=color, lw=1.8, marker="o", ms=2.5,
                label=f"{name}: {records[0].arch}, run {records[0].run_id} ({len(members)} seeds)")
    if comparison.significant_from is not None:
        ax.axvline(comparison.significant_from, color="k", ls="--", lw=1,
                   label=f"significant from step {comparison.significant_from} on")
    ax.axhline(0.0, color="k", lw=1.5, label="Bayes (exact posterior): 0")
    ax.set_xscale("log")
    c = a[0].learning_curve
    ax.set(xlabel="training step (log scale)", ylabel=f"{SHORT[metric]} (bits)",
           title=f"{a[0].task_label}, eval {c.eval}: {SHORT[metric]} on {c.n_sequences} curve sequences\n"
                 "line: mean over seeds, band: their range; test: Welch's t per step, fixed sequence from the end")
    ax.title.set_fontsize(10)
    return save(fig, path, grid=True, legend=True)
