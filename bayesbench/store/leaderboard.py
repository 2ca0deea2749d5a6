"""Leaderboards: queries over the results store, as Markdown, CSV or JSON.

Every number says what it is (docs/science.md#metrics), all in bits over the task's fixed
evaluation set, on the positions named in the table's notes:
- entropy_mae: mean over (sequence, scored position) of |H(model) - H(Bayes)|;
- entropy_mae_positional: mean over scored positions of |mean H(model) - mean H(Bayes)|, the
  means over sequences (the authors' bijection metric, Paper I Table 1);
- kl: mean KL(Bayes || model) (the authors' HMM metric).
The table ranks by one of them (`metric`) and names it in its header. Below each task and
evaluation, two computed floors: the uniform predictor and the best context-ignoring one
(`bayesbench.scoring.floors`). By default a row pools every stored seed of one (task, arch,
configuration) across runs (the newest record of a seed run twice), with the number of seeds
shown; `latest=True` keeps only the newest run of each (task, arch), `per_run=True` gives one
row per run. Input everywhere: the stored `RunRecord`s (`select_rows`). `headline` states the
science the leaderboard exists to show.

Beside the final numbers, what the learning curves say (`curve_stats`; on the evaluation the
curves measure, the primary one): the steps (and sequences) to reach a threshold on the curve
metric (default 0.1 bits) over seeds, how many seeds reached it, whether the curve is still
improving at its end, and with `metric="auc"` the ranking by the area under the curve against
log(step) (its mean over log step on the rows' common step range).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math

from .. import versions
from ..identity import identity_key
from .curve_stats import Reach, common_range, log_auc, reach, reached_from, still_improving, trained_part
from .database import read_records, row_identity
from .records import EvalResult, RunRecord, json_safe
from .tuning import is_selection, tuned_label, tuning_marks, tuning_of

FORMATS = ("md", "csv", "json")
METRICS = {
    "entropy_mae": "entropy MAE per (sequence, position): mean |H(model) - H(Bayes)|",
    "entropy_mae_positional": "entropy MAE of per-position means: mean over positions of "
                              "|mean H(model) - mean H(Bayes)| (the authors' bijection metric, Paper I Table 1)",
    "kl": "KL(Bayes || model), mean over (sequence, position) (the authors' HMM metric)",
}
# Learning-curve metrics beyond the three final ones: the bijection's KL by case (training/curves.py).
CURVE_ONLY = {
    "kl:repeated": "KL(Bayes || model) at the bijection's repeated keys, where the posterior is a point mass "
                   "(a retrieval)",
    "kl:new": "KL(Bayes || model) at the bijection's new keys, where it is uniform over the values not yet seen "
              "(an elimination)",
}
CURVE_METRIC_NAMES = (*METRICS, *CURVE_ONLY)
SHORT = {"entropy_mae": "entropy MAE", "entropy_mae_positional": "positional entropy MAE", "kl": "KL",
         "kl:repeated": "KL at repeated keys", "kl:new": "KL at new keys"}
AUC = "auc"  # rank by the area under the learning curve of the curve metric, against log(step)
RANKINGS = (*METRICS, AUC)
DEFAULT_THRESHOLD = 0.1  # bits: the leaderboard's "steps to threshold"


def check_metric(metric: str, allowed: tuple[str, ...] = RANKINGS) -> str:
    if metric not in allowed:
        raise ValueError(f"metric must be one of {allowed}, got {metric!r}")
    return metric


def check_threshold(threshold: float) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not (
            threshold > 0 and math.isfinite(threshold)):
        raise ValueError(f"threshold must be a positive number of bits, got {threshold!r}")
    return float(threshold)


def curve_metric_for(metric: str, curve_metric: str | None) -> str:
    """The metric the curve columns read: `curve_metric`, else the ranking metric (entropy MAE
    when ranking by AUC)."""
    if curve_metric is not None:
        return check_metric(curve_metric, CURVE_METRIC_NAMES)
    return metric if metric in METRICS else "entropy_mae"


def _ev_mean(ev: EvalResult, metric: str) -> float:
    """One evaluation's mean of `metric` (NaN when the run predates that metric)."""
    s = getattr(ev, metric)
    return math.nan if s is None else s.mean


def select_rows(db: str | None = None, *, task: str | None = None, arch: str | None = None,
                group_id: str | None = None, run_ids: list[str] | None = None,
                latest: bool = False, selection: bool = False) -> list[RunRecord]:
    """Stored records, filtered (`run_ids`: those runs, e.g. a command's jobs); with `latest`,
    only the newest run of each (task_label, arch). A tuning's selection rows (`is_selection`) are
    left out unless `selection`: they were scored for choosing, never for reporting."""
    where, params = [], []
    if run_ids is not None:
        where.append(f"run_id IN ({', '.join('?' * len(run_ids))})" if run_ids else "0")
        params += list(run_ids)
    if task:
        where.append("(task = ? OR task_label = ?)")
        params += [task, task]
    if arch:
        where.append("arch = ?")
        params.append(arch)
    if group_id:
        where.append("group_id = ?")
        params.append(group_id)
    records = read_records(db, where=" AND ".join(where), params=tuple(params))
    records = [r for r in records if is_selection(r) == selection]
    return latest_runs(records) if latest else records


