"""The figure of a learning-rate search (`bayesbench plot --tuning`): each architecture's
selection score against the rate, the rate chosen, the floor. What a tuned row holds is
`store/tuning.py`'s."""

from __future__ import annotations

import math
import os

from ..figures import count, heading, save, subplots, unique_legend
from ..store.tuning import candidate_score, member_lr, tuning_of
from .rows import short
from .selection import select_rows


def plot_tuning(db: str | None = None, out_dir: str = "results/plots", *, task: str | None = None) -> list[str]:
    """`bayesbench plot --tuning`: one PNG per task and search: each architecture's selection
    score against the learning rate (the mean over its selection seeds, their range as a band),
    the rate chosen marked, the uniform floor of the selection set; returns the paths."""
    selection = select_rows(db, task=task, selection=True)
    finals = [r for r in select_rows(db, task=task) if tuning_of(r)]
    groups: dict[tuple, list] = {}
    for r in selection:
        tuning = r.config["tuning"]
        groups.setdefault((r.task_label, _search_key(tuning)), []).append(r)
    paths = []
    for i, ((label, search), rows) in enumerate(sorted(groups.items(), key=lambda kv: kv[0][0])):
        tunings = [(f, t) for f in finals if (t := tuning_of(f)) is not None]  # (all tuned: finals keeps those)
        chosen = {f.arch: t["chosen"]["lr"] for f, t in tunings if f.task_label == label and _search_key(t) == search}
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
    floor = next((r.learning_curve.uniform.get(tuning["metric"]) for r in rows if r.learning_curve is not None), None)
    return draw_search(path, label, selection_scores(rows, tuning), chosen, floor=floor, tuning=tuning,
                       steps=rows[0].steps, seeds=(min(r.seed for r in rows), max(r.seed for r in rows)))


def selection_scores(rows: list, tuning: dict) -> dict[str, dict[float, list[float]]]:
    """A search's selection rows as `draw_search` takes them: per architecture and rate, each
    selection seed's score by the search's rule and metric."""
    scores: dict[str, dict[float, list[float]]] = {}
    for r in rows:
        scores.setdefault(r.arch, {}).setdefault(member_lr(r), []).append(
            candidate_score(r, tuning["rule"], tuning["metric"]))
    return scores


def draw_search(path: str, label: str, scores: dict[str, dict[float, list[float]]], chosen: dict[str, float], *,
                floor: float | None, tuning: dict, steps: int, seeds: tuple[int, int] | None) -> str:
    """The search figure from its numbers: `scores[arch][rate]` the selection seeds' scores at that
    rate (not finite: the seed diverged), `chosen[arch]` the rate chosen, `floor` the uniform
    predictor's score on the selection set, `tuning` the search's settings (its "lrs", "rule",
    "metric", "selection_seeds", "selection_sequences"), `seeds` the selection seeds' range when
    known. `plot_tuning` draws a store's searches with it; scripts/zoo_answer.py a summary's."""
    rule, metric = tuning["rule"], tuning["metric"]
    many = len(scores) > 10  # more lines than the default cycle has colours: 20 colours, the legend beside
    fig, ax = subplots(figsize=(11.0, 5.6) if many else (8.5, 5.2))
    import matplotlib

    tab20 = matplotlib.colormaps["tab20"]  # a listed map: an integer picks its i-th colour
    colors = [tab20(i) for i in range(20)] if many else matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    top = floor or 0.0
    for i, (arch, by_rate) in enumerate(sorted(scores.items())):
        color = colors[i % len(colors)]
        lrs = sorted(by_rate)
        finite = [[v for v in by_rate[lr] if math.isfinite(v)] for lr in lrs]
        mean = [sum(v) / len(v) if v and len(v) == len(by_rate[lr]) else math.nan for v, lr in zip(finite, lrs)]
        lo = [min(v) if v else math.nan for v in finite]
        hi = [max(v) if v else math.nan for v in finite]
        ax.fill_between(lrs, lo, hi, color=color, alpha=0.2, lw=0)
        ax.plot(lrs, mean, color=color, marker="o", ms=4, mfc="none", lw=1.6, label=arch)
        diverged = [lr for lr, v, all_ in zip(lrs, finite, (by_rate[lr] for lr in lrs)) if len(v) < len(all_)]
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
    ax.set(xlabel="peak learning rate (log scale)",
           ylabel=f"{short(metric)} on the selection set, {what} (bits)")
    if many:
        unique_legend(ax, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    else:
        unique_legend(ax)
    n_seeds = tuning["selection_seeds"]
    heading(fig, f"{label}: learning-rate search",
            f"{count(len(tuning['lrs']), 'rate')}, {count(n_seeds, 'selection seed')} each "
            f"({f'seeds {seeds[0]} .. {seeds[1]}; ' if seeds else ''}line: mean, band: range); "
            f"{tuning['selection_sequences']} held-out selection sequences (apart from the evaluation and curve "
            f"sets); rule: {rule}; {steps} steps each")
    return save(fig, path, grid=True)
