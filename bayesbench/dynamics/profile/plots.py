"""Figures of dynamics studies (matplotlib, Agg backend, PNG).

Generic pieces, shared by every dynamics command:
- `seed_curves(records, name, layer)`: one curve per seed of a stored quantity (heads averaged);
- `band(ax, x, ys, ...)`: the mean over seeds with a shaded interval (95% t-interval over seeds,
  or min-max with interval="range");
- `per_layer_figure(path, panels, ...)`: one panel per layer, each a list of `Curve`s on a left
  and optionally a right axis, labelled reference lines, and a heading saying what was measured.
`plot_profile(study_id, db, out_dir)` draws a profile study's figures with them, each headed by
the study's setting (model, task, steps, seeds, evaluation and probe sequences; `study_setting`).
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ...figures import count, heading, save, subplots, unique_legend
from ..store import Measurement, read_dynamics, read_study


@dataclass
class Curve:
    """Per-seed values ys[seed][k] at x[k], drawn as the seed mean with an interval."""

    label: str
    x: Sequence[float]  # steps (int) or shares of the learning-rate budget
    ys: list[list[float]]
    color: str | None = None
    right: bool = False  # on the panel's right-hand axis
    style: str = "-"
    logy: bool = False


def seed_interval(values: list[float], interval: str = "ci95") -> tuple[float, float, float]:
    """(mean, low, high) over seeds: the 95% t-interval ("ci95", bayesbench.stats.t_interval) or
    min..max ("range"; also with one seed); NaNs dropped."""
    from ...stats import finite, t_interval

    v = finite(values)
    if not v:
        return math.nan, math.nan, math.nan
    if interval == "range" or len(v) < 2:
        return sum(v) / len(v), min(v), max(v)
    if interval != "ci95":
        raise ValueError(f"interval must be 'ci95' or 'range', got {interval!r}")
    d = t_interval(v)
    return d["mean"], d["ci_low"], d["ci_high"]


def band(ax, curve: Curve, interval: str = "ci95") -> None:
    """Draw the mean over seeds and its shaded interval on `ax`."""
    stats = [seed_interval([ys[k] for ys in curve.ys], interval) for k in range(len(curve.x))]
    mean, lo, hi = ([s[i] for s in stats] for i in range(3))
    undefined = "" if any(math.isfinite(m) for m in mean) else "; undefined here, not drawn"
    line, = ax.plot(curve.x, mean, curve.style, color=curve.color, lw=1.6,
                    label=f"{curve.label} (n={len(curve.ys)} seeds{undefined})")
    ax.fill_between(curve.x, lo, hi, color=line.get_color(), alpha=0.2, lw=0)
    if curve.logy:
        ax.set_yscale("log")


def seed_curves(records: list[Measurement], name: str, layer: int, *,
                head: int | None = None) -> tuple[list[int], list[list[float]]]:
    """(steps, ys[seed][step]) of quantity `name` at `layer`; heads averaged unless `head` is
    given (records with head -1, the per-layer values, are used when there are no per-head ones)."""
    cells: dict[tuple[int, int], list[float]] = defaultdict(list)
    rows = [r for r in records if r.name == name and r.layer == layer]
    if head is not None:
        rows = [r for r in rows if r.head == head]
    elif any(r.head >= 0 for r in rows):
        rows = [r for r in rows if r.head >= 0]
    for r in rows:
        cells[(r.seed, r.step)].append(r.value)
    seeds = sorted({s for s, _ in cells})
    steps = sorted({t for _, t in cells})
    ys = [[_nanmean(cells.get((s, t), [])) for t in steps] for s in seeds]
    return steps, ys


def _nanmean(v: list[float]) -> float:
    v = [x for x in v if x is not None and math.isfinite(x)]
    return sum(v) / len(v) if v else math.nan


INTERVAL_WORDS = {"ci95": "95% t-interval over seeds", "range": "range over seeds"}


def per_layer_figure(path: str, panels: dict[int, list[Curve]], *, title: str, xlabel: str, ylabel: str,
                     ylabel_right: str | None = None, marks: dict[int, list[tuple[float, str]]] | None = None,
                     interval: str = "ci95", setting: str = "", refs: Sequence[tuple[float, str]] = ()) -> str:
    """One panel per layer (sorted), curves with seed intervals, optional vertical marks
    (x, label) per layer and horizontal reference lines (y, label) on every panel, all in one
    legend under the panels; `setting` (what was measured) under the title. Writes the PNG and
    returns its path."""
    layers = sorted(panels)
    fig, axes = subplots(1, len(layers), figsize=(4.8 * len(layers) + 0.6, 4.6), squeeze=False)
    styles = (":", "-.", "--")
    for ax, layer in zip(axes[0], layers):
        right = None
        for curve in panels[layer]:
            target = ax
            if curve.right:
                right = right or ax.twinx()
                target = right
            band(target, curve, interval)
        for (y, label), style in zip(refs, styles):
            ax.axhline(y, color="0.3", ls=style, lw=1, label=label)
        for x, label in (marks or {}).get(layer, []):
            ax.axvline(x, color="k", ls=":", lw=1, label=label)
        ax.set(xlabel=xlabel, ylabel=ylabel, title=f"layer {layer}")
        ax.grid(alpha=0.3)
        if right is not None:
            right.set_ylabel(ylabel_right or "")
    unique_legend(fig, where="outside lower center")
    heading(fig, title, setting, f"line: mean over seeds, band: {INTERVAL_WORDS.get(interval, interval)}")
    return save(fig, path, dpi=110)


def study_setting(study_id: str, db: str | None) -> str:
    """A profile study's setting in words, from its stored configuration ('' if it has none)."""
    study = read_study(study_id, db)
    c = (study or {}).get("config") or {}
    if not c:
        return ""
    task = dict(c.get("task_config") or {})
    name = task.pop("task", "task")
    words = f"{name}({', '.join(f'{k}={v}' for k, v in task.items())})"
    end = (c.get("train") or {}).get("steps")
    start = c.get("from_step")
    steps = f"steps {start}..{end}" if start else f"{end} training steps"
    seeds = c.get("seeds") or []
    return (f"{c.get('arch')} on {words}, {steps}, {count(len(seeds), 'seed')} {seeds}; "
            f"{c.get('eval_sequences')} evaluation sequences, {c.get('probe_sequences')} probe sequences")