def latest_runs(records: list[RunRecord]) -> list[RunRecord]:
    """Only the newest run of each (task_label, arch) among `records` (oldest first, as stored)."""
    newest: dict[tuple[str, str], str] = {}
    for r in records:  # oldest first, so the last run seen wins
        newest[(r.task_label, r.arch)] = r.run_id
    return [r for r in records if newest[(r.task_label, r.arch)] == r.run_id]


def _num(x: float | None) -> float | None:
    """A number for JSON: non-finite (a diverged member's scores) as null."""
    return x if x is not None and math.isfinite(x) else None


def _json_eval(ev: EvalResult) -> dict:
    """An evaluation's means in bits (one `<metric>_bits` key per metric) with their 95% intervals
    over sequences (`<metric>_ci`), its scored positions and the set: its size and id."""
    out = {f"{name}_bits": _num(s.mean) for name, s in ev.metrics().items()}
    out.update({f"{name}_ci": [_num(s.ci_low), _num(s.ci_high)] for name, s in ev.metrics().items()})
    out["positions"] = ev.positions
    out.update({"n_sequences": ev.entropy_mae.n_sequences, "n_positions": ev.entropy_mae.n_positions,
                "set_id": ev.set_id, "task": ev.task})
    if ev.floors is not None:
        out["floors"] = {name: {f"{m}_bits": _num(s.mean) for m, s in scores.items()}
                         for name, scores in ev.floors.items()}
    return out


def _member_curve(r: RunRecord, metric: str, threshold: float) -> dict:
    """A member's curve facts: its stop, steps to `threshold` on `metric`, still improving."""
    c = r.learning_curve
    if c is None or metric not in c.values:
        return {"curve_metric": metric, "threshold_bits": threshold, "steps_to_threshold": None,
                "still_improving": None}
    steps, values = trained_part(c, metric, r.stop_step)
    return {"curve_metric": metric, "threshold_bits": threshold,
            "steps_to_threshold": reached_from(steps, values, threshold),
            "still_improving": still_improving(steps, values)}


def member_aucs(records: list[RunRecord], curve_metric: str) -> dict[tuple[str, int], dict]:
    """(run_id, seed) -> {"auc_bits", "auc_metric", "auc_steps"}: each member's area under its
    learning curve of `curve_metric` against log(step), over the common step range of every
    curve of its task and evaluation set (as `--metric auc` ranks them; None without a curve)."""
    out = {}
    for g in _aggregate(records, AUC, per_run=True, curve_metric=curve_metric):
        span = g.get("auc_range")
        for rec, value in zip(g["records"], g["values"][AUC]):
            if rec.learning_curve is not None and rec.learning_curve.eval == g["eval"]:
                out[(rec.run_id, rec.seed)] = {"auc_bits": _num(value), "auc_metric": curve_metric,
                                               "auc_steps": list(span) if span else None}
    return out


def json_runs(records: list[RunRecord], *, threshold: float = DEFAULT_THRESHOLD,
              curve_metric: str = "entropy_mae", metric: str = "entropy_mae") -> dict:
    """{"runs": [...]}: one flat record per (run, seed), for --json; with its learning curve, why
    and when it stopped, and the steps to `threshold` bits of `curve_metric`; the settings that
    define its leaderboard row (`settings`: `row_settings`, what must match for seeds to pool),
    the code that made it, and per evaluation its set (`n_sequences`, `set_id`) and every
    metric's 95% interval over sequences: what `bayesbench export` carries, so a consumer keeps
    sets and settings apart. `metric` "auc" adds each member's AUC (`member_aucs`) and says so in
    "metric"."""
    aucs = member_aucs(records, curve_metric) if metric == AUC else None
    runs = []
    for r in records:
        head = r.headline
        if aucs is not None:
            runs.append(aucs.get((r.run_id, r.seed), {"auc_bits": None, "auc_metric": curve_metric,
                                                      "auc_steps": None}))
        else:
            runs.append({})
        runs[-1].update({
            "run_id": r.run_id, "seed": r.seed, "task": r.task, "task_label": r.task_label,
            "arch": r.arch, "params": r.params, "steps": r.steps, "final_loss": _num(r.final_loss),
            "entropy_mae_bits": _num(head.entropy_mae.mean),
            "entropy_mae_ci": [_num(head.entropy_mae.ci_low), _num(head.entropy_mae.ci_high)],
            "kl_bits": _num(head.kl.mean), "kl_ci": [_num(head.kl.ci_low), _num(head.kl.ci_high)],
            "wall_s": r.wall_s, "steps_per_s": r.steps_per_s, "status": r.status,
            "entropy_mae_positional_bits": _num(r.entropy_mae_positional_bits),
            "preset": r.preset, "group_id": r.group_id, "eval": r.primary,
            "evals": {name: _json_eval(ev) for name, ev in r.evals.items()},
            "permutation": json_safe(r.permutation.to_json()) if r.permutation is not None else None,
            "created_at": r.created_at, "stop_step": r.stop_step, "stop_reason": r.stop_reason,
            "member": r.member, "eval_sequences": r.headline.entropy_mae.n_sequences,
            "settings": json_safe(row_settings(r)), "device": (r.environment or {}).get("device"),
            "flops": (r.config or {}).get("flops"), "tuning": json_safe(tuning_of(r)),
            "code": json_safe(r.code),
            **_member_curve(r, curve_metric, threshold),
            "learning_curve": None if r.learning_curve is None else json_safe(dataclasses.asdict(r.learning_curve)),
        })
    if aucs is None:
        return {"runs": runs}
    return {"metric": f"auc: AUC of {curve_metric} over log step (each run's auc_bits, over its auc_steps)",
            "runs": runs}


