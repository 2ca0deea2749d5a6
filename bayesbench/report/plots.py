"""Figures from the results store (matplotlib, Agg backend: PNG files, no display needed).

One PNG per (task, evaluation): left, each architecture's predictive entropy per scored
position (mean over sequences) against the Bayes entropy and the uniform predictor's log2 C (the
gap between the model's and the Bayes curve, averaged over positions, is the positional entropy
MAE); right, the per-sequence entropy MAE at each position, mean over sequences of
|H(model) - H(Bayes)|, on a log scale, against the uniform predictor's (the floor). Each
architecture is drawn as the mean over its seeds with a band spanning them; the heading states
the evaluation set (name, sequences, scored positions), the training steps and the seeds, and the
bijection's final query, where scored, is marked. Every axis names its metric (docs/science.md,
"Metrics"). For tasks evaluated at several lengths (HMM K = 20, 30, 50), one more PNG: the error
per position at the longest length with the trained length marked, and the mean error against K
(length generalisation), each against the uniform floor.

`plot_learning_curves` (`bayesbench plot --curves`): one PNG per task, a metric of the learning
curves against the training step (log axis) for every architecture (the latest run of each): the
mean over its seeds with a band spanning them, the uniform predictor's value on the same
sequences (the floor), the threshold of the leaderboard's "steps to" column, and 0 (Bayes).
"""

from __future__ import annotations

import math
import os
import re

from .. import metric_table
from ..figures import count, heading, mean_and_range, pyplot, save, subplots, unique_legend
from ..store.records import EvalResult, LearningCurve, PositionCurves, RunRecord
from .rows import DEFAULT_THRESHOLD, check_metric, check_threshold, eval_length, short
from .selection import latest_runs, select_rows

FLOOR_STYLE = {"color": "0.35", "ls": "--", "lw": 1.2}
BAYES_STYLE = {"color": "k", "ls": "-", "lw": 1.5}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9=.-]+", "_", text).strip("_")


def _colors() -> list[str]:
    return pyplot().rcParams["axes.prop_cycle"].by_key()["color"]


def _positive(values: list[float]) -> list[float]:
    """Values for a log axis: an exact 0 drawn at 1e-6 bits."""
    return [max(v, 1e-6) if math.isfinite(v) else math.nan for v in values]


def uniform_bits(ev: EvalResult, curve: PositionCurves) -> float | None:
    """log2 C, the uniform predictor's entropy, from its floor on the same sequences: its positional
    entropy MAE is mean over positions of (log2 C - mean H(Bayes)), exactly, as H(Bayes) <= log2 C
    everywhere (None: stored without floors)."""
    u = (ev.floors or {}).get("uniform", {}).get("entropy_mae_positional")
    if u is None or not math.isfinite(u.mean) or not curve.bayes_entropy:
        return None
    return u.mean + sum(curve.bayes_entropy) / len(curve.bayes_entropy)


def _mean_band(ax, x, rows: list[list[float]], color: str, label: str, *, log: bool = False) -> None:
    """The mean over seeds (rows) as a line and, with two or more seeds, a band from the lowest to the highest."""
    mean, lo, hi = mean_and_range(rows)
    f = _positive if log else list
    ax.plot(x, f(mean), color=color, lw=1.6, label=label)
    if len(rows) > 1:
        ax.fill_between(x, f(lo), f(hi), color=color, alpha=0.2, lw=0)


def _by_arch(group: list[RunRecord]) -> dict[str, list[RunRecord]]:
    """arch -> its members in seed order, each (run, seed) once however often `group` holds it (a
    record of several evaluation sets is in one leaderboard row per set): a figure's seed count
    counts seeds, not rows."""
    out: dict[str, list[RunRecord]] = {}
    unique = {(r.run_id, r.seed): r for r in group}
    for r in sorted(unique.values(), key=lambda r: (r.arch, r.seed)):
        out.setdefault(r.arch, []).append(r)
    return out


