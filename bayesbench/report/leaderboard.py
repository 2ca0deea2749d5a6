"""Leaderboards: queries over the results store, as Markdown, CSV or JSON.

Every number says what it is (docs/science.md#metrics), all in bits over the task's fixed
evaluation set, on the positions named in the table's notes: each final metric of the metric
table (`bayesbench.metric_table`), described there and in the notes. The table ranks by one of them
(`metric`) and names it in its header. Below each task and
evaluation, two computed floors: the uniform predictor and the best context-ignoring one
(`bayesbench.scoring.floors`). By default a row pools every stored seed of one (task, arch,
configuration) across runs (the newest record of a seed run twice), with the number of seeds
shown; `latest=True` keeps only the newest run of each (task, arch), `per_run=True` gives one
row per run. Input everywhere: the stored `RunRecord`s (`report.selection.select_rows`), pooled into
`report.rows.Row`s (`aggregate`); `report.headline` states the science the leaderboard
exists to show. What every column and mark means is said once in `report.notes`, which the
notes under the table and the site's footer both read.

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
from typing import Any

from .. import versions
from ..stats import stays_from
from ..store.database import row_settings
from ..store.records import EvalResult, RunRecord, json_safe
from ..store.tuning import tuning_marks, tuning_of
from .curve_stats import Reach, still_improving, trained_part
from .notes import ranked_label, table_notes, threshold_bits
from .rows import (
    AUC,
    DEFAULT_THRESHOLD,
    Row,
    aggregate,
    at_floor,
    block_key,
    check_metric,
    check_threshold,
    curve_metric_for,
    final_metrics,
    measured_wall,
    set_marks,
    short,
    trained_here,
)

FORMATS = ("md", "csv", "json")
# the version of the leaderboard's JSON (docs/results.md#the-leaderboard-as-json): every JSON document of
# rows says it (`leaderboard --json`, `export --format json`, `score`/`train --json`); raise it when a key
# changes meaning or goes, not when one is added
SCHEMA_VERSION = 1


def _num(x: float | None) -> float | None:
    """A number for JSON: non-finite (a diverged member's scores) as null."""
    return x if x is not None and math.isfinite(x) else None


def _json_eval(ev: EvalResult) -> dict:
    """An evaluation's means in bits (one `<metric>_bits` key per metric) with their 95% intervals
    over sequences (`<metric>_ci`), its scored positions and the set: its size and id."""
    out: dict[str, Any] = {f"{name}_bits": _num(s.mean) for name, s in ev.metrics().items()}
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
            "steps_to_threshold": stays_from(steps, values, threshold),
            "still_improving": still_improving(steps, values)}


def member_aucs(records: list[RunRecord], curve_metric: str) -> dict[tuple[str, int], dict]:
    """(run_id, seed) -> {"auc_bits", "auc_metric", "auc_steps"}: each member's area under its
    learning curve of `curve_metric` against log(step), over the common step range of every
    curve of its task and evaluation set (as `--metric auc` ranks them; None without a curve)."""
    out = {}
    for row in aggregate(records, AUC, per_run=True, curve_metric=curve_metric):
        span = row.auc_range
        for rec, value in zip(row.records, row.values[AUC]):
            if rec.learning_curve is not None and rec.learning_curve.eval == row.eval:
                out[(rec.run_id, rec.seed)] = {"auc_bits": _num(value), "auc_metric": curve_metric,
                                               "auc_steps": list(span) if span else None}
    return out


#: The final metrics a run's flat JSON record gives first, each with its interval (`<name>_bits`,
#: `<name>_ci`), where the schema's first version put them; every other final metric of the table
#: follows "status" as `<name>_bits` (its interval is in the record's "evals").
FLAT_WITH_CI = ("entropy_mae", "kl")


