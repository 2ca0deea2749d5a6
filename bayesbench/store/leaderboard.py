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
"""

from __future__ import annotations

import csv
import io
import json
import math

from .database import read_records
from .records import EvalResult, RunRecord

FORMATS = ("md", "csv", "json")
METRICS = {
    "entropy_mae": "entropy MAE per (sequence, position): mean |H(model) - H(Bayes)|",
    "entropy_mae_positional": "entropy MAE of per-position means: mean over positions of "
                              "|mean H(model) - mean H(Bayes)| (the authors' bijection metric, Paper I Table 1)",
    "kl": "KL(Bayes || model), mean over (sequence, position) (the authors' HMM metric)",
}
SHORT = {"entropy_mae": "entropy MAE", "entropy_mae_positional": "positional entropy MAE", "kl": "KL"}


def check_metric(metric: str) -> str:
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {tuple(METRICS)}, got {metric!r}")
    return metric


def _ev_mean(ev: EvalResult, metric: str) -> float:
    """One evaluation's mean of `metric` (NaN when the run predates that metric)."""
    s = getattr(ev, metric)
    return math.nan if s is None else s.mean


def select_rows(db: str | None = None, *, task: str | None = None, arch: str | None = None,
                group_id: str | None = None, run_ids: list[str] | None = None,
                latest: bool = False) -> list[RunRecord]:
    """Stored records, filtered (`run_ids`: those runs, e.g. a command's jobs); with `latest`,
    only the newest run of each (task_label, arch)."""
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
    if latest:
        newest: dict[tuple[str, str], str] = {}
        for r in records:  # oldest first, so the last run seen wins
            newest[(r.task_label, r.arch)] = r.run_id
        records = [r for r in records if newest[(r.task_label, r.arch)] == r.run_id]
    return records


def _num(x: float | None) -> float | None:
    """A number for JSON: non-finite (a diverged member's scores) as null."""
    return x if x is not None and math.isfinite(x) else None


def _json_eval(ev: EvalResult) -> dict:
    """An evaluation's means in bits (one `<metric>_bits` key per metric) and its scored positions."""
    out = {f"{name}_bits": _num(s.mean) for name, s in ev.metrics().items()}
    out["positions"] = ev.positions
    if ev.floors is not None:
        out["floors"] = {name: {f"{m}_bits": _num(s.mean) for m, s in scores.items()}
                         for name, scores in ev.floors.items()}
    return out


def json_runs(records: list[RunRecord]) -> dict:
    """{"runs": [...]}: one flat record per (run, seed), for --json."""
    runs = []
    for r in records:
        head = r.headline
        runs.append({
            "run_id": r.run_id, "seed": r.seed, "task": r.task, "task_label": r.task_label,
            "arch": r.arch, "params": r.params, "steps": r.steps, "final_loss": _num(r.final_loss),
            "entropy_mae_bits": _num(head.entropy_mae.mean),
            "entropy_mae_ci": [_num(head.entropy_mae.ci_low), _num(head.entropy_mae.ci_high)],
            "kl_bits": _num(head.kl.mean), "kl_ci": [_num(head.kl.ci_low), _num(head.kl.ci_high)],
            "wall_s": r.wall_s, "steps_per_s": r.steps_per_s, "status": r.status,
            "entropy_mae_positional_bits": _num(r.entropy_mae_positional_bits),
            "preset": r.preset, "group_id": r.group_id, "eval": r.primary,
            "evals": {name: _json_eval(ev) for name, ev in r.evals.items()},
            "permutation": _clean_json(r.permutation.to_json()) if r.permutation is not None else None,
            "created_at": r.created_at,
        })
    return {"runs": runs}


def _clean_json(value):
    """Non-finite floats anywhere in a JSON-ready value as null."""
    if isinstance(value, float):
        return _num(value)
    if isinstance(value, dict):
        return {k: _clean_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean_json(v) for v in value]
    return value


def config_key(record: RunRecord) -> str:
    """What must match for two runs' seeds to be pooled in one leaderboard row: the task's
    configuration, the model's arguments (an outside model's source too), training, position
    range and evaluation (not the seeds, the checkpoint path or the run)."""
    cfg = record.config or {}
    model = cfg.get("model") or {}
    return json.dumps({"task": record.task_config, "model_args": cfg.get("model_args"), "spec": model.get("spec"),
                       "train": cfg.get("train"), "max_len": cfg.get("max_len"),
                       "eval_lengths": cfg.get("eval_lengths"), "eval_sequences": cfg.get("eval_sequences")},
                      sort_keys=True, default=str)


