"""Leaderboards: queries over the results store, as Markdown, CSV or JSON.

Every number says what it is: entropy MAE = mean over (sequence, scored position) of
|H(model) - H(Bayes)| in bits; KL = mean KL(Bayes || model) in bits; both over the task's
fixed evaluation set, on the positions named in the table's notes. By default a row pools every
stored seed of one (task, arch, configuration) across runs (the newest row of a seed run twice),
with the number of seeds shown; `latest=True` keeps only the newest run of each (task, arch),
`per_run=True` gives one row per run.
"""

from __future__ import annotations

import csv
import io
import json
import math

from .results import read_rows

FORMATS = ("md", "csv", "json")


def select_rows(db: str | None = None, *, task: str | None = None, arch: str | None = None,
                group_id: str | None = None, latest: bool = False) -> list[dict]:
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
            "evals": {name: {"entropy_mae_bits": ev["entropy_mae"]["mean"], "kl_bits": ev["kl"]["mean"],
                             "positions": ev["positions"]}
                      for name, ev in (m.get("evals") or {}).items()},
            "permutation": m.get("permutation"), "created_at": r["created_at"],
        })
    return {"runs": runs}


def config_key(row: dict) -> str:
    """What must match for two runs' seeds to be pooled in one leaderboard row: the task's
    configuration, the model's arguments (an outside model's source too), training, position
    range and evaluation (not the seeds, the checkpoint path or the run)."""
    cfg = row["config"] or {}
    model = cfg.get("model") or {}
    return json.dumps({"task": row["task_config"], "model_args": cfg.get("model_args"), "spec": model.get("spec"),
                       "train": cfg.get("train"), "max_len": cfg.get("max_len"),
                       "eval_lengths": cfg.get("eval_lengths"), "eval_sequences": cfg.get("eval_sequences")},
                      sort_keys=True, default=str)


def _aggregate(rows: list[dict], per_run: bool = False) -> list[dict]:
    """One entry per (task_label, eval, arch, configuration) pooling the seeds of every run (a
    seed stored twice counts once, its newest row), or per (..., run) with `per_run`; in a stable order."""
    groups: dict[tuple, dict] = {}
    for r in rows:  # oldest first: a newer row of the same seed replaces the older one
        evals = (r["metrics"] or {}).get("evals") or {}
        for name, ev in evals.items():
            key = (r["task_label"], name, r["arch"], r["run_id"] if per_run else config_key(r))
            g = groups.setdefault(key, {"task": r["task_label"], "eval": name, "arch": r["arch"],
                                        "params": r["params"], "steps": r["steps"], "runs": {},
                                        "by_seed": {}, "positions": ev["positions"],
                                        "n_sequences": ev["entropy_mae"]["n_sequences"],
                                        "primary": name == r["metrics"].get("primary")})
            g["runs"][r["run_id"]] = r["wall_s"]
            g["by_seed"][r["seed"]] = (ev["entropy_mae"]["mean"], ev["kl"]["mean"], r["status"])
    for g in groups.values():
        seeds = sorted(g.pop("by_seed").items())
        g["seeds"] = [s for s, _ in seeds]
        g["mae"], g["kl"], g["status"] = ([v[i] for _, v in seeds] for i in range(3))
        walls = [w for w in g["runs"].values() if w is not None]
        g["wall_s"] = sum(walls) / len(walls) if walls else float("nan")
        g["n_runs"] = len(g.pop("runs"))
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


def _wall(x) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.0f}"


def _seeds(g: dict) -> str:
    runs = f" in {g['n_runs']} runs" if g["n_runs"] > 1 else ""
    return f"{len(g['seeds'])}{runs}: {','.join(map(str, g['seeds']))}"


def _count(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k"


def markdown(rows: list[dict], per_run: bool = False) -> str:
    """The leaderboard table plus notes saying what every number is."""
    if not rows:
        return "(no results in the store yet: run `bayesbench run --preset quick`)"
    agg = _aggregate(rows, per_run)
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
                     f"{_count(g['params'])} | {g['steps']} | {_wall(g['wall_s'])} | {_seeds(g)} | "
                     f"{_fmt(g['mae_mean'])}{ci} | {' '.join(_fmt(x) for x in g['mae'])} | {_fmt(g['kl_mean'])} | "
                     f"{ratio:.1f}x |")
    notes = ["", "Metrics (bits, log base 2), each averaged over every (sequence, scored position) pair of the "
             "task's fixed evaluation set:",
             "- entropy MAE = mean |H(model) - H(Bayes)|; KL = mean KL(Bayes || model); 'per seed' lists each "
             "ensemble member in seed order; the interval is a t-interval of the mean over seeds (clipped at 0); "
             "'x best' = mean MAE / best mean MAE on that task and eval; wall = training wall time of the whole "
             "ensemble (all seeds at once; the mean over runs when a row pools several); 'seeds' = how many "
             "seeds the row pools (every stored run of the same task, arch and configuration; a seed run twice "
             "counts once, its newest run), then which.",
             "- scored positions:"]
    seen = set()
    for g in agg:
        if (g["task"], g["eval"]) not in seen:
            seen.add((g["task"], g["eval"]))
            notes.append(f"  - {g['task']} {g['eval']}: {g['positions']}; {g['n_sequences']} sequences")
    perm = [r for r in rows if (r["metrics"] or {}).get("permutation")]
    if perm:
        notes.append("- HMM label-permutation check (SPEC.md 3.2; same sequences, hidden states relabelled, "
                     "posterior recomputed): MAE vs permuted MAE, difference with 95% CI:")
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


def to_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["task", "eval", "arch", "params", "steps", "wall_s", "seed", "entropy_mae_bits", "kl_bits",
                "n_sequences", "positions", "status", "run_id"])
    for r in rows:
        for name, ev in ((r["metrics"] or {}).get("evals") or {}).items():
            w.writerow([r["task_label"], name, r["arch"], r["params"], r["steps"], r["wall_s"], r["seed"],
                        ev["entropy_mae"]["mean"], ev["kl"]["mean"], ev["entropy_mae"]["n_sequences"],
                        ev["positions"], r["status"], r["run_id"]])
    return buf.getvalue()


def render(rows: list[dict], fmt: str = "md", per_run: bool = False) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    if fmt == "md":
        return markdown(rows, per_run)
    if fmt == "csv":
        return to_csv(rows).rstrip("\n")
    return json.dumps(json_runs(rows), indent=2)