def row_settings(record: RunRecord) -> dict:
    """The settings that define a leaderboard row, what must match for two runs' seeds to be
    pooled in one row (`config_key`): the row's identity without its seeds (`bayesbench.identity`:
    task and label, evaluation, architecture and model options, training, device type, torch
    threads and code; `config["identity"]`, or from its fields for a row stored without one,
    `database.row_identity`), and its tuning when a search chose its hyperparameters
    (`config["tuning"]`: a tuned row is never pooled with an untuned one)."""
    config = record.config or {}
    identity = config.get("identity") or row_identity(
        {"task_config": record.task_config, "task_label": record.task_label, "arch": record.arch, "config": config,
         "environment": record.environment})
    return {**identity, **({"tuning": config["tuning"]} if config.get("tuning") is not None else {})}


def config_key(record: RunRecord) -> str:
    """`row_settings` hashed (`identity.identity_key`; an untuned row's is its `config["identity_key"]`):
    runs with the same key pool their seeds in one row."""
    return identity_key(row_settings(record))


def _aggregate(records: list[RunRecord], metric: str = "entropy_mae", per_run: bool = False,
               curve_metric: str = "entropy_mae", threshold: float = DEFAULT_THRESHOLD) -> list[dict]:
    """One entry per (task_label, eval, arch, configuration) pooling the seeds of every run (a
    seed stored twice counts once, its newest record), or per (..., run) with `per_run`, with
    per-seed values of every metric and of the learning curve's statistics of `curve_metric`
    (`_curve_stats`); ordered by task, eval and the mean of `metric` (one of RANKINGS)."""
    groups: dict[tuple, dict] = {}
    for r in records:  # oldest first: a newer record of the same seed replaces the older one
        for name, ev in r.evals.items():
            n_seq = ev.entropy_mae.n_sequences  # rows are comparable only on the same evaluation set
            key = (r.task_label, name, n_seq, r.arch, r.run_id if per_run else config_key(r))
            g = groups.setdefault(key, {"task": tuned_label(r), "eval": name, "arch": r.arch, "set_code": set_code(r),
                                        "tuning": tuning_of(r), "flops": (r.config or {}).get("flops"),
                                        "params": r.params, "steps": r.steps, "runs": {}, "by_seed": {},
                                        "positions": ev.positions, "floors": ev.floors,
                                        "n_sequences": ev.entropy_mae.n_sequences,
                                        "primary": name == r.primary})
            g["runs"][r.run_id] = r.wall_s
            g["by_seed"][r.seed] = ({m: _ev_mean(ev, m) for m in METRICS}, r.status, r)
            g["floors"] = g["floors"] or ev.floors
    for g in groups.values():
        seeds = sorted(g.pop("by_seed").items())
        g["seeds"] = [s for s, _ in seeds]
        g["status"] = [st for _, (_, st, _) in seeds]
        g["records"] = [rec for _, (_, _, rec) in seeds]
        # a diverged member's numbers are never a result: NaN in every statistic, named in the table
        g["values"] = {m: [math.nan if rec.diverged else v[m] for _, (v, _, rec) in seeds] for m in METRICS}
        g["diverged"] = [rec.diverged_at if rec.diverged else None for rec in g["records"]]
        walls = [w for w in g["runs"].values() if w is not None]
        g["wall_s"] = sum(walls) / len(walls) if walls else float("nan")
        g["n_runs"] = len(g.pop("runs"))
    _curve_stats(list(groups.values()), curve_metric, threshold)
    out = sorted(groups.values(), key=lambda g: (g["task"], _eval_order(g["eval"]), -g["n_sequences"],
                                                 g["set_code"], _sort_key(_mean(g["values"][metric]))))
    for g in out:
        g["means"] = {m: _mean(v) for m, v in g["values"].items()}
        g["ci"] = seed_interval(g["values"][metric])
    return out


def aggregate(records: list[RunRecord], metric: str = "entropy_mae", per_run: bool = False,
              curve_metric: str = "entropy_mae", threshold: float = DEFAULT_THRESHOLD) -> list[dict]:
    """The leaderboard's rows, as every rendering of it reads them (Markdown here, the web site of
    `report/site.py`): one dict per (task, eval, arch, configuration) pooling its seeds, with
    per-seed values of every metric, their means, the interval over seeds of `metric`, the
    floors of its set and the learning-curve statistics (`_aggregate`)."""
    return _aggregate(records, check_metric(metric), per_run, curve_metric, check_threshold(threshold))


def block_key(g: dict) -> tuple:
    """The rows that may be ranked together: one task, one evaluation, one evaluation set (the
    same sequences: the set is fixed by the task, its code and its size) and one definition of
    the metrics (their versions)."""
    return (g["task"], g["eval"], g["n_sequences"], g["set_code"])