def _aggregate(records: list[RunRecord], metric: str = "entropy_mae", per_run: bool = False) -> list[dict]:
    """One entry per (task_label, eval, arch, configuration) pooling the seeds of every run (a
    seed stored twice counts once, its newest record), or per (..., run) with `per_run`, with
    per-seed values of every metric; ordered by task, eval and the mean of `metric`."""
    groups: dict[tuple, dict] = {}
    for r in records:  # oldest first: a newer record of the same seed replaces the older one
        for name, ev in r.evals.items():
            key = (r.task_label, name, r.arch, r.run_id if per_run else config_key(r))
            g = groups.setdefault(key, {"task": r.task_label, "eval": name, "arch": r.arch,
                                        "params": r.params, "steps": r.steps, "runs": {}, "by_seed": {},
                                        "positions": ev.positions, "floors": ev.floors,
                                        "n_sequences": ev.entropy_mae.n_sequences,
                                        "primary": name == r.primary})
            g["runs"][r.run_id] = r.wall_s
            g["by_seed"][r.seed] = ({m: _ev_mean(ev, m) for m in METRICS}, r.status)
            g["floors"] = g["floors"] or ev.floors
    for g in groups.values():
        seeds = sorted(g.pop("by_seed").items())
        g["seeds"] = [s for s, _ in seeds]
        g["values"] = {m: [v[m] for _, (v, _) in seeds] for m in METRICS}
        g["status"] = [st for _, (_, st) in seeds]
        walls = [w for w in g["runs"].values() if w is not None]
        g["wall_s"] = sum(walls) / len(walls) if walls else float("nan")
        g["n_runs"] = len(g.pop("runs"))
    out = sorted(groups.values(),
                 key=lambda g: (g["task"], _eval_order(g["eval"]), _sort_key(_mean(g["values"][metric]))))
    for g in out:
        g["means"] = {m: _mean(v) for m, v in g["values"].items()}
        g["ci"] = seed_interval(g["values"][metric])
    return out


def _sort_key(x: float) -> float:
    return x if math.isfinite(x) else math.inf