def _arch_label(arch: str, members: list[RunRecord], steps_differ: bool) -> str:
    steps = sorted({m.steps for m in members})
    at = f", {'/'.join(map(str, steps))} steps" if steps_differ else ""
    return f"{arch} ({count(len(members), 'seed')}{at})"


def _setting(group: list[RunRecord], names: list[str]) -> tuple[str, bool]:
    """What the figure's numbers were measured on, in words: the evaluation sets (sequences, scored
    positions), the training steps and the seeds; and whether the steps differ between rows."""
    steps = sorted({r.steps for r in group})
    seeds = sorted({len(m) for m in _by_arch(group).values()})
    sizes = sorted({r.evals[n].entropy_mae.n_sequences for r in group for n in names if n in r.evals})
    size = "/".join(map(str, sizes)) + (" (differs between rows)" if len(sizes) > 1 else "")
    if len(names) == 1:
        ev = next(r.evals[names[0]] for r in group if names[0] in r.evals)
        evals = f"eval {names[0]}: {size} sequences, scored at {ev.positions}"
    else:
        evals = f"evals {', '.join(names)}: {size} sequences each"
    trained = (f"{steps[0]} training steps" if len(steps) == 1
               else f"{steps[0]}-{steps[-1]} training steps (per architecture in the legend)")
    per_arch = "/".join(map(str, seeds))
    return f"{evals}; {trained}; {per_arch} seeds per architecture (line: mean over seeds, band: " \
                              "their range)", len(steps) > 1


def plot(db: str | None = None, out_dir: str = "results/plots", *, task: str | None = None,
         group_id: str | None = None) -> list[str]:
    """Write the figures of the latest run of each (task, arch); returns the PNG paths."""
    records = select_rows(db, task=task, group_id=group_id, latest=True)
    panels: dict[tuple[str, str], list[RunRecord]] = {}
    for r in records:
        for name in r.curves:
            panels.setdefault((r.task_label, name), []).append(r)
    paths = []
    for (label, name), group in sorted(panels.items()):
        paths.append(_per_position(label, name, group, os.path.join(out_dir, f"{_slug(label)}_{_slug(name)}.png")))
    paths += _length_generalisation(records, out_dir)
    return paths


def _per_position(label: str, name: str, group: list[RunRecord], path: str) -> str:
    """Model vs Bayes entropy per position (left) and the entropy error per position (right)."""
    fig, (ax_h, ax_e) = subplots(1, 2, figsize=(12, 4.8))
    setting, steps_differ = _setting(group, [name])
    colors = _colors()
    first = group[0]
    ev, curve = first.evals[name], first.curves[name]
    x = list(range(1, len(curve.position) + 1))
    for i, (arch, members) in enumerate(_by_arch(group).items()):
        color, lab = colors[i % len(colors)], _arch_label(arch, members, steps_differ)
        _mean_band(ax_h, x, [m.curves[name].model_entropy for m in members], color, lab)
        _mean_band(ax_e, x, [m.curves[name].entropy_mae for m in members], color, lab, log=True)
    ax_h.plot(x, curve.bayes_entropy, **{**BAYES_STYLE, "ls": "--", "lw": 2}, label="Bayes (exact posterior)")
    log2c = uniform_bits(ev, curve)
    if log2c is not None:
        floor = f"uniform predictor (floor): entropy log2 C = {log2c:.3f} bits"
        ax_h.axhline(log2c, **FLOOR_STYLE, label=floor)
        gap = [log2c - h for h in curve.bayes_entropy]
        ax_e.plot(x, [g if g > 1e-9 else math.nan for g in gap], **FLOOR_STYLE, label=floor)
    if "query" in ev.positions:
        for ax in (ax_h, ax_e):
            ax.axvline(x[-1], color="tab:gray", ls=":", lw=1.5,
                       label=f"position {x[-1]}: the final query (a retrieval, Bayes entropy 0)")
    ax_h.set(xlabel="scored position (1 = first prediction)", ylabel="predictive entropy (bits)",
             title="predictive entropy, mean over sequences")
    ax_e.set(xlabel="scored position (1 = first prediction)", ylabel="|H(model) - H(Bayes)| (bits, 0 = Bayes)",
             yscale="log", title="entropy error, mean over sequences")
    for ax in (ax_h, ax_e):
        if len(x) <= 20:
            ax.set_xticks(x)
        ax.grid(alpha=0.3)
    unique_legend(fig, where="outside lower center")
    heading(fig, f"{label}, eval {name}: model vs Bayes entropy per position", setting)
    return save(fig, path)


