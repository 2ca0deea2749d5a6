"""Leaderboards: queries over the results store, as Markdown, CSV or JSON.

Every number says what it is (docs/science.md, "Metrics"), all in bits over the task's fixed
evaluation set, on the positions named in the table's notes:
- entropy_mae: mean over (sequence, scored position) of |H(model) - H(Bayes)|;
- entropy_mae_positional: mean over scored positions of |mean H(model) - mean H(Bayes)|, the
  means over sequences (the authors' bijection metric, Paper I Table 1);
- kl: mean KL(Bayes || model) (the authors' HMM metric).
The table ranks by one of them (`metric`) and names it in its header. Below each task and
evaluation, two computed floors: the uniform predictor and the best context-ignoring one
(`bayesbench.floors`). By default each (task, arch) shows its most recent run, one value per seed.
"""

from __future__ import annotations

import csv
import io
import json
import math

from .results import read_rows

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


def _ev_mean(ev: dict, metric: str) -> float:
    """One evaluation's mean of `metric` (NaN when the run predates that metric)."""
    m = ev.get(metric)
    return float("nan") if m is None or m.get("mean") is None else m["mean"]


def select_rows(db: str | None = None, *, task: str | None = None, arch: str | None = None,
                group_id: str | None = None, latest: bool = True) -> list[dict]:
    """Stored rows, filtered; with `latest`, only the newest run of each (task_label, arch)."""
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
    rows = read_rows(db, where=" AND ".join(where), params=tuple(params))
    if latest:
        newest: dict[tuple[str, str], str] = {}
        for r in rows:  # oldest first, so the last run seen wins
            newest[(r["task_label"], r["arch"])] = r["run_id"]
        rows = [r for r in rows if newest[(r["task_label"], r["arch"])] == r["run_id"]]
    return rows


def json_runs(rows: list[dict]) -> dict:
    """{"runs": [...]}: one flat record per (run, seed), for --json."""
    runs = []
    for r in rows:
        m = r["metrics"] or {}
        runs.append({
            "run_id": r["run_id"], "seed": r["seed"], "task": r["task"], "task_label": r["task_label"],
            "arch": r["arch"], "params": r["params"], "steps": r["steps"], "final_loss": r["final_loss"],
            "entropy_mae_bits": r["entropy_mae_bits"],
            "entropy_mae_ci": [r["entropy_mae_ci_low"], r["entropy_mae_ci_high"]],
            "kl_bits": r["kl_bits"], "kl_ci": [r["kl_ci_low"], r["kl_ci_high"]],
            "wall_s": r["wall_s"], "steps_per_s": r["steps_per_s"], "status": r["status"],
            "preset": r["preset"], "group_id": r["group_id"], "eval": m.get("primary"),
            "entropy_mae_positional_bits": r.get("entropy_mae_positional_bits"),
            "evals": {name: {"entropy_mae_bits": ev["entropy_mae"]["mean"], "kl_bits": ev["kl"]["mean"],
                             "entropy_mae_positional_bits": _ev_mean(ev, "entropy_mae_positional"),
                             "positions": ev["positions"], "floors": ev.get("floors")}
                      for name, ev in (m.get("evals") or {}).items()},
            "permutation": m.get("permutation"), "created_at": r["created_at"],
        })
    return {"runs": runs}


def _aggregate(rows: list[dict], metric: str = "entropy_mae") -> list[dict]:
    """One entry per (task_label, eval, arch, run) with per-seed values of every metric, ordered
    by task, eval and the mean of `metric`."""
    groups: dict[tuple, dict] = {}
    for r in rows:
        evals = (r["metrics"] or {}).get("evals") or {}
        for name, ev in evals.items():
            key = (r["task_label"], name, r["arch"], r["run_id"])
            g = groups.setdefault(key, {"task": r["task_label"], "eval": name, "arch": r["arch"],
                                        "params": r["params"], "steps": r["steps"], "wall_s": r["wall_s"],
                                        "seeds": [], "values": {m: [] for m in METRICS},
                                        "positions": ev["positions"], "floors": ev.get("floors"),
                                        "n_sequences": ev["entropy_mae"]["n_sequences"], "status": [],
                                        "primary": name == r["metrics"].get("primary")})
            g["seeds"].append(r["seed"])
            for m in METRICS:
                g["values"][m].append(_ev_mean(ev, m))
            g["floors"] = g["floors"] or ev.get("floors")
            g["status"].append(r["status"])
    out = sorted(groups.values(), key=lambda g: (g["task"], _eval_order(g["eval"]), _sort_key(_mean(g["values"][metric]))))
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


