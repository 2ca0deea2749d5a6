"""The measured answer of the continuous tunnels (docs/leaderboard.md, "Continuous tunnels";
docs/science.md, "What the continuous tunnels measured"): per position and per architecture, from
the checkpoints of a tuned quick run.

    bayesbench run --tasks linreg --archs transformer lstm gru mamba linear-attention mlp mlp-prefix \\
        --tune --tune-args selection_seeds=1 --seeds 3 --jobs 2 --db cont.db --runs-dir runs
    (the same for mixreg and kalman)
    PYTHONPATH=. python scripts/continuous_answer.py --db cont.db --runs-dir runs --measured 2026-12-07 \\
        --out docs/data/continuous_quick_2026-12-07.json --figures docs/img

The store keeps each member's KL and entropy error per position; the questions of the tunnels
need more, so this script reloads every reported run (not the tuning's selection runs) from its
final checkpoint (`checkpoint.load_result`), predicts the store's own evaluation set
(`scoring.evaluate.eval_set`, same size, same seed) and computes per member and position:

- KL(Bayes || model), the entropy error |h(model) - h(Bayes)|, the NLL regret on the sampled y
  and Garg et al.'s excess squared error of the mean / d (`oracle.gaussian_bits.ContinuousValues`,
  the metric table's own definitions); the mean of each over the scored positions must equal the
  store's number for that member (checked here: the run stops if it does not);
- for a Gaussian head against a Gaussian Bayes predictive (linreg, kalman) the KL split in two:
  the part a model with the exact mean would keep (its variance's: 1/2 (ln(v_q/v_p) + v_p/v_q - 1)
  / ln 2) and the rest (its mean's: 1/2 (m_p - m_q)^2 / v_q / ln 2). "Matches the mean but not the
  variance" is a small mean part beside a large variance part;
- on mixreg, KL(Bayes || the Gaussian with Bayes's mean and variance): the M-projection, the
  smallest KL any single Gaussian can reach at that position. A model below it at a position
  represents more of the predictive than one Gaussian can (its modes, its tails); one at or above
  it represents at most a mean and a variance;
- the same numbers for the tunnel's reference predictors (`ContinuousTask.floor_predictives`:
  the prior predictive; linreg's least squares and ridge with a prior 3x too narrow).

Every mean over positions comes with its 95% t-interval over the reported seeds (clipped at 0
where the quantity cannot be negative). Writes --out (JSON: the numbers docs/leaderboard.md and
docs/science.md quote, checked by tests/test_docs_numbers.py) and one figure per tunnel in
--figures (continuous_<task>.png).
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import sys

import torch

from bayesbench.report.summary import rounded, seed_ci

LN2 = math.log(2.0)
NONNEGATIVE = {"kl", "entropy_error", "excess_sq", "kl_mean_part", "kl_variance_part", "unimodal_bound"}


def _values(task, batch, params: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per (sequence, position) bits of one predictive `params` [N, L, 3M] against the batch's
    posterior: the four metrics, and the KL split where both are single Gaussians."""
    from bayesbench.models.heads import split_layout
    from bayesbench.oracle.gaussian_bits import ContinuousValues

    p, mask = batch.posterior.double(), batch.mask
    v = ContinuousValues.of(p, params.double(), batch.targets, mask, getattr(task, "error_dim", 1))
    out = {"kl": v.kl, "entropy_error": (v.h_model - v.h_bayes).abs(), "nll_regret": v.nll_model - v.nll_bayes,
           "excess_sq": v.excess_sq}
    _, bm, bv = split_layout(p)
    qw, qm, qv = split_layout(params.double())
    if bm.shape[-1] == 1 and qm.shape[-1] == 1:
        bm, bv, qm, qv = bm[..., 0], bv[..., 0], qm[..., 0], qv[..., 0]
        var_part = 0.5 * (torch.log(qv / bv) + bv / qv - 1.0) / LN2
        mean_part = 0.5 * (bm - qm) ** 2 / qv / LN2
        out["kl_variance_part"] = torch.where(mask, var_part, torch.zeros_like(var_part))
        out["kl_mean_part"] = torch.where(mask, mean_part, torch.zeros_like(mean_part))
    return out