def _length_generalisation(records: list[RunRecord], out_dir: str) -> list[str]:
    """One PNG per task scored at several K: error per position at the longest K, and error vs K."""
    by_task: dict[str, list[RunRecord]] = {}
    for r in records:
        if sum(eval_length(n) is not None for n in r.curves) >= 2:
            by_task.setdefault(r.task_label, []).append(r)
    paths = []
    colors = _colors()
    for label, group in sorted(by_task.items()):
        fig, (ax_p, ax_k) = subplots(1, 2, figsize=(12, 4.8))
        trained = eval_length(group[0].primary)
        ks = sorted({k for r in group for k in (eval_length(n) for n in r.curves) if k is not None})
        names = [f"K={k}" for k in ks]
        setting, steps_differ = _setting(group, names)
        longest = names[-1]
        for i, (arch, members) in enumerate(_by_arch(group).items()):
            color, lab = colors[i % len(colors)], _arch_label(arch, members, steps_differ)
            rows = [m.curves[longest].entropy_mae for m in members if longest in m.curves]
            _mean_band(ax_p, range(1, len(rows[0]) + 1), rows, color, lab, log=True)
            per_k = [[m.evals[n].entropy_mae.mean for m in members if n in m.evals] for n in names]
            means, lo, hi = mean_and_range([list(col) for col in zip(*per_k)])
            ax_k.errorbar(ks, means, yerr=[[m - a for m, a in zip(means, lo)], [b - m for m, b in zip(means, hi)]],
                          color=color, marker="o", capsize=3, label=lab)
        ref = next(r for r in group if longest in r.curves)
        log2c = uniform_bits(ref.evals[longest], ref.curves[longest])
        if log2c is not None:
            floor = "uniform predictor (floor)"
            ax_p.plot(range(1, len(ref.curves[longest].bayes_entropy) + 1),
                      [log2c - h for h in ref.curves[longest].bayes_entropy], **FLOOR_STYLE, label=floor)
            floors = [next((r.evals[n].floors or {}).get("uniform", {}).get("entropy_mae") for r in group
                           if n in r.evals) for n in names]
            present = [f for f in floors if f is not None]
            if len(present) == len(floors):
                ax_k.plot(ks, [f.mean for f in present], marker="s", ms=4, **FLOOR_STYLE, label=floor)
        if trained is not None:
            ax_p.axvline(trained, color="k", ls=":", lw=1.2, label=f"trained length K={trained}")
            ax_k.axvline(trained, color="k", ls=":", lw=1.2, label=f"trained length K={trained}")
        ax_p.set(xlabel="observation t", ylabel="|H(model) - H(Bayes)| (bits, 0 = Bayes)", yscale="log",
                 title=f"entropy error per position at {longest}, mean over sequences")
        ax_k.set(xlabel="evaluation length K (observations)", ylabel="entropy MAE per (sequence, position) (bits)",
                 yscale="log", xticks=ks, title="entropy MAE against length (bars: range over seeds)")
        for ax in (ax_p, ax_k):
            ax.grid(alpha=0.3)
        unique_legend(fig, where="outside lower center")
        heading(fig, f"{label}: length generalisation, trained at K={trained}, scored at "
                     f"K={', '.join(map(str, ks))}", setting)
        paths.append(save(fig, os.path.join(out_dir, f"{_slug(label)}_length_generalisation.png")))
    return paths


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _curve(record: RunRecord) -> LearningCurve:
    """The record's learning curve, where the caller kept only records that have one."""
    if record.learning_curve is None:
        raise ValueError(f"run {record.run_id} ({record.arch}) has no learning curve")
    return record.learning_curve