def set_code(record: RunRecord) -> str:
    """What of a row's code decides which numbers it can be ranked against: the tunnel's (its
    sequences and posteriors) and the metrics' (their definitions), as far as keys name them
    (`versions.keyed`): '' for first-version built-ins."""
    code = versions.keyed({part: record.code.get(part) for part in ("task", "metrics") if part in record.code})
    return json.dumps(code, sort_keys=True) if code else ""


def _set_marks(agg: list[dict]) -> dict[tuple, str]:
    """block_key -> what tells its set apart from the other sets of the same task and evaluation
    in the table (', 512 seq', ', tunnel contents 1a2b..'), '' where a task and evaluation has one set."""
    by_eval: dict[tuple, set] = {}
    for g in agg:
        by_eval.setdefault((g["task"], g["eval"]), set()).add(block_key(g))
    marks = {}
    for keys in by_eval.values():
        sizes = {k[2] for k in keys}
        codes = {k[3] for k in keys}
        for k in keys:
            parts = [f"{k[2]} seq"] if len(sizes) > 1 else []
            if len(codes) > 1:
                code = json.loads(k[3]) if k[3] else {}
                parts += [f"{versions.WHAT[p]} {versions.short(code[p])}" for p in sorted(code)] or ["first versions"]
            marks[k] = "".join(f", {p}" for p in parts)
    return marks


AT_FLOOR = 0.01  # a row whose mean is within 1% of the uniform floor, or above it, is marked "at floor"


def at_floor(g: dict, metric: str) -> bool:
    """Whether the row's mean of `metric` is within AT_FLOOR of the uniform floor or above it."""
    floor = ((g.get("floors") or {}).get("uniform") or {}).get(metric)
    mean = g["means"].get(metric, math.nan)
    return floor is not None and math.isfinite(mean) and mean >= floor.mean * (1 - AT_FLOOR)


def _curve_stats(groups: list[dict], metric: str, threshold: float) -> None:
    """Per group, from its seeds' learning curves on the group's evaluation (None where a seed has
    none): "reach" (`curve_stats.Reach` of `threshold`, or None), "improving" (per seed), and
    values["auc"] (per seed, over the common step range of every curve of the task and eval)."""
    for g in groups:
        curves = [r.learning_curve if r.learning_curve is not None and r.learning_curve.eval == g["eval"]
                  and metric in r.learning_curve.values else None for r in g["records"]]
        g["curves"] = curves
        stops = [r.stop_step for r in g["records"]]
        batch = next((c.sequences[0] // c.step[0] for c in curves if c is not None and c.step), None)
        g["reach"] = reach(curves, metric, threshold, stops, batch)
        g["improving"] = [None if c is None else still_improving(*trained_part(c, metric, stop))
                          for c, stop in zip(curves, stops)]
    blocks: dict[tuple, list[dict]] = {}
    for g in groups:
        blocks.setdefault(block_key(g), []).append(g)
    for block in blocks.values():
        full = [(c.step, c.metric(metric)) for g in block for c in g["curves"] if c is not None]
        span = common_range(full)
        for g in block:
            g["auc_range"] = span
            g["values"][AUC] = [math.nan if c is None or span is None else log_auc(c.step, c.metric(metric), *span)
                                for c in g["curves"]]


def _reach_cell(r: Reach | None) -> str:
    """Steps to the threshold over seeds, how many reached it, and the sequences it took."""
    if r is None:
        return "-"
    seq = lambda steps: f"; {steps * r.batch_size:,.0f} seq" if r.batch_size else ""  # noqa: E731
    geo = r.geometric()
    if geo is not None and len(set(r.per_seed)) == 1 and r.n > 1:  # no spread to show at this resolution
        return f"{geo[0]:,.0f}, every seed at that measured step ({r.reached}/{r.n}{seq(geo[0])})"
    if geo is not None:
        ci = f" [{geo[1]:,.0f}, {geo[2]:,.0f}]" if math.isfinite(geo[1]) else ""
        return f"{geo[0]:,.0f}{ci} ({r.reached}/{r.n}{seq(geo[0])})"
    med = r.median()
    if r.reached == 0:
        return f"not reached (0/{r.n} by {max(r.budgets):,})"
    if med is None:
        return f"not reached by the median seed ({r.reached}/{r.n} reached)"
    return f"median {med:,.0f} ({r.reached}/{r.n} reached{seq(med)})"


def _improving_cell(flags: list[bool | None]) -> str:
    if not flags or any(f is None for f in flags):
        return "-" if not flags or all(f is None for f in flags) else "n/a"
    return f"{sum(flags)}/{len(flags)}"


def _sort_key(x: float) -> float:
    return x if math.isfinite(x) else math.inf


def seed_interval(values: list, level: float = 0.95) -> tuple[float, float]:
    """t-interval of the mean over seeds (NaN with fewer than two finite values)."""
    vals = [x for x in values if x is not None and math.isfinite(x)]
    if len(vals) < 2:
        return (float("nan"), float("nan"))
    from scipy.special import stdtrit  # the t quantile (scipy.stats.t.ppf calls it; a third of the import time)

    n, mean = len(vals), sum(vals) / len(vals)
    sd = math.sqrt(sum((x - mean) ** 2 for x in vals) / (n - 1))
    half = float(stdtrit(n - 1, 0.5 + level / 2)) * sd / math.sqrt(n)
    return (mean - half, mean + half)


def eval_length(name: str) -> int | None:
    """K of a length-generalisation evaluation name ("K=30" -> 30, as evaluate names them), else None."""
    return int(name[2:]) if name.startswith("K=") and name[2:].isdigit() else None


def _eval_order(name: str):
    """HMM evaluations by length (K=20 before K=30), others by name (values before values+query):
    every (task, eval) is one contiguous block of the table, followed by its floor rows."""
    k = eval_length(name)
    return (0, k, "") if k is not None else (1, 0, name)


def _mean(xs: list) -> float:
    vals = [x for x in xs if x is not None and math.isfinite(x)]
    return sum(vals) / len(vals) if vals else float("nan")


def _fmt(x) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    if x == 0:  # an interval clipped at 0: "0", not "0.00e+00" beside four-decimal numbers
        return "0"
    return f"{x:.4f}" if abs(x) >= 1e-3 else f"{x:.2e}"


def _signed(x) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:+.2e}"


def _wall(x) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.0f}"