PROBE_LABELS = {
    "attn_entropy": ("attention entropy (bits)", False),
    "adv_abs_mean": ("mean |A_ij|", True),
    "adv_abs_max": ("max |A_ij|", True),
    "ds_norm": ("||dL/ds||_F", True),
    "value_update_mean": ("mean_j ||dL/dv_j||", True),
}


def plot_profile(study_id: str, db: str | None = None, out_dir: str = ".", summary: dict | None = None) -> list[str]:
    """The figures of a profile study: probe quantities, routing law, frame vs precision."""
    records = read_dynamics(study_id, path=db)
    if not records:
        raise ValueError(f"study {study_id!r} has no stored dynamics (unknown study id, or another store?)")
    layers = sorted({r.layer for r in records if r.layer >= 0})
    setting = study_setting(study_id, db)
    paths = []
    for name, (label, logy) in PROBE_LABELS.items():
        panels = {}
        for layer in layers:
            x, ys = seed_curves(records, name, layer)
            if x:
                panels[layer] = [Curve(f"{label}, mean over heads", x, ys, color="C0", logy=logy)]
        if panels:
            paths.append(per_layer_figure(os.path.join(out_dir, f"{study_id}_{name}.png"), panels,
                                          title=f"{label} over training, at the probed steps",
                                          xlabel="training step", ylabel=label, setting=setting))
    paths += _law_figure(study_id, records, layers, out_dir, setting)
    paths += _frame_figures(study_id, records, layers, out_dir, summary, setting)
    return paths


LAW_CURVES = (("law_cosine", "cos(Delta s_c, alpha A)"), ("law_sign_alpha", "sign agreement (alpha)"),
              ("law_query_test", "queries with sum A dalpha > 0"), ("law_own_cosine", "own W_Q/W_K part: cosine"),
              ("value_cosine", "value law: cos(Delta v, -dL/dv)"))