def seed_interval(values: list, level: float = 0.95) -> tuple[float, float]:
    """t-interval of the mean over seeds (NaN with fewer than two finite values)."""
    vals = [x for x in values if x is not None and math.isfinite(x)]
    if len(vals) < 2:
        return (float("nan"), float("nan"))
    from scipy.stats import t as student_t

    n, mean = len(vals), sum(vals) / len(vals)
    sd = math.sqrt(sum((x - mean) ** 2 for x in vals) / (n - 1))
    half = float(student_t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
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


def markdown(records: list[RunRecord], metric: str = "entropy_mae", per_run: bool = False) -> str:
    """The leaderboard table ranked by `metric`, floor rows per task and evaluation, and notes
    saying what every number is."""
    check_metric(metric)
    if not records:
        return "(no results in the store yet: run `bayesbench run --preset quick`)"
    agg = _aggregate(records, metric, per_run)
    others = [m for m in METRICS if m != metric]
    lines = [f"| task | eval | arch | params | steps | wall (s) | seeds | **{SHORT[metric]}** (bits), mean "
             f"[95% CI over seeds] | per seed | " + " | ".join(f"{SHORT[m]} (bits), mean" for m in others)
             + " | x best |",
             "|---|---|---|---|---|---|---|---|---|" + "---|" * len(others) + "---|"]
    best: dict[tuple, float] = {}
    for g in agg:
        key = (g["task"], g["eval"])
        v = g["means"][metric]
        best[key] = min(best.get(key, math.inf), v if math.isfinite(v) else math.inf)
    for i, g in enumerate(agg):
        key = (g["task"], g["eval"])
        ratio = g["means"][metric] / best[key] if 0 < best[key] < math.inf else float("nan")
        flag = "" if all(s == "ok" for s in g["status"]) else " (diverged member)"
        lo, hi = g["ci"]
        ci = f" [{_fmt(max(lo, 0.0))}, {_fmt(hi)}]" if math.isfinite(lo) else ""
        lines.append(f"| {g['task']} | {g['eval']}{'' if not g['primary'] else ' (trained)'} | {g['arch']}{flag} | "
                     f"{_count(g['params'])} | {g['steps']} | {_wall(g['wall_s'])} | {_seeds(g)} | "
                     f"{_fmt(g['means'][metric])}{ci} | {' '.join(_fmt(x) for x in g['values'][metric])} | "
                     + " | ".join(_fmt(g["means"][m]) for m in others) + f" | {ratio:.1f}x |")
        if i + 1 == len(agg) or (agg[i + 1]["task"], agg[i + 1]["eval"]) != key:
            lines += _floor_lines(agg, key, metric, others)
    notes = ["", f"Ranked by **{SHORT[metric]}** = {METRICS[metric]}. Every metric in bits (log base 2) over the "
             "task's fixed evaluation set (docs/science.md#metrics):"]
    notes += [f"- {SHORT[m]} = {METRICS[m]}" for m in METRICS]
    notes += ["- 'per seed' lists each ensemble member in seed order; the interval is a t-interval of the mean over "
              "seeds (clipped at 0); 'x best' = mean / best mean on that task and eval (floors excluded); wall = "
              "training wall time of the whole ensemble (all seeds at once; the mean over runs when a row pools "
              "several); "
              "'seeds' = how many seeds the row pools (every stored run of the same task, arch and configuration; a "
              "seed run twice counts once, its newest run), then which.",
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


def _floor_lines(agg: list[dict], key: tuple, metric: str, others: list[str]) -> list[str]:
    """The floor rows of one (task, eval), from the first run that stored them."""
    floors = next((g["floors"] for g in agg if (g["task"], g["eval"]) == key and g["floors"]), None)
    if not floors:
        return []
    out = []
    for name in ("uniform", "marginal"):
        scores = floors.get(name)
        if not scores:
            continue
        val = lambda m: scores[m].mean if m in scores else None  # noqa: E731
        out.append(f"| {key[0]} | {key[1]} | *{name} (floor)* | - | - | - | - | {_fmt(val(metric))} | - | "
                   + " | ".join(_fmt(val(m)) for m in others) + " | - |")
    return out


def _csv_number(x: float | None) -> float | str:
    """As the store gave it before: a non-finite score is an empty cell."""
    return "" if x is None or not math.isfinite(x) else x


def to_csv(records: list[RunRecord]) -> str:
    """One line per (run, seed, evaluation): every metric's mean in bits (`<metric>_bits`)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    names = [name for name in EvalResult.metric_names()
             if any(getattr(ev, name) is not None for r in records for ev in r.evals.values())]
    w.writerow(["task", "eval", "arch", "params", "steps", "wall_s", "seed", *(f"{n}_bits" for n in names),
                "n_sequences", "positions", "status", "run_id"])
    for r in records:
        for name, ev in r.evals.items():
            means = [_csv_number(getattr(ev, n).mean) if getattr(ev, n) is not None else "" for n in names]
            w.writerow([r.task_label, name, r.arch, r.params, r.steps, r.wall_s, r.seed, *means,
                        ev.entropy_mae.n_sequences, ev.positions, r.status, r.run_id])
    return buf.getvalue()


def render(records: list[RunRecord], fmt: str = "md", metric: str = "entropy_mae", per_run: bool = False) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    check_metric(metric)
    if fmt == "md":
        return markdown(records, metric, per_run)
    if fmt == "csv":
        return to_csv(records).rstrip("\n")
    return json.dumps(json_runs(records), indent=2)


def headline(records: list[RunRecord]) -> list[str]:
    """The science in two lines per task: the ranking by mean headline entropy MAE, and whether
    the transformer beats the position-wise MLP on every seed (worst transformer seed against
    best MLP seed), as Paper I reports it for the bijection."""
    lines = []
    by_task: dict[str, dict[str, list[float]]] = {}
    for r in records:
        by_task.setdefault(r.task_label, {}).setdefault(r.arch, []).append(r.entropy_mae_bits)
    for task, archs in by_task.items():
        mean = {a: sum(v) / len(v) for a, v in archs.items()}
        ranking = " < ".join(f"{a} {mean[a]:.4f}" for a in sorted(mean, key=mean.get))
        lines.append(f"{task}: mean entropy MAE (bits), best first: {ranking}")
        if "transformer" in archs and "mlp" in archs:
            worst_t, best_m = max(archs["transformer"]), min(archs["mlp"])
            factor = best_m / worst_t if worst_t > 0 else math.inf
            verdict = "below" if factor > 1 else "NOT below"
            lines.append(f"{task}: transformer is {verdict} the position-wise MLP on every seed, by {factor:.1f}x "
                         f"(worst transformer seed {worst_t:.4f} bits, best MLP seed {best_m:.4f} bits)")
    return lines