def _seeds(g: dict) -> str:
    runs = f" in {g['n_runs']} runs" if g["n_runs"] > 1 else ""
    return f"{len(g['seeds'])}{runs}: {','.join(map(str, g['seeds']))}"


def _count(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k"


def _ranked(metric: str, curve_metric: str) -> str:
    """How the ranked column is named."""
    return SHORT[metric] if metric != AUC else f"AUC of {SHORT[curve_metric]} over log step"


def markdown(records: list[RunRecord], metric: str = "entropy_mae", per_run: bool = False, *,
             threshold: float = DEFAULT_THRESHOLD, curve_metric: str | None = None) -> str:
    """The leaderboard table ranked by `metric` (or by the learning curve's AUC), with the curve
    columns (steps to `threshold` bits of `curve_metric`, still improving), floor rows per task
    and evaluation, and notes saying what every number is."""
    check_metric(metric)
    threshold = check_threshold(threshold)
    cm = curve_metric_for(metric, curve_metric)
    if not records:
        return "(no results in the store yet: run `bayesbench run --preset quick`)"
    agg = _aggregate(records, metric, per_run, cm, threshold)
    others = [m for m in METRICS if m != metric]
    differ = differing_settings(agg)  # rows of one arch and evaluation set trained differently: say how
    flops = any(g.get("flops") for g in agg)  # rows trained with a FLOPs count: two columns for it
    lines = [f"| task | eval | arch |{' settings |' if differ else ''} params | steps |{FLOPS_HEADER if flops else ''}"
             f" wall (s) | seeds | "
             f"**{_ranked(metric, cm)}** (bits), mean [95% CI over seeds] | per seed | "
             + " | ".join(f"{SHORT[m]} (bits), mean" for m in others)
             + f" | steps to {SHORT[cm]} <= {threshold:g} bits [95% CI] (seeds reached) | still improving | x best |",
             "|---|---|---|" + ("---|" if differ else "") + ("---|---|" if flops else "") + "---|---|---|---|---|---|"
             + "---|" * len(others)
             + "---|---|---|"]
    best: dict[tuple, float] = {}
    for g in agg:
        v = g["means"][metric]
        best[block_key(g)] = min(best.get(block_key(g), math.inf), v if math.isfinite(v) else math.inf)
    marks = _set_marks(agg)
    for i, g in enumerate(agg):
        key = block_key(g)
        ratio = g["means"][metric] / best[key] if 0 < best[key] < math.inf else float("nan")
        lo, hi = g["ci"]
        ci = f" [{_fmt(max(lo, 0.0))}, {_fmt(hi)}]" if math.isfinite(lo) else ""
        size = marks[key]
        mean = _fmt(g["means"][metric]) + ci if math.isfinite(g["means"][metric]) else "diverged (every seed)"
        settings = f" {differ.get(id(g), '-')} |" if differ else ""
        lines.append(f"| {g['task']} | {g['eval']}{'' if not g['primary'] else ' (trained)'}{size} | "
                     f"{g['arch']}{_row_marks(g, metric)} |{settings} {_count(g['params'])} | {g['steps']} | "
                     + (flops_cells(g) if flops else "")
                     + f"{_wall(g['wall_s'])} | {_seeds(g)} | {mean} | {_per_seed(g, metric)} | "
                     + " | ".join(_fmt(g["means"][m]) for m in others)
                     + f" | {_reach_cell(g['reach'])} | {_improving_cell(g['improving'])} | "
                     + (f"{ratio:.1f}x |" if math.isfinite(ratio) else "- |"))
        if i + 1 == len(agg) or block_key(agg[i + 1]) != key:
            lines += _floor_lines(agg, key, metric, others, settings=bool(differ), flops=flops)
    ranked = METRICS[metric] if metric != AUC else (
        f"the area under the learning curve of {SHORT[cm]} against log(step), divided by the log-step range: the "
        "curve's mean over log(step), on the step range every row of the task and eval covers")
    notes = ["", f"Ranked by **{_ranked(metric, cm)}** = {ranked}. Every metric in bits (log base 2) over the "
             "task's fixed evaluation set (docs/science.md#metrics):"]
    notes += [f"- {SHORT[m]} = {METRICS[m]}" for m in METRICS]
    notes += ["- 'per seed' lists each ensemble member in seed order; the interval is a t-interval of the mean over "
              "seeds (clipped at 0); 'x best' = mean / best mean on that task and eval (floors excluded); wall = "
              "training wall time of the whole ensemble (all seeds at once; the mean over runs when a row pools "
              "several); "
              "'seeds' = how many seeds the row pools (every stored run of the same task, arch and configuration; a "
              "seed run twice counts once, its newest run), then which.",
              *_curve_notes(agg, cm, threshold),
              *([FLOPS_NOTE] if flops else []),
              "- rows are ranked only against rows scored on the same evaluation set (task, evaluation, number of "
              "sequences and the tunnel's code: the set is fixed by these) with the same metric definitions; a table "
              "holding several of one evaluation says what sets each apart ('512 seq'; 'tunnel contents 1a2b..', an "
              "edited tunnel file; 'metric definitions entropy_mae=v2', a changed metric) and gives each its own "
              "floors and 'x best'; rows made by different code (file contents, versions: docs/results.md) are never "
              "pooled, and the settings column names it ('model_code=...') where that is all they differ by",
              f"- '(at floor)': the row's mean is within {AT_FLOOR:.0%} of the uniform floor of its set, or above it; "
              "'(k of n diverged, at step s)': those members' numbers are not results (shown as 'diverged@s' and "
              "left out of the mean and its interval)",
              "- floor rows (computed, not trained, on the same sequences): uniform = 1/C for every class; marginal = "
              "the best predictor that ignores the context (the mean posterior at each position, estimated from an "
              "independent sample). A model at a floor has learned nothing usable from the context.",
              "- scored positions:"]
    seen = set()
    for g in agg:
        if (g["task"], g["eval"]) not in seen:
            seen.add((g["task"], g["eval"]))
            notes.append(f"  - {g['task']} {g['eval']}: {g['positions']}; {g['n_sequences']} sequences")
    perm = [r for r in records if r.permutation is not None]
    if perm:
        notes.append("- HMM label-permutation check (docs/science.md#hmm-state-tracking; same sequences, hidden states "
                     "relabelled, posterior recomputed): entropy MAE vs permuted entropy MAE, difference with 95% CI:")
        for r in perm:
            p = r.permutation
            d = p.difference
            notes.append(f"  - {r.task_label} {p.eval} {r.arch} seed {r.seed}: {_fmt(p.entropy_mae)} vs "
                         f"{_fmt(p.entropy_mae_permuted)}, difference {_signed(d.mean)} "
                         f"[{_signed(d.ci_low)}, {_signed(d.ci_high)}]")
    for r in records:
        if r.status != "ok":
            notes.append(f"- {r.task_label} {r.arch} seed {r.seed}: {r.status}")
    return "\n".join(lines + notes)


def _settings(record: RunRecord) -> dict:
    """A row's training, model and task settings, flattened ('lr', 'd_model', 'L', ...)."""
    cfg = record.config or {}
    out = {}
    for part in (record.task_config or {}, cfg.get("model_args") or {}, cfg.get("train") or {}):
        out.update({k: v for k, v in part.items() if k != "task" and not isinstance(v, (dict, list))})
    out["threads"] = (record.environment or {}).get("threads")
    keyed = versions.keyed(record.code)  # 'model_code=1a2b3c4d5e6f7a8b': rows that differ only by their code
    for part in versions.WHAT:
        out[f"{part}_code"] = versions.short(keyed[part]) if part in keyed else f"v{versions.FIRST}"
    return out


SCORED_SETTINGS = "scored from given weights (not trained here)"


def differing_settings(agg: list[dict]) -> dict[int, str]:
    """id(row) -> 'lr=0.0005 batch_size=64': the settings in which rows of one architecture and
    evaluation set differ from each other (rows it does not concern are left out; empty when no
    two rows of one arch share a set)."""
    by_arch: dict[tuple, list[dict]] = {}
    for g in agg:
        by_arch.setdefault((*block_key(g), g["arch"]), []).append(g)
    out = {}
    for rows in by_arch.values():
        if len(rows) < 2:
            continue
        # rows of `bayesbench score` (weights given, no training config) say so, and are compared
        # among themselves: listing every training setting as '-' against trained rows says nothing
        trained = [g for g in rows if (g["records"][0].config or {}).get("train")]
        scored = [g for g in rows if g not in trained]
        for part, prefix in ((trained, ""), (scored, SCORED_SETTINGS)):
            settings = [_settings(g["records"][0]) for g in part]
            keys = sorted({k for st in settings for k in st
                           if len({json.dumps(x.get(k), default=str) for x in settings}) > 1})
            for g, st in zip(part, settings):
                text = " ".join(f"{k}={st.get(k, '-')}" for k in keys)
                out[id(g)] = "; ".join(t for t in (prefix, text) if t) or "-"
    return out


FLOPS_HEADER = " FLOPs per step | training FLOPs |"
FLOPS_NOTE = ("- FLOPs per step = one training step (forward and backward, the row's batch) of one member, measured "
              "by torch.utils.flop_counter (matrix products, convolutions and attention; element-wise work such as "
              "a recurrent scan's gates, and the optimiser, not counted: an undercount for Mamba's scan and the "
              "LSTM's and GRU's gates); training FLOPs = that x the steps one member trained; a tuned row's search "
              "adds its selection runs' FLOPs (its note, 'search ...')")


def flops_cells(g: dict) -> str:
    """The FLOPs columns of a row ('1.2e8 | 7.3e11 | '), '- | - | ' for a row without a count."""
    f = g.get("flops") or {}
    if not f.get("per_step"):
        return "- | - | "
    return f"{flops_text(f['per_step'])} | {flops_text(f['total'])} | "


def flops_text(x: float) -> str:
    """A FLOPs count to three significant digits: 2.71e8."""
    mantissa, exponent = f"{x:.2e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _row_marks(g: dict, metric: str) -> str:
    """" (1 of 3 diverged, at step 150)", " (at floor)": what a row's numbers must be read with."""
    marks = []
    n = sum(s != "ok" for s in g["status"])
    if n:
        steps = sorted({d for d in g["diverged"] if d is not None})
        at = f", at step {', '.join(map(str, steps))}" if steps else ""
        marks.append(f"{n} of {len(g['status'])} diverged{at}")
    if metric in METRICS and at_floor(g, metric):
        marks.append("at floor")
    marks += tuning_marks(g.get("tuning"))
    return f" ({'; '.join(marks)})" if marks else ""


def _per_seed(g: dict, metric: str) -> str:
    """Each seed's value in seed order; a diverged member as where it diverged, not as a number."""
    cells = []
    for value, step, status in zip(g["values"][metric], g["diverged"], g["status"]):
        if status != "ok":
            cells.append(f"diverged@{step}" if step is not None else "diverged")
        else:
            cells.append(_fmt(value))
    return " ".join(cells)


def _curve_notes(agg: list[dict], metric: str, threshold: float) -> list[str]:
    """What the curve columns are, and on which sequences they were measured."""
    sets = sorted({(g["task"], g["eval"], c.n_sequences) for g in agg for c in g["curves"] if c is not None})
    if not sets:
        return ["- learning curves: none stored for these rows (runs from before curves, or --no-curves): the "
                "curve columns are empty"]
    where = "; ".join(f"{t} {e}: {n} sequences" for t, e, n in sets)
    return [f"- learning curves ({where}; a fixed set drawn apart from the evaluation set, measured at log-spaced "
            "training steps): 'steps to' = the first measured step from which a seed's curve of "
            f"{SHORT[metric]} stays <= {threshold:g} bits (the crossing lies after the measured step before it); with "
            "every seed there, the geometric mean over seeds with a 95% t-interval of log(steps) and the sequences "
            "it took per member; otherwise the median over all seeds (one that never got there counts as later) "
            "and how many reached it, no interval; 'still improving' = how many seeds' curves still fall over their "
            "last fifth (a least-squares line against log(step) falling by more than twice its standard error and "
            "by more than 5% of its value there; docs/leaderboard.md); a member stopped by --until counts up to its "
            "stop"]


def _floor_lines(agg: list[dict], key: tuple, metric: str, others: list[str], *, settings: bool = False,
                 flops: bool = False) -> list[str]:
    """The floor rows of one evaluation set (`block_key`), from the first run that stored them
    (`settings`, `flops`: the table has the settings column, the FLOPs columns, empty here)."""
    floors = next((g["floors"] for g in agg if block_key(g) == key and g["floors"]), None)
    if not floors:
        return []
    out = []
    for name in ("uniform", "marginal"):
        scores = floors.get(name)
        if not scores:
            continue
        val = lambda m: scores[m].mean if m in scores else None  # noqa: E731
        out.append(f"| {key[0]} | {key[1]} | *{name} (floor)* |{' - |' if settings else ''} - | - |"
                   f"{' - | - |' if flops else ''} - | - | "
                   f"{_fmt(val(metric)) if metric in METRICS else '-'} | - | "
                   + " | ".join(_fmt(val(m)) for m in others) + " | - | - | - |")
    return out


def _blank(x):
    """None as an empty cell."""
    return "" if x is None else x


def _csv_number(x: float | None) -> float | str:
    """As the store gave it before: a non-finite score is an empty cell."""
    return "" if x is None or not math.isfinite(x) else x


def to_csv(records: list[RunRecord], *, threshold: float = DEFAULT_THRESHOLD, curve_metric: str = "entropy_mae",
           metric: str = "entropy_mae") -> str:
    """One line per (run, seed, evaluation): every metric's mean in bits (`<metric>_bits`), and
    on the evaluation the learning curve measures, the steps to `threshold` bits of
    `curve_metric` and whether it still improves (empty elsewhere); `metric` "auc" adds the
    member's AUC and its step range there (`member_aucs`)."""
    aucs = member_aucs(records, curve_metric) if metric == AUC else None
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    names = [name for name in EvalResult.metric_names()
             if any(getattr(ev, name) is not None for r in records for ev in r.evals.values())]
    w.writerow(["task", "eval", "arch", "params", "steps", "wall_s", "seed", *(f"{n}_bits" for n in names),
                "n_sequences", "positions", "status", "run_id", "stop_step", "stop_reason", "curve_metric",
                "threshold_bits", "steps_to_threshold", "still_improving",
                *(["auc_metric", "auc_bits", "auc_from_step", "auc_to_step"] if aucs is not None else [])])
    for r in records:
        facts = _member_curve(r, curve_metric, threshold)
        for name, ev in r.evals.items():
            means = [_csv_number(getattr(ev, n).mean) if getattr(ev, n) is not None else "" for n in names]
            here = r.learning_curve is not None and r.learning_curve.eval == name
            curve = [facts["curve_metric"], threshold, _blank(facts["steps_to_threshold"]),
                     _blank(facts["still_improving"])] if here else ["", "", "", ""]
            if aucs is not None:
                a = aucs.get((r.run_id, r.seed)) if here else None
                steps = (a or {}).get("auc_steps") or ["", ""]
                curve += [curve_metric, _blank((a or {}).get("auc_bits")), *steps] if a else ["", "", "", ""]
            w.writerow([r.task_label, name, r.arch, r.params, r.steps, r.wall_s, r.seed, *means,
                        ev.entropy_mae.n_sequences, ev.positions, r.status, r.run_id, _blank(r.stop_step),
                        _blank(r.stop_reason), *curve])
    return buf.getvalue()


def render(records: list[RunRecord], fmt: str = "md", metric: str = "entropy_mae", per_run: bool = False, *,
           threshold: float = DEFAULT_THRESHOLD, curve_metric: str | None = None) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    check_metric(metric)
    threshold = check_threshold(threshold)
    cm = curve_metric_for(metric, curve_metric)
    if fmt == "md":
        return markdown(records, metric, per_run, threshold=threshold, curve_metric=cm)
    if fmt == "csv":
        return to_csv(records, threshold=threshold, curve_metric=cm, metric=metric).rstrip("\n")
    return json.dumps(json_runs(records, threshold=threshold, curve_metric=cm, metric=metric), indent=2)


def headline(records: list[RunRecord]) -> list[str]:
    """The science in two lines per task: the ranking by mean headline entropy MAE on the primary
    evaluation set, where two neighbours whose 95% intervals over seeds overlap are a tie ("~"),
    rows at the uniform floor and diverged members are marked; and whether the transformer beats
    the position-wise MLP on every seed (worst transformer seed against best MLP seed), as Paper I
    reports it for the bijection."""
    lines = []
    blocks: dict[tuple, list[dict]] = {}
    for g in _aggregate(records, "entropy_mae"):
        if g["primary"]:
            blocks.setdefault(block_key(g), []).append(g)
    marks = _set_marks([g for rows in blocks.values() for g in rows])
    for key, rows in blocks.items():
        (task, ev, n, _), code = key, marks[key].replace(f", {key[2]} seq", "")
        rows = sorted(rows, key=lambda g: _sort_key(g["means"]["entropy_mae"]))
        text = ""
        for k, g in enumerate(rows):
            if k:
                text += f" {_order(rows[k - 1], g)} "
            mean = g["means"]["entropy_mae"]
            text += (f"{g['arch']} " + (f"{mean:.4f}" if math.isfinite(mean) else "diverged")
                     + _row_marks(g, "entropy_mae"))
        lines.append(f"{task} ({ev}, {n} sequences{code}): mean entropy MAE (bits) over seeds, best first: {text} "
                     "('<': 95% intervals over seeds apart; '~': they overlap, a tie at this number of seeds; '<?': "
                     "fewer than two seeds, untested)")
        by_arch = {g["arch"]: [v for v, st in zip(g["values"]["entropy_mae"], g["status"]) if st == "ok"]
                   for g in rows}
        if by_arch.get("transformer") and by_arch.get("mlp"):
            worst_t, best_m = max(by_arch["transformer"]), min(by_arch["mlp"])
            factor = best_m / worst_t if worst_t > 0 else math.inf
            verdict = "below" if factor > 1 else "NOT below"
            lines.append(f"{task}: transformer is {verdict} the position-wise MLP on every seed, by {factor:.1f}x "
                         f"(worst transformer seed {worst_t:.4f} bits, best MLP seed {best_m:.4f} bits)")
    return lines


def _order(a: dict, b: dict) -> str:
    """'<' when b's interval over seeds lies above a's, '~' when they overlap, '<?' without intervals."""
    (_, a_hi), (b_lo, _) = seed_interval(a["values"]["entropy_mae"]), seed_interval(b["values"]["entropy_mae"])
    if not (math.isfinite(a_hi) and math.isfinite(b_lo)):
        return "<?"
    return "<" if b_lo > a_hi else "~"


# A row's cells in words, shared by every rendering of the table (`markdown`, report/site.py).
set_marks = _set_marks  # block_key -> what tells a set apart from the others of its task and eval
row_marks = _row_marks  # " (1 of 3 diverged, at step 150)", " (at floor)"
per_seed_cell = _per_seed  # each seed's value, a diverged one as where it diverged
reach_cell = _reach_cell  # steps to the threshold over seeds
improving_cell = _improving_cell  # how many seeds' curves still improve
fmt_bits = _fmt  # a number of bits as the table prints it