def _band(records: list[RunRecord], metric: str) -> tuple[list[int], list[float], list[float], list[float]]:
    """(steps, mean, low, high) over the seeds' curves at the steps they all measured."""
    curves = [_curve(r) for r in records]
    steps = sorted(set.intersection(*(set(c.step) for c in curves)))
    return steps, *mean_and_range([[c.metric(metric)[c.step.index(s)] for s in steps] for c in curves])


def curve_metrics(db: str | None = None, *, task: str | None = None,
                  group_id: str | None = None) -> dict[str, list[str]]:
    """{task label: the metrics its stored learning curves measure} over the stored runs that have
    curves (e.g. the bijection's cases 'kl:repeated' and 'kl:new' are measured for it alone)."""
    out: dict[str, set[str]] = {}
    for r in select_rows(db, task=task, group_id=group_id):
        if r.learning_curve is not None:
            out.setdefault(r.task_label, set()).update(r.learning_curve.values)
    return {label: [m for m in metric_table.curve_metrics() if m in ms] for label, ms in sorted(out.items())}


def plot_learning_curves(db: str | None = None, out_dir: str = "results/plots", *, task: str | None = None,
                         metric: str = "entropy_mae", threshold: float = DEFAULT_THRESHOLD,
                         group_id: str | None = None) -> list[str]:
    """One PNG per task: `metric` of the latest run with curves of each architecture against the
    training step, on the evaluation its curves measure; returns the paths (a newer run without
    curves, e.g. --no-curves, does not hide the older ones)."""
    check_metric(metric, metric_table.curve_metrics())
    threshold = check_threshold(threshold)
    records = latest_runs([r for r in select_rows(db, task=task, group_id=group_id)
                           if r.learning_curve is not None and metric in r.learning_curve.values])
    by_task: dict[tuple[str, str], list[RunRecord]] = {}
    for r in records:
        by_task.setdefault((r.task_label, _curve(r).eval or r.primary), []).append(r)
    paths = []
    for (label, name), group in sorted(by_task.items()):
        file_name = f"{_slug(label)}_curves_{_slug(metric)}.png"  # kl:repeated -> kl_repeated
        paths.append(_curve_figure(label, name, group, metric, threshold, os.path.join(out_dir, file_name)))
    return paths


def _curve_figure(label: str, name: str, group: list[RunRecord], metric: str, threshold: float, path: str) -> str:
    """`metric` of the learning curves of `group` (records with curves of one task and eval)
    against the training step, one line and band per architecture, to the PNG `path`."""
    fig, ax = subplots(figsize=(9.5, 5.6))
    top = 0.0
    colors = _colors()
    steps_differ = len({r.steps for r in group}) > 1
    for i, (arch, members) in enumerate(_by_arch(group).items()):
        steps, mean, lo, hi = _band(members, metric)
        color = colors[i % len(colors)]
        ax.fill_between(steps, lo, hi, color=color, alpha=0.2, lw=0)
        ax.plot(steps, mean, color=color, lw=1.6, marker=MARKERS[i % len(MARKERS)], ms=4, mfc="none",
                label=_arch_label(arch, members, steps_differ))  # open markers: overlapping curves stay visible
        top = max([top, *(v for v in hi if math.isfinite(v))])
    curve = _curve(group[0])
    floor = curve.uniform.get(metric, math.nan)
    if math.isfinite(floor):
        ax.axhline(floor, **FLOOR_STYLE, label=f"uniform predictor (floor), {floor:.3f} bits")
        top = max(top, floor)
    ax.axhline(threshold, color="0.4", ls=":", lw=1.2, label=f"threshold of 'steps to', {threshold:g} bits")
    ax.axhline(0.0, **BAYES_STYLE, label="Bayes (exact posterior): 0")
    ax.set_xscale("log")
    ax.set_ylim(-0.02 * max(top, threshold), 1.08 * max(top, threshold))
    ax.set(xlabel="training step (log scale)", ylabel=f"{short(metric)} (bits)")
    unique_legend(ax)
    heading(fig, f"{label}, eval {name}: {short(metric)} during training",
            _curve_setting(group, name, [len(m) for m in _by_arch(group).values()]))
    return save(fig, path, grid=True)


