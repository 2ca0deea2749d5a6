"""Leaderboards: queries over the results store, as Markdown, CSV or JSON.

Every number says what it is: entropy MAE = mean over (sequence, scored position) of
|H(model) - H(Bayes)| in bits; KL = mean KL(Bayes || model) in bits; both over the task's
fixed evaluation set, on the positions named in the table's notes. By default each
(task, arch) shows its most recent run, with one value per seed. Input everywhere: the stored
`RunRecord`s (`select_rows`). `headline` states the science the leaderboard exists to show.
"""

from __future__ import annotations

import csv
import io
import json
import math

from .record import EvalResult, RunRecord
from .results import read_records

FORMATS = ("md", "csv", "json")


def select_rows(db: str | None = None, *, task: str | None = None, arch: str | None = None,
                group_id: str | None = None, latest: bool = True) -> list[RunRecord]:
    """Stored records, filtered; with `latest`, only the newest run of each (task_label, arch)."""
    where, params = [], []
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


def _aggregate(records: list[RunRecord]) -> list[dict]:
    """One entry per (task_label, eval, arch, run) with per-seed values, in a stable order."""
    groups: dict[tuple, dict] = {}
    for r in records:
        for name, ev in r.evals.items():
            key = (r.task_label, name, r.arch, r.run_id)
            g = groups.setdefault(key, {"task": r.task_label, "eval": name, "arch": r.arch,
                                        "params": r.params, "steps": r.steps, "wall_s": r.wall_s,
                                        "seeds": [], "mae": [], "kl": [], "positions": ev.positions,
                                        "n_sequences": ev.entropy_mae.n_sequences, "status": [],
                                        "primary": name == r.primary})
            g["seeds"].append(r.seed)
            g["mae"].append(ev.entropy_mae.mean)
            g["kl"].append(ev.kl.mean)
            g["status"].append(r.status)
    out = sorted(groups.values(), key=lambda g: (g["task"], _eval_order(g["eval"]), _mean(g["mae"])))
    for g in out:
        g["mae_mean"], g["kl_mean"] = _mean(g["mae"]), _mean(g["kl"])
        g["mae_ci"] = seed_interval(g["mae"])
    return out


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
    k = eval_length(name)
    return (0, k) if k is not None else (1, 0)


def _mean(xs: list) -> float:
    vals = [x for x in xs if x is not None and math.isfinite(x)]
    return sum(vals) / len(vals) if vals else float("nan")


def _fmt(x) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{x:.4f}" if abs(x) >= 1e-3 else f"{x:.2e}"


def _signed(x) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:+.2e}"


def _count(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k"


def markdown(records: list[RunRecord]) -> str:
    """The leaderboard table plus notes saying what every number is."""
    if not records:
        return "(no results in the store yet: run `bayesbench run --preset quick`)"
    agg = _aggregate(records)
    lines = ["| task | eval | arch | params | steps | wall (s) | seeds | entropy MAE (bits), mean [95% CI over seeds] "
             "| per seed | KL (bits), mean | x best |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    best: dict[tuple, float] = {}
    for g in agg:
        key = (g["task"], g["eval"])
        best[key] = min(best.get(key, math.inf), g["mae_mean"])
    for g in agg:
        ratio = g["mae_mean"] / best[(g["task"], g["eval"])] if best[(g["task"], g["eval"])] > 0 else float("nan")
        flag = "" if all(s == "ok" for s in g["status"]) else " (diverged member)"
        lo, hi = g["mae_ci"]
        ci = f" [{_fmt(max(lo, 0.0))}, {_fmt(hi)}]" if math.isfinite(lo) else ""
        lines.append(f"| {g['task']} | {g['eval']}{'' if not g['primary'] else ' (trained)'} | {g['arch']}{flag} | "
                     f"{_count(g['params'])} | {g['steps']} | {g['wall_s']:.0f} | {','.join(map(str, g['seeds']))} | "
                     f"{_fmt(g['mae_mean'])}{ci} | {' '.join(_fmt(x) for x in g['mae'])} | {_fmt(g['kl_mean'])} | "
                     f"{ratio:.1f}x |")
    notes = ["", "Metrics (bits, log base 2), each averaged over every (sequence, scored position) pair of the "
             "task's fixed evaluation set:",
             "- entropy MAE = mean |H(model) - H(Bayes)|; KL = mean KL(Bayes || model); 'per seed' lists each "
             "ensemble member in seed order; the interval is a t-interval of the mean over seeds (clipped at 0); "
             "'x best' = mean MAE / best mean MAE on that task and eval; wall = training wall time of the whole "
             "ensemble (all seeds at once).",
             "- scored positions:"]
    seen = set()
    for g in agg:
        if (g["task"], g["eval"]) not in seen:
            seen.add((g["task"], g["eval"]))
            notes.append(f"  - {g['task']} {g['eval']}: {g['positions']}; {g['n_sequences']} sequences")
    perm = [r for r in records if r.permutation is not None]
    if perm:
        notes.append("- HMM label-permutation check (SPEC.md 3.2; same sequences, hidden states relabelled, "
                     "posterior recomputed): MAE vs permuted MAE, difference with 95% CI:")
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


def render(records: list[RunRecord], fmt: str = "md") -> str:
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    if fmt == "md":
        return markdown(records)
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