def markdown(rows: list[dict], metric: str = "entropy_mae") -> str:
    """The leaderboard table ranked by `metric`, floor rows per task and evaluation, and notes
    saying what every number is."""
    check_metric(metric)
    if not rows:
        return "(no results in the store yet: run `bayesbench run --preset quick`)"
    agg = _aggregate(rows, metric)
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
                     f"{_count(g['params'])} | {g['steps']} | {g['wall_s']:.0f} | {','.join(map(str, g['seeds']))} | "
                     f"{_fmt(g['means'][metric])}{ci} | {' '.join(_fmt(x) for x in g['values'][metric])} | "
                     + " | ".join(_fmt(g["means"][m]) for m in others) + f" | {ratio:.1f}x |")
        last = i + 1 == len(agg) or (agg[i + 1]["task"], agg[i + 1]["eval"]) != key
        if last:
            lines += _floor_lines(agg, key, metric, others)
    notes = ["", f"Ranked by **{SHORT[metric]}** = {METRICS[metric]}. Every metric in bits (log base 2) over the "
             "task's fixed evaluation set (docs/science.md, \"Metrics\"):"]
    notes += [f"- {SHORT[m]} = {METRICS[m]}" for m in METRICS]
    notes += ["- 'per seed' lists each ensemble member in seed order; the interval is a t-interval of the mean over "
              "seeds (clipped at 0); 'x best' = mean / best mean on that task and eval (floors excluded); wall = "
              "training wall time of the whole ensemble (all seeds at once).",
              "- floor rows (computed, not trained, on the same sequences): uniform = 1/C for every class; marginal = "
              "the best predictor that ignores the context (the mean posterior at each position, estimated from an "
              "independent sample). A model at a floor has learned nothing usable from the context.",
              "- scored positions:"]
    seen = set()
    for g in agg:
        if (g["task"], g["eval"]) not in seen:
            seen.add((g["task"], g["eval"]))
            notes.append(f"  - {g['task']} {g['eval']}: {g['positions']}; {g['n_sequences']} sequences")
    perm = [r for r in rows if (r["metrics"] or {}).get("permutation")]
    if perm:
        notes.append("- HMM label-permutation check (docs/science.md, \"HMM state tracking\"; same sequences, hidden "
                     "states relabelled, posterior recomputed): entropy MAE vs permuted entropy MAE, difference with "
                     "95% CI:")
        for r in perm:
            p = r["metrics"]["permutation"]
            d = p["difference"]
            notes.append(f"  - {r['task_label']} {p['eval']} {r['arch']} seed {r['seed']}: {_fmt(p['entropy_mae'])} vs "
                         f"{_fmt(p['entropy_mae_permuted'])}, difference {_signed(d['mean'])} "
                         f"[{_signed(d['ci_low'])}, {_signed(d['ci_high'])}]")
    bad = [r for r in rows if r["status"] != "ok"]
    for r in bad:
        notes.append(f"- {r['task_label']} {r['arch']} seed {r['seed']}: {r['status']}")
    return "\n".join(lines + notes)


def _floor_lines(agg: list[dict], key: tuple, metric: str, others: list[str]) -> list[str]:
    """The floor rows of one (task, eval), from the first run that stored them."""
    floors = next((g["floors"] for g in agg if (g["task"], g["eval"]) == key and g["floors"]), None)
    if not floors:
        return []
    out = []
    for name in ("uniform", "marginal"):
        f = floors.get(name)
        if not f:
            continue
        val = lambda m: f[m]["mean"] if m in f else None  # noqa: E731
        out.append(f"| {key[0]} | {key[1]} | *{name} (floor)* | - | - | - | - | {_fmt(val(metric))} | - | "
                   + " | ".join(_fmt(val(m)) for m in others) + " | - |")
    return out


def to_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["task", "eval", "arch", "params", "steps", "wall_s", "seed", "entropy_mae_bits",
                "entropy_mae_positional_bits", "kl_bits", "n_sequences", "positions", "status", "run_id"])
    for r in rows:
        for name, ev in ((r["metrics"] or {}).get("evals") or {}).items():
            w.writerow([r["task_label"], name, r["arch"], r["params"], r["steps"], r["wall_s"], r["seed"],
                        ev["entropy_mae"]["mean"], _ev_mean(ev, "entropy_mae_positional"), ev["kl"]["mean"],
                        ev["entropy_mae"]["n_sequences"], ev["positions"], r["status"], r["run_id"]])
    return buf.getvalue()


def render(rows: list[dict], fmt: str = "md", metric: str = "entropy_mae") -> str:
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    check_metric(metric)
    if fmt == "md":
        return markdown(rows, metric)
    if fmt == "csv":
        return to_csv(rows).rstrip("\n")
    return json.dumps(json_runs(rows), indent=2)