def _flat_metrics(head: EvalResult, with_ci: bool) -> dict:
    """The headline's `<name>_bits` (and with `with_ci` its `<name>_ci`) of the final metrics in
    FLAT_WITH_CI (`with_ci`) or of the others, in the record's order; null where not scored."""
    out: dict = {}
    for name in EvalResult.metric_names():
        if (name in FLAT_WITH_CI) != with_ci:
            continue
        s = head.scores.get(name)
        out[f"{name}_bits"] = _num(None if s is None else s.mean)
        if with_ci:
            out[f"{name}_ci"] = [_num(None if s is None else s.ci_low), _num(None if s is None else s.ci_high)]
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
            **_flat_metrics(head, with_ci=True),
            "wall_s": measured_wall(r), "steps_per_s": r.steps_per_s, "status": r.status,
            **_flat_metrics(head, with_ci=False),
            "preset": r.preset, "group_id": r.group_id, "eval": r.primary,
            "evals": {name: _json_eval(ev) for name, ev in r.evals.items()},
            "permutation": json_safe(r.permutation.to_json()) if r.permutation is not None else None,
            "created_at": r.created_at, "stop_step": r.stop_step, "stop_reason": r.stop_reason,
            "member": r.member, "eval_sequences": r.headline.entropy_mae.n_sequences,
            "settings": json_safe(row_settings(r)), "device": (r.environment or {}).get("device"),
            "flops": (r.config or {}).get("flops"),
            # the recurrent state size (`models.state`), in rows that have one (rows stored before it keep their keys)
            **({"state": (r.config or {})["state"]} if (r.config or {}).get("state") else {}),
            "tuning": json_safe(tuning_of(r)),
            "code": json_safe(r.code),
            **_member_curve(r, curve_metric, threshold),
            "learning_curve": None if r.learning_curve is None else json_safe(dataclasses.asdict(r.learning_curve)),
        })
    if aucs is None:
        return {"schema_version": SCHEMA_VERSION, "runs": runs}
    return {"schema_version": SCHEMA_VERSION,
            "metric": f"auc: AUC of {curve_metric} over log step (each run's auc_bits, over its auc_steps)",
            "runs": runs}


def board_rows(records: list[RunRecord], metric: str = "entropy_mae", per_run: bool = False, *,
               threshold: float = DEFAULT_THRESHOLD, curve_metric: str = "entropy_mae") -> list[dict]:
    """The leaderboard's rows as JSON, the one schema of the pooled leaderboard (docs/results.md#the-
    leaderboard-as-json): one dict per `aggregate` row, in its order. `bayesbench.leaderboard` returns
    them, `leaderboard --json` carries them as "rows", `export --pooled` flattens them into columns."""
    from .rows import seed_interval

    out = []
    for g in aggregate(records, metric, per_run, curve_metric, threshold):
        floors = g.floors or {}
        intervals = {}
        for m in final_metrics():
            lo, hi = seed_interval(g.values[m])
            intervals[m] = [None if not math.isfinite(lo) else max(lo, 0.0), _num(hi)]
        out.append({
            "task": g.task, "eval": g.eval, "arch": g.arch, "params": g.params,
            # floats per sequence and member at the scored length (`models.state`), where the rows have a count
            **({"state_floats": g.state.get("floats")} if g.state else {}), "steps": g.steps,
            "n_sequences": g.n_sequences, "primary": g.primary, "seeds": list(g.seeds),
            **{f"{m}_bits": _num(v) for m, v in g.means.items()},
            "metric": metric, "per_seed_bits": [_num(v) for v in g.values[metric]],
            "ci_bits": [_num(x) for x in g.ci],
            "floors_bits": {name: _num(s[metric].mean) for name, s in floors.items() if metric in s},
            "at_floor": at_floor(g, metric) if metric != AUC else None,
            "diverged_at": list(g.diverged), "wall_s": _num(g.wall_s) if trained_here(g.records[0]) else None,
            "n_runs": g.n_runs,
            "curve_metric": curve_metric, "threshold_bits": threshold,
            "steps_to_threshold": None if g.reach is None else list(g.reach.per_seed),
            "run_ids": sorted({r.run_id for r in g.records}),
            "settings": json_safe(row_settings(g.records[0])),
            "intervals_bits": intervals, "trained_here": trained_here(g.records[0]),
        })
    return out


def reach_cell(r: Reach | None) -> str:
    """Steps to the threshold over seeds, how many reached it, and the sequences it took."""
    if r is None:
        return "-"
    def seq(steps: float) -> str:
        return f"; {steps * r.batch_size:,.0f} seq" if r.batch_size else ""
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


def improving_cell(flags: list[bool | None]) -> str:
    if not flags or any(f is None for f in flags):
        return "-" if not flags or all(f is None for f in flags) else "n/a"
    return f"{sum(bool(f) for f in flags)}/{len(flags)}"


def fmt_bits(x) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    if x == 0:  # an interval clipped at 0: "0", not "0.00e+00" beside four-decimal numbers
        return "0"
    return f"{x:.4f}" if abs(x) >= 1e-3 else f"{x:.2e}"


def _signed(x) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:+.2e}"


def _wall(x) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.0f}"


def steps_cell(row: Row) -> str:
    """A row's training steps; '-' for a scored row (`trained_here` False) whose user stated none."""
    return str(row.steps) if row.steps or trained_here(row.records[0]) else "-"


def wall_cell(row: Row) -> str:
    """A row's training wall time (s); '-' for a scored row, which bayesbench never timed training."""
    return _wall(row.wall_s) if trained_here(row.records[0]) else "-"