def unimodal_bound(task, batch) -> torch.Tensor:
    """KL(Bayes || N(Bayes's mean, Bayes's variance)) per (sequence, position): the least KL of
    any single Gaussian (the M-projection of a density onto the Gaussians matches its moments)."""
    from bayesbench.models.heads import gaussian_layout, split_layout
    from bayesbench.oracle.gaussian_bits import ContinuousValues

    p = batch.posterior.double()
    w, m, v = split_layout(p)
    w = w / w.sum(-1, keepdim=True)
    mean = (w * m).sum(-1)
    var = (w * (v + m * m)).sum(-1) - mean * mean
    var = torch.where(batch.mask, var, torch.ones_like(var))
    q = gaussian_layout(mean, var)
    return ContinuousValues.of(p, q, batch.targets, batch.mask, getattr(task, "error_dim", 1)).kl


def _position_means(values: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor) -> list[float]:
    from bayesbench.scoring.metrics import per_position

    return [float(x) for x in per_position(values, mask)[positions]]


def _mean(values: torch.Tensor, mask: torch.Tensor) -> float:
    """The store's mean: over sequences per position, then over the scored positions."""
    from bayesbench.scoring.metrics import per_position

    return float(per_position(values, mask)[mask.any(0)].mean())


def _checkpoints(runs_dir: str) -> list[str]:
    return sorted(p for p in glob.glob(os.path.join(runs_dir, "**", "checkpoint.pt"), recursive=True)
                  if "-tune-selection-" not in p)


def measure(db: str, runs_dir: str, *, say=print) -> dict:
    """Every reported continuous run's numbers (see the module docstring), checked against the store."""
    from bayesbench.report.selection import select_rows
    from bayesbench.scoring.evaluate import eval_set as make_eval_set
    from bayesbench.scoring.evaluate import evaluation_tasks, predict
    from bayesbench.training.checkpoint import load_result

    records = {(r.run_id, r.seed): r for r in select_rows(db)}  # the reported rows (no selection rows)
    tasks: dict[str, dict] = {}
    for path in _checkpoints(runs_dir):
        res = load_result(path)
        found = [records.get((res.run_id, s)) for s in res.seeds]
        rows = [r for r in found if r is not None]
        if len(rows) < len(found):
            say(f"skipped {path}: run {res.run_id} is not a reported run of {db} (unfinished, a tuning's selection, "
                "or another store)")
            continue
        first = rows[0]
        if first.task not in ("linreg", "mixreg", "kalman"):
            continue
        from bayesbench.tasks import task_from_config

        task = task_from_config(first.task_config)
        lengths = tuple(first.config.get("eval_lengths") or ())  # as the run scored them (kalman: K, 1.5K, 2.5K)
        entry = tasks.setdefault(first.task, {"label": first.task_label, "evals": {}})
        res.model.eval()
        for name, t in evaluation_tasks(task, lengths).items():
            n = first.evals[name].scores["kl"].n_sequences  # type: ignore[union-attr]
            batch = make_eval_set(t, n)
            with torch.no_grad():
                pred = predict(res.model, batch)
            ev = entry["evals"].setdefault(name, {"n_sequences": n, "archs": {}})
            mask = batch.mask
            positions = mask.any(0).nonzero().flatten()
            ev["positions"] = positions.tolist()
            if "floors" not in ev:
                ev["floors"] = {}
                for fname, q in getattr(t, "floor_predictives")(batch).items():
                    vals = _values(t, batch, q)
                    ev["floors"][fname] = {k: _mean(v, mask) for k, v in vals.items()} | {
                        "curves": {k: _position_means(v, mask, positions) for k, v in vals.items()}}
                if first.task == "mixreg":
                    bound = unimodal_bound(t, batch)  # one per evaluation set, kept for every run's seeds
                    ev["unimodal_bound"] = {"mean": _mean(bound, mask), "values": bound,
                                            "curve": _position_means(bound, mask, positions)}
            arch = ev["archs"].setdefault(first.arch, {
                "params": first.params, "state_floats": (first.config.get("state") or {}).get("floats"),
                "lr": first.config.get("train", {}).get("lr"), "steps": first.steps, "seeds": [], "per_seed": {},
                "curves_per_seed": {}, "run_ids": []})
            arch["run_ids"].append(res.run_id)
            for e, (seed, rec) in enumerate(zip(res.seeds, rows)):
                vals = _values(t, batch, pred[e])
                stored = rec.evals[name].scores["kl"].mean  # type: ignore[union-attr]
                mine = _mean(vals["kl"], mask)
                if not math.isclose(mine, stored, rel_tol=1e-6, abs_tol=1e-9):
                    raise SystemExit(f"continuous_answer.py: {path} seed {seed} eval {name}: KL recomputed "
                                     f"{mine!r} != stored {stored!r}: the checkpoint and the store disagree")
                if first.task == "mixreg":
                    vals["below_unimodal"] = ((vals["kl"] < ev["unimodal_bound"]["values"]) & mask).double()
                arch["seeds"].append(seed)
                for k, v in vals.items():
                    arch["per_seed"].setdefault(k, []).append(_mean(v, mask))
                    arch["curves_per_seed"].setdefault(k, []).append(_position_means(v, mask, positions))
        say(f"{first.task_label} / {first.arch}: seeds {res.seeds} from {path}")
    for entry in tasks.values():
        for ev in entry["evals"].values():
            ev.get("unimodal_bound", {}).pop("values", None)  # a tensor per (sequence, position): not summarised
            for arch in ev["archs"].values():
                arch["mean"] = {k: sum(v) / len(v) for k, v in arch["per_seed"].items()}
                arch["ci"] = {k: seed_ci(v, k in NONNEGATIVE) for k, v in arch["per_seed"].items()}
                per_seed = arch.pop("curves_per_seed")
                arch["kl_curve_per_seed"] = per_seed["kl"]
                arch["curves"] = {k: [sum(c[i] for c in v) / len(v) for i in range(len(v[0]))]
                                  for k, v in per_seed.items()}
    return tasks


