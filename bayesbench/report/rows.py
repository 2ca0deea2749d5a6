"""The leaderboard's rows: the stored records of one (task, evaluation set, architecture,
configuration) pooled over their seeds into a typed `Row` (`aggregate`), with what every
rendering reads off them: which rows may be ranked together (`block_key`, `set_marks`), the
floor mark (`at_floor`), the learning-curve statistics (`curve_stats`) and the interval over
seeds. The metrics a row carries are the scoring table's final metrics
(`bayesbench.metric_table`); the curve metrics, those a learning curve keeps.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from .. import versions
from ..metric_table import AT_FLOOR, METRICS, curve_metrics, final_metrics
from ..stats import log_auc, t_interval
from ..store.database import config_key
from ..store.records import EvalResult, LearningCurve, RunRecord
from ..store.tuning import tuned_label, tuning_of
from .curve_stats import Reach, common_range, reach, still_improving, trained_part

AUC = "auc"  # rank by the area under the learning curve of the curve metric, against log(step)
DEFAULT_THRESHOLD = 0.1  # bits: the leaderboard's "steps to threshold"


def rankings() -> tuple[str, ...]:
    """What a leaderboard can rank by: every final metric of the table (`bayesbench.metric_table`), or AUC."""
    return (*final_metrics(), AUC)


def short(metric: str) -> str:
    """A metric's label in tables and figures ("KL"), from the table."""
    return METRICS[metric].short


def described(metric: str) -> str:
    """What a metric is, in words (the leaderboard's notes), from the table."""
    return METRICS[metric].description




@dataclass
class Row:
    """One leaderboard row: the seeds of one (task, evaluation set, architecture,
    configuration), or of one run with `per_run`, pooled. Per-seed lists are in seed order."""

    task: str  # the task's label ("hmm S=5 K=20")
    eval: str  # the evaluation's name ("K=30", "values")
    arch: str
    set_code: str  # what of the code decides the set and the metrics' definitions (`set_code`)
    params: int
    steps: int
    positions: str  # the scored positions, in words
    floors: dict | None  # {"uniform" | "marginal": {metric: Summary}} on the same sequences
    n_sequences: int  # the evaluation set's size
    primary: bool  # the evaluation the run trained for (its learning curve's)
    seeds: list[int]
    status: list[str]  # "ok" or why a member is not a result
    records: list[RunRecord]  # each seed's newest record
    values: dict[str, list[float]]  # metric (and "auc") -> per seed, NaN for a diverged member
    diverged: list[int | None]  # the step a member diverged at
    wall_s: float  # training wall time of the ensemble, the mean over the row's runs
    n_runs: int
    curves: list[LearningCurve | None] = field(default_factory=list)  # per seed, on this evaluation
    reach: Reach | None = None  # steps to the threshold over seeds
    improving: list[bool | None] = field(default_factory=list)  # per seed: does its curve still fall
    auc_range: tuple[int, int] | None = None  # the step range the AUC is taken over
    means: dict[str, float] = field(default_factory=dict)  # metric -> mean over the ok seeds
    ci: tuple[float, float] = (math.nan, math.nan)  # the ranked metric's interval over seeds
    tuning: dict | None = None  # the learning-rate search that chose the row's rate (`store.tuning`), None untuned
    flops: dict | None = None  # {"per_step", "total", ...} measured by torch.utils.flop_counter, None without a count
    # {"floats", "length", "counted"}: the recurrent state one member holds per sequence at the scored length
    # (`models.state`), None without a count (a row stored before it, an outside model)
    state: dict | None = None


def check_metric(metric: str, allowed: tuple[str, ...] | None = None) -> str:
    """`metric` if it is one of `allowed` (default: `rankings()`), else a ValueError naming them."""
    allowed = rankings() if allowed is None else allowed
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
        return check_metric(curve_metric, curve_metrics())
    return metric if metric in final_metrics() else "entropy_mae"


def _ev_mean(ev: EvalResult, metric: str) -> float:
    """One evaluation's mean of `metric` (NaN where its record has no score of that metric)."""
    s = getattr(ev, metric)
    return math.nan if s is None else s.mean