def _law_figure(study_id: str, records: list[Measurement], layers: list[int], out_dir: str,
                setting: str = "") -> list[str]:
    """Excess of each law statistic over its shuffle null, per checked step (0: chance)."""
    null = {(r.seed, r.step, r.layer, r.head, r.name[:-5]): r.value for r in records if r.name.endswith("_null")}
    wanted = {n for n, _ in LAW_CURVES}
    excess = [Measurement(r.seed, r.step, r.layer, r.head, r.name + "_excess",
                             r.value - null.get((r.seed, r.step, r.layer, r.head, r.name), math.nan))
              for r in records if r.name in wanted]
    panels = {}
    for layer in layers:
        curves = [Curve(label, *seed_curves(excess, name + "_excess", layer), color=f"C{i}")
                  for i, (name, label) in enumerate(LAW_CURVES)]
        curves = [c for c in curves if c.x]
        if curves:
            panels[layer] = curves
    if not panels:
        return []
    return [per_layer_figure(os.path.join(out_dir, f"{study_id}_routing_law.png"), panels,
                             title="routing and value laws after each checked step: excess over the shuffle null",
                             xlabel="training step", ylabel="statistic - shuffle null", setting=setting,
                             refs=[(0.0, "0: chance (the shuffle null)")])]


def _frame_figures(study_id: str, records: list[Measurement], layers: list[int], out_dir: str,
                   summary: dict | None, setting: str = "") -> list[str]:
    """Frame and precision progress against the jitter floor on steps and on the learning-rate
    budget; map velocity; the maps' movement over each interval against the replicas' jitter."""
    frames = (summary or {}).get("frames", {})
    if not frames:
        return []
    paths = []
    for axis in ("steps", "budget"):
        panels = {}
        for layer in layers:
            f = frames.get(layer) or frames.get(str(layer)) or {}
            xs = f.get("budget") if axis == "budget" else f.get("steps")
            if not xs or not f.get("frame_progress"):
                continue
            prec = f["precision_progress"]
            panels[layer] = [
                Curve("frame: toward the late map, to the jitter floor", xs, list(f["frame_progress"].values()),
                      color="C0"),
                Curve("precision (entropy MAE): toward its late mean, to the floor", xs,
                      list(prec["entropy_mae"].values()), color="C3", style="--"),
                Curve("precision (KL)", xs, list(prec["kl"].values()), color="C1", style=":")]
        if panels:
            label = "training steps done" if axis == "steps" else "share of the learning-rate budget sum(lr) spent"
            paths.append(per_layer_figure(os.path.join(out_dir, f"{study_id}_frame_precision_{axis}.png"), panels,
                                          title=f"frame vs precision progress against {axis}", xlabel=label,
                                          ylabel="progress (1: within the jitter floor)",
                                          setting=setting, refs=[(0.9, "0.9: where t90 is read"), (1.0, "1: floor")]))
    panels = {}
    for layer in layers:
        x, ys = seed_curves(records, "map_velocity", layer, head=-1)
        if x:
            panels[layer] = [Curve("map velocity: TV(alpha_c-1, alpha_c) per step", x, ys, color="C0", logy=True)]
    if panels:
        paths.append(per_layer_figure(os.path.join(out_dir, f"{study_id}_map_velocity.png"), panels,
                                      title="how fast the attention maps move", xlabel="training steps done",
                                      ylabel="TV distance per step", setting=setting))
    panels = {}
    for layer in layers:
        f = frames.get(layer) or frames.get(str(layer)) or {}
        ratios = [v["movement_ratio"] for v in (f.get("per_seed") or {}).values()]
        if ratios and any(math.isfinite(r) for rs in ratios for r in rs):
            panels[layer] = [Curve("squared distance moved over the interval / the replicas' jitter", f["steps"][1:],
                                   ratios, color="C2", logy=True)]
    if panels:
        paths.append(per_layer_figure(os.path.join(out_dir, f"{study_id}_movement_vs_jitter.png"), panels,
                                      title="do the maps move more than chance? movement over each checkpoint "
                                            "interval against the jitter of replicas of that interval",
                                      xlabel="training steps done (interval end)", ylabel="movement / jitter",
                                      setting=setting, refs=[(1.0, "1: no more than chance")]))
    return paths