def _shown(v: float) -> float:
    """A value on a log axis: exact zeros (the first prediction, where every predictor is the prior) left out."""
    return v if v > 1e-12 else math.nan


def figure(task: str, entry: dict, path: str) -> str:
    """Per position: KL, entropy error and excess squared error / d of every architecture (mean
    over seeds) beside the reference predictors; mixreg's KL panel adds the unimodal bound,
    kalman a fourth panel, the KL at the longest evaluation with the trained K marked."""
    from bayesbench.figures import heading, save, subplots, unique_legend
    from bayesbench.report.plots import _colors

    names = list(entry["evals"])
    primary = entry["evals"][names[0]]
    panels = [("kl", "KL(Bayes || model) (bits)"), ("entropy_error", "|h(model) - h(Bayes)| (bits)"),
              ("excess_sq", "(mean - Bayes mean)^2 / d (not bits)")]
    longest = names[-1] if len(names) > 1 else None
    n_axes = len(panels) + (longest is not None)
    fig, axes = subplots(1, n_axes, figsize=(5.2 * n_axes, 4.6))
    x = list(range(1, len(primary["positions"]) + 1))
    colors = _colors()  # the package's figures' cycle (bayesbench.report.plots)
    for ax, (key, ylabel) in zip(axes, panels):
        for i, (arch, a) in enumerate(sorted(primary["archs"].items())):
            ax.plot(x, [_shown(v) for v in a["curves"][key]], color=colors[i % len(colors)], lw=1.6,
                    label=f"{arch} ({len(a['seeds'])} seeds, mean)")
        for fname, style in (("prior", ":"), ("least_squares", "--"), ("ridge", "-."), ("dense_prior", "-.")):
            if fname in primary["floors"]:
                ax.plot(x, [_shown(v) for v in primary["floors"][fname]["curves"][key]], color="0.35", ls=style,
                        lw=1.2, label=FLOOR_NAMES[fname])
        if key == "kl" and "unimodal_bound" in primary:
            ax.plot(x, [_shown(v) for v in primary["unimodal_bound"]["curve"]], color="k", ls="--", lw=1.4,
                    label="best single Gaussian (moment-matched Bayes)")
        ax.set(yscale="log", xlabel="scored position (1 = first prediction)", ylabel=ylabel)
        ax.grid(alpha=0.3)
    if longest is not None:
        ax = axes[-1]
        ev = entry["evals"][longest]
        xl = list(range(1, len(ev["positions"]) + 1))
        for i, (arch, a) in enumerate(sorted(ev["archs"].items())):
            ax.plot(xl, [_shown(v) for v in a["curves"]["kl"]], color=colors[i % len(colors)], lw=1.6)
        ax.plot(xl, [_shown(v) for v in ev["floors"]["prior"]["curves"]["kl"]], color="0.35", ls=":", lw=1.2)
        ax.axvline(len(x), color="tab:gray", ls=":", lw=1.5, label=f"trained length ({names[0]})")
        ax.set(yscale="log", xlabel="scored position", ylabel="KL(Bayes || model) (bits)",
               title=f"eval {longest}: length generalisation")
        ax.grid(alpha=0.3)
    unique_legend(fig, where="outside lower center")
    first = next(iter(primary["archs"].values()))
    heading(fig, f"{entry['label']}, eval {names[0]}: per-position error against the exact posterior",
            f"{primary['n_sequences']} sequences; {first['steps']} steps, tuned rate, "
            f"{len(first['seeds'])} seeds per architecture")
    return save(fig, path)