def per_position_figure(records: list[RunRecord], name: str, path: str) -> str:
    """The per-position figure of `plot` (model vs Bayes entropy, error per position) of the
    given records (one task; each architecture drawn over its records) on evaluation `name`."""
    return _per_position(records[0].task_label, name, [r for r in records if name in r.curves], path)


def learning_curves_figure(records: list[RunRecord], path: str, metric: str = "entropy_mae",
                           threshold: float = DEFAULT_THRESHOLD) -> str | None:
    """The learning-curve figure of `plot --curves` for the given records (one task) that have
    curves of `metric`; None when none has."""
    group = [r for r in records if r.learning_curve is not None and metric in r.learning_curve.values]
    if not group:
        return None
    return _curve_figure(group[0].task_label, _curve(group[0]).eval or group[0].primary, group,
                         check_metric(metric, metric_table.curve_metrics()), check_threshold(threshold), path)


def _curve_setting(group: list[RunRecord], name: str, seed_counts: list[int], per: str = "architecture") -> str:
    """The learning curves' setting in words: the fixed curve set, the training steps, the seeds
    (`seed_counts`: of each architecture, or each `per`)."""
    curve = _curve(group[0])
    ev = group[0].evals.get(name)
    where = f", scored at {ev.positions}" if ev is not None else ""
    seeds = "/".join(map(str, sorted(set(seed_counts))))
    steps = sorted({r.steps for r in group})
    trained = f"{steps[0]}" if len(steps) == 1 else f"{steps[0]}-{steps[-1]}"
    return (f"{curve.n_sequences} fixed curve sequences{where}; {trained} training steps; {seeds} seeds per "
            f"{per} (line: mean over seeds, band: their range)")


def plot_comparison(a: list[RunRecord], b: list[RunRecord], comparison, path: str) -> str:
    """Two runs' curves of the compared metric (mean over seeds, band over them) and the step from
    which their difference is significant (`report.compare.Comparison`), to the PNG `path`."""
    fig, ax = subplots(figsize=(9.5, 5.4))
    metric = comparison.metric
    for records, name, color in ((a, "A", "C0"), (b, "B", "C1")):
        members = [r for r in records if r.learning_curve is not None]
        steps, mean, lo, hi = _band(members, metric)
        ax.fill_between(steps, lo, hi, color=color, alpha=0.2, lw=0)
        ax.plot(steps, mean, color=color, lw=1.8, marker="o", ms=2.5,
                label=f"{name}: {records[0].arch}, run {records[0].run_id} ({count(len(members), 'seed')})")
    if comparison.significant_from is not None:
        ax.axvline(comparison.significant_from, color="k", ls="--", lw=1,
                   label=f"significant from step {comparison.significant_from} on")
    c = _curve(a[0])
    floor = c.uniform.get(metric, math.nan)
    if math.isfinite(floor):
        ax.axhline(floor, **FLOOR_STYLE, label=f"uniform predictor (floor), {floor:.3f} bits")
    ax.axhline(0.0, **BAYES_STYLE, label="Bayes (exact posterior): 0")
    ax.set_xscale("log")
    ax.set(xlabel="training step (log scale)", ylabel=f"{short(metric)} (bits)")
    unique_legend(ax)
    heading(fig, f"{a[0].task_label}, eval {c.eval}: {short(metric)} of two runs",
            _curve_setting(a + b, c.eval or a[0].primary, [len(a), len(b)], "run"),
            "test: Welch's t over seeds per step, in a fixed sequence from the last step backwards"
            + ("" if comparison.significant_from is not None else "; no step significant"))
    return save(fig, path, grid=True)