def _seeds(row: Row) -> str:
    runs = f" in {row.n_runs} runs" if row.n_runs > 1 else ""
    return f"{len(row.seeds)}{runs}: {','.join(map(str, row.seeds))}"


def _count(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k"


def params_cell(row: Row) -> str:
    """A row's parameter count per member: '-' when not given (0: a predictions row scored without
    --params), and every count its seeds record when they differ (predictions rows of one name
    scored with different --params), never one of them for all."""
    counts = sorted({r.params for r in row.records})
    return " / ".join(_count(n) if n else "-" for n in counts) or "-"


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
    agg = aggregate(records, metric, per_run, cm, threshold)
    others = [m for m in final_metrics() if m != metric]
    differ = differing_settings(agg)  # rows of one arch and evaluation set trained differently: say how
    flops = any(row.flops for row in agg)  # rows trained with a FLOPs count: two columns for it
    state = any(row.state for row in agg)  # rows with a state count (`models.state`): a column for it
    lines = [f"| task | eval | arch |{' settings |' if differ else ''} params |{STATE_HEADER if state else ''} steps |"
             f"{FLOPS_HEADER if flops else ''}"
             f" wall (s) | seeds | "
             f"**{ranked_label(metric, cm)}** (bits), mean [95% CI over seeds] | per seed | "
             + " | ".join(f"{short(m)} (bits), mean" for m in others)
             + f" | steps to {short(cm)} <= {threshold_bits(threshold)} [95% CI] (seeds reached) | still improving"
             " | x best |",
             "|---|---|---|" + ("---|" if differ else "") + ("---|" if state else "") + ("---|---|" if flops else "")
             + "---|---|---|---|---|---|"
             + "---|" * len(others) + "---|---|---|"]
    best: dict[tuple, float] = {}
    for row in agg:
        v = row.means[metric]
        best[block_key(row)] = min(best.get(block_key(row), math.inf), v if math.isfinite(v) else math.inf)
    marks = set_marks(agg)
    for i, row in enumerate(agg):
        key = block_key(row)
        ratio = row.means[metric] / best[key] if 0 < best[key] < math.inf else float("nan")
        lo, hi = row.ci
        ci = f" [{fmt_bits(max(lo, 0.0))}, {fmt_bits(hi)}]" if math.isfinite(lo) else ""
        size = marks[key]
        mean = fmt_bits(row.means[metric]) + ci if math.isfinite(row.means[metric]) else "diverged (every seed)"
        settings = f" {differ.get(id(row), '-')} |" if differ else ""
        lines.append(f"| {row.task} | {row.eval}{'' if not row.primary else ' (trained)'}{size} | "
                     f"{row.arch}{row_marks(row, metric)} |{settings} {params_cell(row)} | "
                     + (state_cell(row) if state else "") + f"{steps_cell(row)} | "
                     + (flops_cells(row) if flops else "")
                     + f"{wall_cell(row)} | {_seeds(row)} | {mean} | {per_seed_cell(row, metric)} | "
                     + " | ".join(fmt_bits(row.means[m]) for m in others)
                     + f" | {reach_cell(row.reach)} | {improving_cell(row.improving)} | "
                     + (f"{ratio:.1f}x |" if math.isfinite(ratio) else "- |"))
        if i + 1 == len(agg) or block_key(agg[i + 1]) != key:
            lines += _floor_lines(agg, key, metric, others, settings=bool(differ), flops=flops, state=state)
    notes = table_notes(agg, metric, cm, threshold, flops=flops, state=state) + ["- scored positions:"]
    seen = set()
    for row in agg:
        if (row.task, row.eval) not in seen:
            seen.add((row.task, row.eval))
            notes.append(f"  - {row.task} {row.eval}: {row.positions}; {row.n_sequences} sequences")
    perm = [(r, r.permutation) for r in records if r.permutation is not None]
    if perm:
        notes.append("- HMM label-permutation check (docs/science.md#hmm-state-tracking; same sequences, hidden states "
                     "relabelled, posterior recomputed): entropy MAE vs permuted entropy MAE, difference with 95% CI:")
        for r, p in perm:
            d = p.difference
            notes.append(f"  - {r.task_label} {p.eval} {r.arch} seed {r.seed}: {fmt_bits(p.entropy_mae)} vs "
                         f"{fmt_bits(p.entropy_mae_permuted)}, difference {_signed(d.mean)} "
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


def differing_settings(agg: list[Row]) -> dict[int, str]:
    """id(row) -> 'lr=0.0005 batch_size=64': the settings in which rows of one architecture and
    evaluation set differ from each other (rows it does not concern are left out; empty when no
    two rows of one arch share a set)."""
    by_arch: dict[tuple, list[Row]] = {}
    for row in agg:
        by_arch.setdefault((*block_key(row), row.arch), []).append(row)
    out = {}
    for rows in by_arch.values():
        if len(rows) < 2:
            continue
        # rows of `bayesbench score` (weights given, no training config) say so, and are compared
        # among themselves: listing every training setting as '-' against trained rows says nothing
        trained = [row for row in rows if trained_here(row.records[0])]
        scored = [row for row in rows if row not in trained]
        for part, prefix in ((trained, ""), (scored, SCORED_SETTINGS)):
            settings = [_settings(row.records[0]) for row in part]
            keys = sorted({k for st in settings for k in st
                           if len({json.dumps(x.get(k), default=str) for x in settings}) > 1})
            for row, st in zip(part, settings):
                text = " ".join(f"{k}={st.get(k, '-')}" for k in keys)
                out[id(row)] = "; ".join(t for t in (prefix, text) if t) or "-"
    return out


FLOPS_HEADER = " FLOPs per step | training FLOPs |"
STATE_HEADER = " state (floats) |"


def state_cell(row: Row) -> str:
    """The state column of a row ('4,096 | '), 'no model | ' for predictions made elsewhere (`bayesbench
    score`: nothing to count), '- | ' for a row without a count."""
    s = row.state or {}
    if s.get("no_model"):
        return "no model | "
    return "- | " if s.get("floats") is None else f"{int(s['floats']):,} | "


def flops_cells(row: Row) -> str:
    """The FLOPs columns of a row ('1.2e8 | 7.3e11 | '), '- | - | ' for a row without a count."""
    f = row.flops or {}
    if not f.get("per_step"):
        return "- | - | "
    return f"{flops_text(f['per_step'])} | {flops_text(f['total'])} | "


def flops_text(x: float) -> str:
    """A FLOPs count to three significant digits: 2.71e8."""
    mantissa, exponent = f"{x:.2e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def row_marks(row: Row, metric: str) -> str:
    """" (1 of 3 diverged, at step 150)", " (at floor)": what a row's numbers must be read with."""
    marks = []
    n = sum(s != "ok" for s in row.status)
    if n:
        steps = sorted({d for d in row.diverged if d is not None})
        at = f", at step {', '.join(map(str, steps))}" if steps else ""
        marks.append(f"{n} of {len(row.status)} diverged{at}")
    if metric in final_metrics() and at_floor(row, metric):
        marks.append("at floor")
    marks += tuning_marks(row.tuning)
    return f" ({'; '.join(marks)})" if marks else ""


def per_seed_cell(row: Row, metric: str) -> str:
    """Each seed's value in seed order; a diverged member as where it diverged, not as a number."""
    cells = []
    for value, step, status in zip(row.values[metric], row.diverged, row.status):
        if status != "ok":
            cells.append(f"diverged@{step}" if step is not None else "diverged")
        else:
            cells.append(fmt_bits(value))
    return " ".join(cells)


def _floor_lines(agg: list[Row], key: tuple, metric: str, others: list[str], *, settings: bool = False,
                 flops: bool = False, state: bool = False) -> list[str]:
    """The floor rows of one evaluation set (`block_key`), from the first run that stored them
    (`settings`, `flops`, `state`: the table has the settings column, the FLOPs columns, the state
    column, empty here)."""
    floors = next((row.floors for row in agg if block_key(row) == key and row.floors), None)
    if not floors:
        return []
    out = []
    # a continuous tunnel's floors have their own names (prior, least_squares, ridge: issue 41)
    for name in ("uniform", "marginal", *(n for n in floors if n not in ("uniform", "marginal"))):
        scores = floors.get(name)
        if not scores:
            continue
        def val(m: str) -> float | None:
            return scores[m].mean if m in scores else None
        out.append(f"| {key[0]} | {key[1]} | *{name} (floor)* |{' - |' if settings else ''} - |"
                   f"{' - |' if state else ''} - |"
                   f"{' - | - |' if flops else ''} - | - | "
                   f"{fmt_bits(val(metric)) if metric in final_metrics() else '-'} | - | "
                   + " | ".join(fmt_bits(val(m)) for m in others) + " | - | - | - |")
    return out


def _blank(x):
    """None as an empty cell."""
    return "" if x is None else x


def _csv_number(x: float | None) -> float | str:
    """A score for a CSV cell: a non-finite one (a diverged member) is an empty cell, so a spreadsheet
    reads the column as numbers."""
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
            w.writerow([r.task_label, name, r.arch, r.params, r.steps, _blank(measured_wall(r)), r.seed, *means,
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
    doc = json_runs(records, threshold=threshold, curve_metric=cm, metric=metric)
    doc["rows"] = board_rows(records, metric, per_run, threshold=threshold, curve_metric=cm)
    return json.dumps(doc, indent=2)