PLATEAU_STEPS = (1000, 2000, 5000, 10000, 15000, 20000, 25000)


def plateau(db: str) -> list[dict]:
    """Each stored run's learning curve (KL, excess squared error / d on the curve set) at
    `PLATEAU_STEPS` (those it measured), with its task, arch, rate, seed and steps."""
    from bayesbench.report.selection import select_rows

    out = []
    for r in select_rows(db):
        lc = r.learning_curve
        if lc is None:
            continue
        at = {s: i for i, s in enumerate(lc.step)}
        out.append({"task": r.task_label, "arch": r.arch, "lr": r.config.get("train", {}).get("lr"), "seed": r.seed,
                    "steps": r.steps, "curve_sequences": lc.n_sequences,
                    "kl": {str(s): lc.values["kl"][at[s]] for s in PLATEAU_STEPS if s in at},
                    "excess_sq": {str(s): lc.values["excess_sq"][at[s]] for s in PLATEAU_STEPS if s in at},
                    "prior": {k: lc.uniform.get(k) for k in ("kl", "excess_sq")}})
    return out


FLOOR_NAMES = {"prior": "prior predictive (floor)", "least_squares": "least squares",
               "ridge": "ridge, prior 3x too narrow", "dense_prior": "Bayes under the dense component alone"}


def _bits(x) -> str:
    from bayesbench.report.leaderboard import fmt_bits

    return fmt_bits(x)


def _with_ci(a: dict, key: str) -> str:
    lo, hi = a["ci"][key]
    return f"{_bits(a['mean'][key])} [{_bits(lo)}, {_bits(hi)}]"