def aggregate(records: list[RunRecord], metric: str = "entropy_mae", per_run: bool = False,
              curve_metric: str = "entropy_mae", threshold: float = DEFAULT_THRESHOLD) -> list[Row]:
    """The leaderboard's rows, as every rendering of it reads them (`report.leaderboard`, the web
    site of `report/site.py`, `report.headline`): one `Row` per (task_label, eval, arch,
    configuration) pooling the seeds of every run (a seed stored twice counts once, its newest
    record), or per (..., run) with `per_run`, with per-seed values of every metric, their means,
    the interval over seeds of `metric`, the floors of its set and the learning curve's
    statistics of `curve_metric` (`_curve_stats`); ordered by task, eval and the mean of
    `metric` (one of `rankings()`)."""
    check_metric(metric)
    threshold = check_threshold(threshold)
    heads: dict[tuple, dict] = {}
    runs: dict[tuple, dict[str, float | None]] = {}
    by_seed: dict[tuple, dict[int, tuple[dict[str, float], RunRecord]]] = {}
    for r in records:  # oldest first: a newer record of the same seed replaces the older one
        for name, ev in r.evals.items():
            n_seq = ev.entropy_mae.n_sequences  # rows are comparable only on the same evaluation set
            key = (r.task_label, name, n_seq, r.arch, r.run_id if per_run else config_key(r))
            head = heads.setdefault(key, {"task": tuned_label(r), "eval": name, "arch": r.arch, "set_code": set_code(r),
                                          "tuning": tuning_of(r), "flops": (r.config or {}).get("flops"),
                                          "state": (r.config or {}).get("state"),
                                          "params": r.params, "steps": r.steps, "positions": ev.positions,
                                          "floors": ev.floors, "n_sequences": n_seq, "primary": name == r.primary})
            runs.setdefault(key, {})[r.run_id] = r.wall_s
            by_seed.setdefault(key, {})[r.seed] = ({m: _ev_mean(ev, m) for m in final_metrics()}, r)
            head["floors"] = head["floors"] or ev.floors
    out = []
    for key, head in heads.items():
        seeds = sorted(by_seed[key].items())
        members = [rec for _, (_, rec) in seeds]
        walls = [w for w in runs[key].values() if w is not None]
        out.append(Row(
            **head, seeds=[s for s, _ in seeds], status=[rec.status for rec in members], records=members,
            # a diverged member's numbers are never a result: NaN in every statistic, named in the table
            values={m: [math.nan if rec.diverged else v[m] for _, (v, rec) in seeds] for m in final_metrics()},
            diverged=[rec.diverged_at if rec.diverged else None for rec in members],
            wall_s=sum(walls) / len(walls) if walls else float("nan"), n_runs=len(runs[key])))
    _curve_stats(out, curve_metric, threshold)
    out.sort(key=lambda row: (row.task, _eval_order(row.eval), -row.n_sequences, row.set_code,
                              _sort_key(_mean(row.values[metric]))))
    for row in out:
        row.means = {m: _mean(v) for m, v in row.values.items()}
        row.ci = seed_interval(row.values[metric])
    return out


def trained_here(record: RunRecord) -> bool:
    """Whether bayesbench trained the record's model (it has a training configuration); False for a
    model `bayesbench score` scored from given weights or predictions: its steps are what its user
    stated (0: not stated) and its wall time was never measured, so neither is shown as a number."""
    return bool((record.config or {}).get("train"))


def measured_wall(record: RunRecord) -> float | None:
    """The record's training wall time, None for a scored one (`trained_here` False): nothing was
    trained here to time, so its stored 0.0 is never given as a measurement."""
    return record.wall_s if trained_here(record) else None


def block_key(row: Row) -> tuple:
    """The rows that may be ranked together: one task, one evaluation, one evaluation set (the
    same sequences: the set is fixed by the task, its code and its size) and one definition of
    the metrics (their versions)."""
    return (row.task, row.eval, row.n_sequences, row.set_code)


def set_code(record: RunRecord) -> str:
    """What of a row's code decides which numbers it can be ranked against: the tunnel's (its
    sequences and posteriors) and the metrics' (their definitions), as far as keys name them
    (`versions.keyed`): '' for first-version built-ins."""
    code = versions.keyed({part: record.code.get(part) for part in ("task", "metrics") if part in record.code})
    return json.dumps(code, sort_keys=True) if code else ""


def set_marks(agg: list[Row]) -> dict[tuple, str]:
    """block_key -> what tells its set apart from the other sets of the same task and evaluation
    in the table (', 512 seq', ', tunnel contents 1a2b..'), '' where a task and evaluation has one set."""
    by_eval: dict[tuple, set] = {}
    for row in agg:
        by_eval.setdefault((row.task, row.eval), set()).add(block_key(row))
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




def at_floor(row: Row, metric: str) -> bool:
    """Whether the row's mean of `metric` is within AT_FLOOR of the uniform floor or above it (on a
    continuous tunnel, which has no uniform floor, of its prior predictive's, 'prior')."""
    floors = row.floors or {}
    floor = (floors.get("uniform") or floors.get("prior") or {}).get(metric)
    mean = row.means.get(metric, math.nan)
    return floor is not None and math.isfinite(mean) and mean >= floor.mean * (1 - AT_FLOOR)


def _curve_stats(groups: list[Row], metric: str, threshold: float) -> None:
    """Per group, from its seeds' learning curves on the group's evaluation (None where a seed has
    none): "reach" (`curve_stats.Reach` of `threshold`, or None), "improving" (per seed), and
    values["auc"] (per seed, over the common step range of every curve of the task and eval)."""
    for row in groups:
        curves = [r.learning_curve if r.learning_curve is not None and r.learning_curve.eval == row.eval
                  and metric in r.learning_curve.values else None for r in row.records]
        row.curves = curves
        stops = [r.stop_step for r in row.records]
        batch = next((c.sequences[0] // c.step[0] for c in curves if c is not None and c.step), None)
        row.reach = reach(curves, metric, threshold, stops, batch)
        row.improving = [None if c is None else still_improving(*trained_part(c, metric, stop))
                          for c, stop in zip(curves, stops)]
    blocks: dict[tuple, list[Row]] = {}
    for row in groups:
        blocks.setdefault(block_key(row), []).append(row)
    for block in blocks.values():
        full = [(c.step, c.metric(metric)) for row in block for c in row.curves if c is not None]
        span = common_range(full)
        for row in block:
            row.auc_range = span
            row.values[AUC] = [math.nan if c is None or span is None else log_auc(c.step, c.metric(metric), *span)
                                for c in row.curves]


def _sort_key(x: float) -> float:
    return x if math.isfinite(x) else math.inf


def seed_interval(values: list, level: float = 0.95) -> tuple[float, float]:
    """(low, high) of the t-interval of the mean over seeds (`bayesbench.stats.t_interval`; NaN
    with fewer than two finite values)."""
    ci = t_interval(values, level)
    return ci["ci_low"], ci["ci_high"]


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
