"""Figures from the results store (matplotlib, Agg backend: PNG files, no display needed).

One PNG per (task, evaluation): left, each architecture's predictive entropy per scored
position (mean over sequences, one thin line per seed) against the Bayes entropy (the gap
between these two curves, averaged over positions, is the positional entropy MAE); right, the
per-sequence entropy MAE at each position, mean over sequences of |H(model) - H(Bayes)|, on a
log scale. Every axis names its metric (docs/science.md, "Metrics"). For tasks evaluated at several
lengths (HMM K = 20, 30, 50), one more PNG: the error per position at the longest length with
the trained length marked, and the mean error against K (length generalisation).
"""

from __future__ import annotations

import os
import re

from .figures import pyplot, save
from .leaderboard import eval_length, select_rows
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