def render(doc: dict) -> str:
    """The Markdown tables docs/leaderboard.md quotes, from the summary alone (tests/test_docs_numbers.py
    renders them again and compares): per tunnel, its primary evaluation ranked by KL; kalman's
    KL at every evaluated length."""
    out = []
    order = ("linreg", "mixreg", "kalman")
    for task in sorted(doc["tasks"], key=lambda t: (order.index(t) if t in order else len(order), t)):
        entry = doc["tasks"][task]
        names = list(entry["evals"])
        ev = entry["evals"][names[0]]
        split = task != "mixreg"
        last = ["KL: mean part", "KL: variance part"] if split else []
        head = ["arch", "params", "state (floats)", "rate", "KL (bits), mean [95% CI over seeds]", "per seed",
                "entropy error", "NLL regret", "excess sq. / d"] + last
        out += [f"**{entry['label']}**, eval {names[0]} ({ev['n_sequences']} sequences):", "",
                "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for arch, a in sorted(ev["archs"].items(), key=lambda kv: kv[1]["mean"]["kl"]):
            cells = [arch, f"{a['params']:,}", "-" if a["state_floats"] is None else f"{a['state_floats']:,}",
                     f"{a['lr']:g}", _with_ci(a, "kl"), " ".join(_bits(v) for v in a["per_seed"]["kl"]),
                     _bits(a["mean"]["entropy_error"]), _bits(a["mean"]["nll_regret"]), _bits(a["mean"]["excess_sq"])]
            cells += [_bits(a["mean"]["kl_mean_part"]), _bits(a["mean"]["kl_variance_part"])] if split else []
            out.append("| " + " | ".join(cells) + " |")
        for fname, f in ev["floors"].items():
            cells = [f"*{FLOOR_NAMES.get(fname, fname)}*", "-", "-", "-", _bits(f["kl"]), "-",
                     _bits(f["entropy_error"]), _bits(f["nll_regret"]), _bits(f["excess_sq"])]
            cells += [_bits(f["kl_mean_part"]), _bits(f["kl_variance_part"])] if split else []
            out.append("| " + " | ".join(cells) + " |")
        if "unimodal_bound" in ev:
            out.append("| *best single Gaussian (Bayes's mean and variance)* | - | - | - | "
                       f"{_bits(ev['unimodal_bound']['mean'])} | - | - | - | 0 |")
        out.append("")
        if "unimodal_bound" in ev:
            k = len(ev["unimodal_bound"]["curve"])
            out += [f"**{entry['label']}**, KL (bits) at each scored position (k - 1 pairs seen; mean over sequences, "
                    "then over seeds) against the best single Gaussian's:", "",
                    "| k | " + " | ".join(str(i + 1) for i in range(k)) + " |", "|" + "---|" * (k + 1),
                    "| *best single Gaussian* | " + " | ".join(_bits(v) for v in ev["unimodal_bound"]["curve"]) + " |"]
            for arch in sorted(ev["archs"], key=lambda a: ev["archs"][a]["mean"]["kl"]):
                curve = ev["archs"][arch]["curves"]["kl"]
                bound = ev["unimodal_bound"]["curve"]
                out.append(f"| {arch} | " + " | ".join(f"**{_bits(v)}**" if v < b else _bits(v)
                                                       for v, b in zip(curve, bound)) + " |")
            out += ["", "In bold: below the best single Gaussian at that position.", ""]
        if len(names) > 1:
            head = ["arch"] + [f"KL at {n}" + (" (trained)" if i == 0 else "") for i, n in enumerate(names)]
            out += [f"**{entry['label']}**, KL (bits) by evaluated length, mean [95% CI over seeds]:", "",
                    "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            for arch in sorted(ev["archs"], key=lambda a: ev["archs"][a]["mean"]["kl"]):
                out.append("| " + " | ".join([arch] + [_with_ci(entry["evals"][n]["archs"][arch], "kl") for n in names])
                           + " |")
            out.append("| " + " | ".join(["*prior predictive (floor)*"]
                                         + [_bits(entry["evals"][n]["floors"]["prior"]["kl"]) for n in names]) + " |")
            out.append("")
    for run in doc.get("plateau", []):
        steps = list(run["kl"])
        out += [f"**{run['task']}**, {run['arch']} at rate {run['lr']:g}, seed {run['seed']}, {run['steps']:,} steps: "
                f"the learning curve ({run['curve_sequences']} sequences of the curve set):", "",
                "| step | " + " | ".join(f"{int(s):,}" for s in steps) + " |", "|" + "---|" * (len(steps) + 1),
                "| KL (bits) | " + " | ".join(_bits(run["kl"][s]) for s in steps) + " |",
                "| excess sq. / d | " + " | ".join(_bits(run["excess_sq"][s]) for s in steps) + " |", "",
                f"The prior predictive on the same sequences: KL {_bits(run['prior']['kl'])} bits, excess sq. / d "
                f"{_bits(run['prior']['excess_sq'])}.", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--render", default="", help="print the Markdown tables of this summary and stop")
    p.add_argument("--db", help="the store of the tuned continuous run")
    p.add_argument("--runs-dir", help="its run directories (the reported runs' checkpoints)")
    p.add_argument("--measured", help="when the run was made (YYYY-MM-DD)")
    p.add_argument("--command", default="bayesbench run --tasks <t> --archs transformer lstm gru mamba "
                   "linear-attention mlp mlp-prefix --tune --tune-args selection_seeds=1 --seeds 3 --jobs 2")
    p.add_argument("--out", help="the JSON summary to write")
    p.add_argument("--plateau", default="", help="a store of long single runs (the transformer's plateau on linreg): "
                   "their learning curves are added to the summary")
    p.add_argument("--figures", default="", help="folder for continuous_<task>.png (default: none)")
    args = p.parse_args(argv)
    if args.render:
        with open(args.render) as f:
            print(render(json.load(f)))
        return 0
    missing = [f"--{n.replace('_', '-')}" for n in ("db", "runs_dir", "measured", "out") if not getattr(args, n)]
    if missing:
        p.error(f"{', '.join(missing)} required (or --render SUMMARY)")
    torch.set_num_threads(1)
    if not os.path.isdir(args.runs_dir):
        print(f"continuous_answer.py: --runs-dir {args.runs_dir}: no such folder", file=sys.stderr)
        return 2
    tasks = measure(args.db, args.runs_dir, say=lambda s: print(s, file=sys.stderr))
    if not tasks:
        print(f"continuous_answer.py: no finished continuous run in {args.runs_dir} is in {args.db}", file=sys.stderr)
        return 2
    import bayesbench

    doc = {"measured": args.measured, "command": args.command, "written_by": "scripts/continuous_answer.py",
           "bayesbench": bayesbench.__version__, "tasks": tasks}
    if args.plateau:
        doc["plateau"] = plateau(args.plateau)
    with open(args.out, "w") as f:  # compact, 8 significant digits: a summary kept under 200 kB
        json.dump(rounded(doc), f)
        f.write("\n")
    print(f"wrote {args.out}")
    if args.figures:
        for task, entry in tasks.items():
            print(f"wrote {figure(task, entry, os.path.join(args.figures, f'continuous_{task}.png'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
