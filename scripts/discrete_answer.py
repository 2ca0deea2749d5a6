"""The measured answer of the discrete tunnels of issue 42 (docs/leaderboard.md, "Discrete
tunnels, tuned"; docs/science.md, "What the discrete tunnels measured"), from a tuned quick run:

    for t in vomc mess3 hmm_mixture markov-k recurrence; do
      bayesbench run --tasks $t --archs transformer lstm mamba mlp --tune --tune-args selection_seeds=1 \\
          --seeds 3 --jobs 2 --db disc.db --runs-dir runs
    done
    bayesbench run --tasks vomc --archs transformer --model-args n_layer=1 --tune --tune-args selection_seeds=1 \\
        --seeds 3 --jobs 2 --db disc.db --runs-dir runs          # the one-layer transformer (Zhou et al.)
    bayesbench run --tasks vomc --archs transformer --model-args n_layer=1 d_ffn=388 --tune \\
        --tune-args selection_seeds=1 --seeds 3 --jobs 2 --db disc.db --runs-dir runs   # ... at two layers' params
    bayesbench run --tasks recurrence --archs transformer mamba --steps 20000 --train-args lr=0.002 \\
        --seeds 3 --jobs 2 --db long.db --runs-dir runs          # the recurrence, ten times the steps
    for t in mess3 hmm_mixture; do
      bayesbench run --tasks $t --archs mamba2 deltanet gated-deltanet gla retnet rwkv7 hyena based \\
          sliding-window hybrid gru linear-attention mlp-prefix --seeds 3 --jobs 2 --db zoo.db --runs-dir runs
    done
    PYTHONPATH=. python scripts/discrete_answer.py --db disc.db --long-db long.db --zoo-db zoo.db \\
        --measured 2026-12-07 \\
        --out docs/data/discrete_quick_2026-12-07.json --figures docs/img

What it reads and adds, per tunnel and architecture (an architecture built with `--model-args`
is its own entry, e.g. "transformer n_layer=1"):

- from the store (the reported rows, never a tuning's selection rows): each seed's KL(Bayes ||
  model) and entropy error on the primary evaluation, their per-position curves, the rate the
  tuning chose, params and state, and the tunnel's two floors (uniform; the best predictor that
  ignores the context, "marginal");
- **in-context n-gram references** on the same evaluation set (`scoring.evaluate.eval_set`, same
  size and seed): the order-k count predictor (x_{t+1} | the last k symbols, Dirichlet(1/2)
  counts of this sequence alone; `oracle.markov_k_predictive`, k = 1, 2, 3, and the urn, k = 0,
  `oracle.ctw_predictive` at depth 0) and, on `vomc`, context-tree weighting at depth 1 (the
  Bayes mixture of a prior cut one level short). A model below every fixed-order reference does
  more than count one order: on vomc that is the criterion for "learns CTW's predictive" (the
  Bayes predictive is a mixture over trees of depth <= 2, which no single order computes);
- **the belief probe** (`dynamics.belief_probe`, docs/belief_probe.md) on every reported run of a
  tunnel with a belief state (mess3, hmm_mixture): held-out R^2 of every residual stream, its
  shuffle control and its gain over the embed stream, per seed; and across the members of every
  architecture, the rank correlation of the best stream's gain with the member's KL;
- the probe reads each run's checkpoint where its rows recorded it; the KL and its curves are
  the store's;
- from `--long-db`, the reported recurrence runs of a longer training (the same task and rate):
  each seed's KL and entropy error and the mean learning curve.
- from `--zoo-db`, the other architectures of the registry trained on a tunnel with a belief
  state at the preset's fixed rate (untuned: shown apart from the tuned ones), probed the same
  way, with the rank correlation over every architecture, tuned and untuned, and their figure
  discrete_belief_<task>_zoo.png.

Every mean comes with its 95% t-interval over the reported seeds (clipped at 0 where the
quantity cannot be negative). Writes --out (JSON: the numbers the docs quote, checked by
tests/test_docs_numbers.py) and the figures discrete_curves.png and discrete_belief_<task>.png.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import torch

from bayesbench.report.summary import permutation_p, rounded, seed_ci, spearman

TASKS = ("vomc", "markov-k", "mess3", "hmm_mixture", "recurrence")
PROBED = ("mess3", "hmm_mixture")
NGRAM_ALPHA = 0.5
NGRAM_ORDERS = (0, 1, 2, 3)
# the authors' numbers on the recurrence (docs/science.md, "Modular-recurrence mixture"): a
# 6-layer d_model 192 transformer, 150,000 steps of 64; README and their 4-seed re-evaluation
AUTHORS_RECURRENCE = {"integer": {"entropy_mae": 0.014, "entropy_mae_reeval": 0.0134, "kl_reeval": 0.00054},
                      "opaque": {"entropy_mae": 0.83, "entropy_mae_reeval": 0.828, "kl_reeval": 0.786}}


def entry_name(row) -> str:
    """The architecture's name in the answer: its arch, with the `--model-args` it was run with
    (the row's `overrides`), e.g. "transformer n_layer=1"."""
    args = ((row.config or {}).get("overrides") or {}).get("model") or {}
    return " ".join([row.arch] + [f"{k}={v}" for k, v in sorted(args.items())])


def reference_predictives(task, batch) -> dict[str, torch.Tensor]:
    """The in-context n-gram predictors (and vomc's depth-1 CTW) on the batch, [N, L, V] float64
    each; none for a tunnel whose tokens are not its predicted symbols."""
    from bayesbench.oracle.ctw import ctw_predictive
    from bayesbench.oracle.markov_k import markov_k_predictive

    tokens, V = batch.tokens, batch.posterior.shape[-1]
    if tokens.dim() != 2 or int(tokens.max()) >= V or int(tokens.min()) < 0:
        return {}
    preds = {}
    for k in NGRAM_ORDERS:
        preds[f"order-{k} counts"] = (ctw_predictive(tokens, V, 0, NGRAM_ALPHA, dtype=torch.float64) if k == 0 else
                                      markov_k_predictive(tokens, V, k, NGRAM_ALPHA, dtype=torch.float64))
    if task.name == "vomc" and task.depth >= 2:
        preds["CTW, depth 1"] = ctw_predictive(tokens, V, 1, task.alpha, task.leaf_prob, dtype=torch.float64)
    return preds


def _store_mean(values: torch.Tensor, mask: torch.Tensor) -> float:
    """The store's mean: over sequences per position, then over the scored positions."""
    from bayesbench.scoring.metrics import per_position

    return float(per_position(values, mask)[mask.any(0)].mean())


def references(task, batch) -> dict[str, dict]:
    """KL(Bayes || reference) of `reference_predictives` on the evaluation batch: the store's mean
    and the per-position curve."""
    from bayesbench.scoring.metrics import kl_bits, per_position

    p, mask = batch.posterior.double(), batch.mask
    preds = reference_predictives(task, batch)
    out = {}
    positions = mask.any(0)
    for name, q in preds.items():
        curve = per_position(kl_bits(p, q.clamp_min(1e-300)), mask)
        out[name] = {"kl": float(curve[positions].mean()), "curve": [float(x) for x in curve[positions]]}
    return out


def uniform_curve(batch) -> list[float]:
    """KL(Bayes || uniform) per scored position: log2 V - H(Bayes)."""
    from bayesbench.scoring.metrics import entropy_bits, per_position

    p, mask = batch.posterior.double(), batch.mask
    curve = per_position(math.log2(p.shape[-1]) - entropy_bits(p), mask)
    return [float(x) for x in curve[mask.any(0)]]


def nearest_reference(path: str, batch, preds: dict[str, torch.Tensor], stored_kl: list[float]) -> dict:
    """Per reference, KL(reference || model) of each member on the evaluation batch (the store's
    mean): which counting rule the model's predictive is nearest to. The checkpoint's KL to Bayes
    is recomputed first and must equal the store's (else the run stops)."""
    from bayesbench.scoring.evaluate import predict
    from bayesbench.scoring.metrics import kl_bits
    from bayesbench.training.checkpoint import load_result

    result = load_result(path)
    with torch.no_grad():
        log_q = predict(result.model, batch)  # [E, N, L, V] float64
    p, mask = batch.posterior.double(), batch.mask
    for e, stored in enumerate(stored_kl):
        mine = _store_mean(kl_bits(p, log_q=log_q[e]), mask)
        if not math.isclose(mine, stored, rel_tol=1e-5, abs_tol=1e-8):
            raise SystemExit(f"discrete_answer.py: {path} member {e}: KL recomputed {mine!r} != stored {stored!r}: "
                             "the checkpoint and the store disagree")
    return {name: [_store_mean(kl_bits(q, log_q=log_q[e]), mask) for e in range(log_q.shape[0])]
            for name, q in preds.items()}


def belief_probe(path: str, sequences: int) -> dict:
    """The belief probe of one run's checkpoint (every member, each on its own sequences)."""
    from bayesbench.dynamics.belief_probe.measure import member_targets, probe, residual_streams
    from bayesbench.dynamics.belief_probe.study import summarize
    from bayesbench.dynamics.sets import member_sets
    from bayesbench.training.checkpoint import load_result
    from bayesbench.training.result import task_of

    result = load_result(path)
    task = task_of(result)
    batches = member_sets(task, sequences, "belief-probe", list(result.seeds))
    positions, beliefs = member_targets(task, batches)
    res = probe(residual_streams(result.model, batches), positions, beliefs, result.seeds)
    s = summarize(res, task.describe(), sequences)
    best = s["best_stream"]
    out = {"seeds": list(result.seeds), "best_stream": best, "streams": {}}
    for name, st in s["streams"].items():
        out["streams"][name] = {"r2": st["per_seed"], "r2_shuffled": st["per_seed_shuffled"]}
    n = min(3000, res.test_beliefs.shape[0])
    out["_figure"] = (res.test_beliefs[:n], res.test_predictions[best][0][:n], res.r2[best][0])
    return out


def seed_numbers(members: list, ev: str) -> dict:
    """The reported seeds of one run (its stored rows) and each one's KL and entropy error on the
    evaluation `ev`, with their means and 95% intervals over seeds (clipped at 0)."""
    out: dict = {"seeds": [m.seed for m in members],
                 "kl": [m.evaluation.evals[ev].kl.mean for m in members],
                 "entropy_mae": [m.evaluation.evals[ev].entropy_mae.mean for m in members]}
    for k in ("kl", "entropy_mae"):
        out[f"{k}_mean"] = sum(out[k]) / len(out[k])
        out[f"{k}_ci"] = seed_ci(out[k])
    return out


def measure(db: str, *, probe_sequences: int = 2048, say=print) -> tuple[dict, dict]:
    """Every reported discrete run's numbers (module docstring) and the probe figures' points."""
    from bayesbench.dynamics.runs import find_checkpoint
    from bayesbench.report.selection import select_rows
    from bayesbench.scoring.evaluate import eval_set
    from bayesbench.tasks import task_from_config

    tasks: dict[str, dict] = {}
    figures: dict[str, dict] = {}
    sets: dict[str, tuple] = {}  # task -> (its evaluation batch, the references' predictives)
    rows = [r for r in select_rows(db) if r.task in TASKS]
    runs: dict[str, list] = {}
    for r in rows:
        runs.setdefault(r.run_id, []).append(r)
    for run_id, members in runs.items():
        first = members[0]
        name = entry_name(first)
        ev_name = first.primary
        entry = tasks.setdefault(first.task, {"label": first.task_label, "eval": ev_name, "archs": {}})
        if "references" not in entry:
            task = task_from_config(first.task_config)
            ev = first.evaluation.evals[ev_name]
            batch = eval_set(task, ev.kl.n_sequences)
            entry.update(n_sequences=ev.kl.n_sequences, positions=first.evaluation.curves[ev_name].position,
                         floors={f: {"kl": s["kl"].mean, "entropy_mae": s["entropy_mae"].mean}
                                 for f, s in (ev.floors or {}).items()},
                         uniform_curve=uniform_curve(batch), references=references(task, batch))
            sets[first.task] = (batch, reference_predictives(task, batch))
        if name in entry["archs"]:
            raise SystemExit(f"discrete_answer.py: {db} holds two reported runs of {name} on {first.task_label}; "
                             "keep one store per answer")
        a = entry["archs"][name] = {
            "run_id": run_id, "params": first.params, "state_floats": (first.config.get("state") or {}).get("floats"),
            "lr": first.config.get("train", {}).get("lr"), "steps": first.steps, "wall_s": first.wall_s,
            **seed_numbers(members, ev_name), "kl_curves": [m.evaluation.curves[ev_name].kl for m in members]}
        a["kl_curve"] = [sum(c[i] for c in a["kl_curves"]) / len(a["kl_curves"]) for i in range(len(a["kl_curves"][0]))]
        path = find_checkpoint(run_id, db)  # the row's recorded checkpoint
        batch, preds = sets[first.task]
        if preds:
            a["kl_from_reference"] = nearest_reference(path, batch, preds, a["kl"])
        if first.task in PROBED:
            pr = belief_probe(path, probe_sequences)
            figures.setdefault(first.task, {})[name] = pr.pop("_figure")
            if pr["seeds"] != a["seeds"]:
                raise SystemExit(f"discrete_answer.py: {path} has seeds {pr['seeds']}, the store {a['seeds']}")
            a["probe"] = pr
        say(f"{first.task_label} / {name}: seeds {a['seeds']}, KL {a['kl_mean']:.4f}")
    for task_name, entry in tasks.items():
        refs = entry["references"]
        for a in entry["archs"].values():
            if refs:  # below every fixed-order counting rule: per seed, and the interval's top
                best = min(v["kl"] for v in refs.values())
                a["below_every_reference"] = {"seeds": sum(k < best for k in a["kl"]), "of": len(a["kl"]),
                                              "ci_high_below": a["kl_ci"][1] < best}
            if "probe" in a:
                p = a["probe"]
                best = p["streams"][p["best_stream"]]
                gain = [x - e for x, e in zip(best["r2"], p["streams"]["embed"]["r2"])]
                excess = [x - s for x, s in zip(best["r2"], best["r2_shuffled"])]
                p["best"] = {"r2": _stat(best["r2"]), "r2_shuffled": _stat(best["r2_shuffled"]),
                             "excess": _stat(excess), "over_embed": _stat(gain), "over_embed_per_seed": gain}
        if task_name in PROBED:  # every member; then only those of architectures that carry a state across positions
            entry["probe_vs_kl"] = probe_vs_kl(list(entry["archs"].values()))
    return tasks, figures


def _stat(values: list[float]) -> dict:
    from bayesbench.stats import t_interval

    iv = t_interval(values, null=0.0)
    return {"mean": iv["mean"], "ci": [iv["ci_low"], iv["ci_high"]], "p": iv["p"]}


def welch(a: list[float], b: list[float]) -> dict:
    """mean(a) - mean(b) with Welch's 95% t-interval (unequal variances, Welch-Satterthwaite df)."""
    from bayesbench.stats import t_quantile

    def mv(v):
        m = sum(v) / len(v)
        return m, sum((x - m) ** 2 for x in v) / (len(v) - 1) / len(v)

    (ma, va), (mb, vb) = mv(a), mv(b)
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1)) if se > 0 else 1.0
    half = t_quantile(max(1, int(math.floor(df))), 0.95) * se
    return {"mean": ma - mb, "ci": [ma - mb - half, ma - mb + half], "welch_df": df}


def depth_question(tasks: dict) -> dict | None:
    """vomc: each one-layer transformer (same width; widened to the two-layer's parameters) against
    the two-layer one (Welch's interval of the difference of mean KL over seeds), and the best
    fixed-order reference every entry is compared with."""
    entry = tasks.get("vomc")
    if not entry or "transformer" not in entry["archs"]:
        return None
    ones = sorted(a for a in entry["archs"] if a.startswith("transformer ") and "n_layer=1" in a.split())
    if not ones:
        return None
    two = entry["archs"]["transformer"]
    refs = entry["references"]
    best = min(refs, key=lambda k: refs[k]["kl"])
    return {"minus_two_layer": {a: welch(entry["archs"][a]["kl"], two["kl"]) for a in ones},
            "best_reference": best, "best_reference_kl": refs[best]["kl"]}


def _bits(x) -> str:
    from bayesbench.report.leaderboard import fmt_bits

    return fmt_bits(x)


def _ci(mean: float, ci: list[float]) -> str:
    return f"{_bits(mean)} [{_bits(ci[0])}, {_bits(ci[1])}]"


def _r2(d: dict, signed: bool = False) -> str:
    """mean [low, high] to 3 decimals, signed where one is negative or `signed` (a control near 0)."""
    lo, hi = d["ci"]
    return f"{d['mean']:+.3f} [{lo:+.3f}, {hi:+.3f}]" if signed or d["mean"] < 0 or lo < 0 else \
        f"{d['mean']:.3f} [{lo:.3f}, {hi:.3f}]"


def probe_table(caption: str, e: dict, untuned: bool) -> list[str]:
    """The belief probe's table of one tunnel's entries `e`, by KL: the tuned ones with the
    excess over the shuffle control; the untuned ones with their size, state and rate instead."""
    cols = (["params", "state (floats)"] if untuned else []) + ["KL (bits)", "best stream", "held-out R^2",
                                                                "shuffle control"]
    cols += ([] if untuned else ["R^2 - control"]) + ["R^2 - embed stream's"]
    out = [caption, "", "| arch | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for arch in sorted(e["archs"], key=lambda a: e["archs"][a]["kl_mean"]):
        a = e["archs"][arch]
        b = a["probe"]["best"]
        state = "-" if a["state_floats"] is None else f"{a['state_floats']:,}"
        cells = ([f"{a['params']:,}", state, f"{_ci(a['kl_mean'], a['kl_ci'])}, lr {a['lr']:g}"] if untuned
                 else [_bits(a["kl_mean"])])
        cells += [a["probe"]["best_stream"], _r2(b["r2"]), _r2(b["r2_shuffled"], signed=True)]
        cells += ([] if untuned else [_r2(b["excess"])]) + [_r2(b["over_embed"])]
        out.append(f"| {arch} | " + " | ".join(cells) + " |")
    return out


def render(doc: dict) -> str:
    """The Markdown tables docs/leaderboard.md quotes, from the summary alone (tests/test_docs_numbers.py
    renders them again and compares)."""
    out: list[str] = []
    tasks = doc["tasks"]
    order = [t for t in TASKS if t in tasks]
    archs = sorted({a for t in order for a in tasks[t]["archs"]})
    head = ["arch"] + [tasks[t]["label"] for t in order]

    def per_arch(caption: str, cell) -> list[str]:  # one row per entry, one column per tunnel
        lines = [caption, "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for arch in sorted(archs, key=lambda a: (a != "transformer", a)):
            cells = [arch] + ["-" if arch not in tasks[t]["archs"] else cell(tasks[t]["archs"][arch]) for t in order]
            lines.append("| " + " | ".join(cells) + " |")
        return lines

    out += per_arch("KL(Bayes || model) in bits on each tunnel's primary evaluation, mean [95% CI over seeds]; "
                    "the rate the tuning chose under it:", lambda a: f"{_ci(a['kl_mean'], a['kl_ci'])}, lr {a['lr']:g}")
    for f, label in (("uniform", "uniform (floor)"), ("marginal", "context-free (floor)")):
        out.append("| " + " | ".join([f"*{label}*"] + [_bits(tasks[t]["floors"][f]["kl"]) if f in tasks[t]["floors"]
                                                      else "-" for t in order]) + " |")
    refs = sorted({r for t in order for r in tasks[t]["references"]})
    for r in refs:
        out.append("| " + " | ".join([f"*{r} (in context)*"] + [
            _bits(tasks[t]["references"][r]["kl"]) if r in tasks[t]["references"] else "-" for t in order]) + " |")
    out += [""] + per_arch("Entropy error |H(model) - H(Bayes)| in bits, mean [95% CI over seeds]:",
                           lambda a: _ci(a["entropy_mae_mean"], a["entropy_mae_ci"]))
    out.append("| " + " | ".join(["*uniform (floor)*"] + [_bits(tasks[t]["floors"]["uniform"]["entropy_mae"])
                                                         if "uniform" in tasks[t]["floors"] else "-"
                                                         for t in order]) + " |")
    out.append("")
    out += per_arch("Parameters per member, state carried per sequence at the scored length (floats) and training "
                    "wall time of the 3-seed ensemble (s):",
                    lambda a: f"{a['params']:,} / " + ("-" if a["state_floats"] is None else f"{a['state_floats']:,}")
                    + f" / {a['wall_s']:.0f}")
    out.append("")
    dq = doc.get("depth_question")
    if dq:
        v = tasks["vomc"]
        out += ["vomc: the depth question (Zhou et al., arXiv 2410.05493), KL in bits:", "",
                "| entry | params | KL, mean [95% CI] | per seed | seeds below the best fixed-order reference |",
                "|---|---|---|---|---|"]
        for arch in sorted(v["archs"], key=lambda a: v["archs"][a]["kl_mean"]):
            a = v["archs"][arch]
            b = a["below_every_reference"]
            out.append(f"| {arch} | {a['params']:,} | {_ci(a['kl_mean'], a['kl_ci'])} | "
                       f"{' '.join(_bits(x) for x in a['kl'])} | {b['seeds']} of {b['of']} |")
        out += [f"| *{dq['best_reference']} (best fixed-order reference)* | - | {_bits(dq['best_reference_kl'])} | - "
                "| - |",
                ""]
        refs = list(v["references"])
        out += ["vomc: how far each model's predictive is from each in-context counting rule, KL(rule || model) in "
                "bits, mean over seeds, and from Bayes (CTW at depth 2: KL(Bayes || model)); the smallest in bold, "
                "the rule the model is nearest to:", "",
                "| entry | Bayes (CTW, depth 2) | " + " | ".join(refs) + " |",
                "|" + "---|" * (len(refs) + 2)]
        for arch in sorted(v["archs"], key=lambda a: v["archs"][a]["kl_mean"]):
            kf = v["archs"][arch].get("kl_from_reference")
            if not kf:
                continue
            means = {"Bayes": v["archs"][arch]["kl_mean"]} | {r: sum(kf[r]) / len(kf[r]) for r in refs}
            near = min(means, key=lambda r: means[r])
            out.append(f"| {arch} | " + " | ".join(f"**{_bits(m)}**" if r == near else _bits(m)
                                                   for r, m in means.items()) + " |")
        out.append("")
        for name, d in dq["minus_two_layer"].items():
            out.append(f"KL of {name} minus the two-layer transformer's: {_bits(d['mean'])} bits "
                       f"[{_bits(d['ci'][0])}, {_bits(d['ci'][1])}] (Welch's 95% interval, df {d['welch_df']:.1f}).")
        out.append("")
    if "markov-k" in tasks:
        m = tasks["markov-k"]
        out += [f"{m['label']}: each seed's KL(Bayes || model) and the counting rule its predictive is nearest to, "
                "KL(rule || model), in bits:", "", "| entry | seed | KL | nearest rule | its distance from the rule |",
                "|---|---|---|---|---|"]
        for arch in sorted(m["archs"], key=lambda a: m["archs"][a]["kl_mean"]):
            a = m["archs"][arch]
            kf = a.get("kl_from_reference") or {}
            for i, seed in enumerate(a["seeds"]):
                near = min(kf, key=lambda r: kf[r][i]) if kf else None
                out.append(f"| {arch} | {seed} | {_bits(a['kl'][i])} | {near or '-'} | "
                           f"{_bits(kf[near][i]) if near else '-'} |")
        out += [f"| *{min(m['references'], key=lambda r: m['references'][r]['kl'])} (best fixed-order reference)* "
                f"| - | {_bits(min(r['kl'] for r in m['references'].values()))} | - | - |", ""]
    for t in PROBED:
        if t not in tasks:
            continue
        e = tasks[t]
        out += probe_table(f"{e['label']}: belief probe, best residual stream per architecture "
                           f"({doc['probe_sequences']} sequences per seed, a quarter held out), mean [95% CI over "
                           "seeds]:", e, untuned=False)
        c, d = e["probe_vs_kl"]["all"], e["probe_vs_kl"]["with_state"]
        out += ["", f"Spearman's rho between the best stream's gain over the embed stream and the member's KL: "
                f"{c['spearman']:+.2f} across all {c['members']} members (permutation p = {c['p']:.2g}); "
                f"{d['spearman']:+.2f} across the {d['members']} members of the architectures that carry a state "
                f"from one position to the next (p = {d['p']:.2g}; left out: "
                f"{', '.join(sorted(a for a, v in e['archs'].items() if not v['state_floats'])) or 'none'}).", ""]
    for t, e in doc.get("zoo", {}).items():
        out += probe_table(f"{e['label']}: belief probe of the other architectures of the registry, at the "
                           "preset's fixed rate (untuned), best residual stream per architecture, mean [95% CI over "
                           "seeds]:", e, untuned=True)
        c, d = e["probe_vs_kl_every"]["all"], e["probe_vs_kl_every"]["with_state"]
        n = len(e["archs"]) + len(tasks.get(t, {}).get("archs", {}))
        out += ["", f"Spearman's rho between the best stream's gain over the embed stream and the member's KL over "
                f"the {n} architectures, tuned and untuned: {c['spearman']:+.2f} across all {c['members']} members "
                f"(permutation p = {c['p']:.2g}); {d['spearman']:+.2f} across the {d['members']} members of those "
                f"that carry a state (p = {d['p']:.2g}).", ""]
    rec = tasks.get("recurrence")
    if rec:
        out += ["recurrence (p = 17, pi = 0.5, L = 16, integer tokens): ours at the quick size beside the authors' "
                "at theirs (not the same setting: see below):", "",
                "| model | steps | entropy MAE (bits) | KL (bits) |", "|---|---|---|---|"]
        for arch in sorted(rec["archs"], key=lambda a: rec["archs"][a]["kl_mean"]):
            a = rec["archs"][arch]
            out.append(f"| {arch} (ours, {len(a['seeds'])} seeds) | {a['steps']:,} | "
                       f"{_ci(a['entropy_mae_mean'], a['entropy_mae_ci'])} | {_ci(a['kl_mean'], a['kl_ci'])} |")
        for arch, a in sorted(doc.get("recurrence_long", {}).items(), key=lambda kv: kv[1]["kl_mean"]):
            out.append(f"| {arch} (ours, {len(a['seeds'])} seeds, lr {a['lr']:g}) | {a['steps']:,} | "
                       f"{_ci(a['entropy_mae_mean'], a['entropy_mae_ci'])} | {_ci(a['kl_mean'], a['kl_ci'])} |")
        au = AUTHORS_RECURRENCE["integer"]
        out += [f"| authors' 6-layer d_model 192 transformer (README; 4-seed re-evaluation) | 150,000 | "
                f"{au['entropy_mae']} ({au['entropy_mae_reeval']}) | ({au['kl_reeval']}) |", ""]
    return "\n".join(out)


def figure_curves(doc: dict, path: str) -> str:
    """Per tunnel: per-position KL of every architecture (mean over seeds) against the uniform
    floor and the in-context n-gram references."""
    from bayesbench.figures import heading, save, subplots, unique_legend
    from bayesbench.report.plots import _colors

    tasks = doc["tasks"]
    order = [t for t in TASKS if t in tasks]
    long = {a: v for a, v in doc.get("recurrence_long", {}).items() if "curve" in v}
    panels = len(order) + bool(long)
    ncols = min(3, panels)
    nrows = -(-panels // ncols)
    fig, grid = subplots(nrows, ncols, figsize=(4.8 * ncols, 4.0 * nrows + 1.2), squeeze=False)
    axes = [ax for row in grid for ax in row]
    for ax in axes[panels:]:
        ax.set_axis_off()
    colors = _colors()
    archs = sorted({a for t in order for a in tasks[t]["archs"]}, key=lambda a: (a != "transformer", a))
    styles = {"order-0 counts": (0, (1, 1)), "order-1 counts": "--", "order-2 counts": "-.",
              "order-3 counts": (0, (3, 1, 1, 1, 1, 1)), "CTW, depth 1": (0, (5, 2))}
    for ax, t in zip(axes, order):
        e = tasks[t]
        for arch in e["archs"]:
            a = e["archs"][arch]
            x = list(range(1, len(a["kl_curve"]) + 1))
            ax.plot(x, [v if v > 1e-12 else math.nan for v in a["kl_curve"]], lw=1.6,
                    color=colors[archs.index(arch) % len(colors)], label=f"{arch} ({len(a['seeds'])} seeds, mean)")
        x = list(range(1, len(e["uniform_curve"]) + 1))
        ax.plot(x, [v if v > 1e-12 else math.nan for v in e["uniform_curve"]], color="0.3", ls=":", lw=1.2,
                label="uniform (floor)")
        for r, ref in e["references"].items():
            ax.plot(x, [v if v > 1e-12 else math.nan for v in ref["curve"]], color="0.55", ls=styles.get(r, "--"),
                    lw=1.0, label=f"{r} (in context)")
        ax.set(yscale="log", xlabel="scored position (1 = first prediction)", ylabel="KL(Bayes || model) (bits)",
               title=e["label"])
        ax.grid(alpha=0.3)
    if long:  # the longer recurrence runs: their learning curves, KL against the training step
        ax = axes[len(order)]
        for arch, a in long.items():
            ax.plot(a["curve"]["step"], a["curve"]["kl"], lw=1.6, marker=".",
                    color=colors[archs.index(arch) % len(colors)] if arch in archs else None)
        if "recurrence" in tasks:
            ax.axhline(tasks["recurrence"]["floors"]["uniform"]["kl"], color="0.3", ls=":", lw=1.2)
        ax.set(xscale="log", yscale="log", xlabel="training step (batches of 64)",
               ylabel="KL(Bayes || model) (bits), curve set",
               title=f"recurrence, {max(a['steps'] for a in long.values()):,} steps: learning curves")
        ax.grid(alpha=0.3)
    unique_legend(fig, where="outside lower center")
    heading(fig, "Discrete tunnels, tuned quick run: per-position KL against the exact posterior",
            f"measured {doc['measured']}; each architecture at the rate its tuning chose, "
            f"{'/'.join(sorted({str(a['steps']) for e in tasks.values() for a in e['archs'].values()}))} steps of 64")
    return save(fig, path)


def figure_belief(entry: dict, probe_sequences: int, points: dict, path: str, which: str = "tuned run") -> str:
    """The exact beliefs of held-out positions, beside each architecture's best-stream linear
    read-out (its first seed), in the same projection and colours (Shai et al.'s figure); five
    panels to a row. `entry`: the tunnel's summary (its "label" and "archs")."""
    from bayesbench.dynamics.belief_probe.plots import colours, simplex_projection
    from bayesbench.figures import heading, save, subplots

    names = sorted(points, key=lambda a: entry["archs"][a]["kl_mean"])
    n = 3000 if len(names) < 6 else 1500  # points per panel: a many-panel figure stays a small file
    beliefs = points[names[0]][0][:n]
    proj, origin = simplex_projection(beliefs)
    cols = min(5, len(names) + 1)
    rows = -(-(len(names) + 1) // cols)
    size = (3.6, 3.9) if rows == 1 else (3.0, 3.2)
    fig, axes = subplots(rows, cols, figsize=(size[0] * cols, size[1] * rows), squeeze=False)
    flat = list(axes.flat)
    for ax in flat[len(names) + 1:]:
        ax.set_visible(False)
    for ax, name in zip(flat, ["exact"] + names):
        b, pts = (beliefs, beliefs) if name == "exact" else (points[name][0][:n], points[name][1][:n])
        xy = (pts.double() - origin) @ proj
        ax.scatter(xy[:, 0].numpy(), xy[:, 1].numpy(), s=2, c=colours(b), alpha=0.6, linewidths=0)
        if b.shape[1] == 3:
            tri = torch.cat([proj, proj[:1]])
            ax.plot(tri[:, 0].numpy(), tri[:, 1].numpy(), color="0.6", lw=0.8)
        a = entry["archs"].get(name)
        title = ("exact beliefs (held out)" if name == "exact" else
                 f"{name}: {a['probe']['best_stream']} stream\n"
                 f"R^2 {points[name][2]:.3f}, KL {_bits(a['kl_mean'])} bits")
        ax.set_title(title, fontsize=8)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
    heading(fig, f"{entry['label']}: exact belief states and each architecture's linear read-out",
            f"first seed of each {which}, held-out positions; {probe_sequences} sequences per seed",
            "2-simplex drawn as a triangle" if beliefs.shape[1] == 3 else
            f"{beliefs.shape[1]} belief coordinates on the exact beliefs' first two principal axes", fontsize=9)
    return save(fig, path)


def probe_vs_kl(archs: list[dict]) -> dict:
    """Spearman's rho between the best stream's gain over the embed stream and the KL, over the
    members of `archs` (every one; then those of architectures that carry a state)."""
    out = {}
    for which, keep in (("all", lambda a: True), ("with_state", lambda a: bool(a["state_floats"]))):
        gains, kls = [], []
        for a in archs:
            if keep(a):
                gains += a["probe"]["best"]["over_embed_per_seed"]
                kls += a["kl"]
        out[which] = {"members": len(gains), "spearman": spearman(gains, kls), "p": permutation_p(gains, kls)}
    return out


def measure_long(db: str) -> dict:
    """The reported recurrence runs of a second store trained for more steps than the quick
    preset's (same task, same rate): each seed's final KL and entropy error, and the mean
    learning curve (KL on the run's curve set after each measured step), per architecture."""
    from bayesbench.report.selection import select_rows

    out: dict[str, dict] = {}
    runs: dict[str, list] = {}
    for r in select_rows(db, task="recurrence"):
        runs.setdefault(r.run_id, []).append(r)
    for run_id, members in runs.items():
        first = members[0]
        name = entry_name(first)
        if name in out:
            raise SystemExit(f"discrete_answer.py: {db} holds two reported recurrence runs of {name}; keep one")
        ev = first.primary
        a = out[name] = {"run_id": run_id, "label": first.task_label, "params": first.params,
                         "lr": first.config.get("train", {}).get("lr"), "steps": first.steps, "wall_s": first.wall_s,
                         **seed_numbers(members, ev)}
        curves = [m.learning_curve for m in members if m.learning_curve is not None]
        if curves and all(c.step == curves[0].step for c in curves):
            kl = [c.metric("kl") for c in curves]
            a["curve"] = {"step": curves[0].step, "kl": [sum(v[i] for v in kl) / len(kl) for i in range(len(kl[0]))]}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--render", default="", help="print the Markdown tables of this summary and stop")
    p.add_argument("--db", help="the store of the tuned discrete runs")
    p.add_argument("--measured", help="when the run was made (YYYY-MM-DD)")
    p.add_argument("--command", default="bayesbench run --tasks <t> --archs transformer lstm mamba mlp --tune "
                   "--tune-args selection_seeds=1 --seeds 3 --jobs 2")
    p.add_argument("--probe-sequences", type=int, default=2048)
    p.add_argument("--long-db", default="", help="a store of longer recurrence runs (the same task and rate, "
                   "more --steps) to show beside the quick ones")
    p.add_argument("--zoo-db", default="", help="a store of the other architectures' untuned runs on the tunnels "
                   "with a belief state, probed and shown apart from the tuned ones")
    p.add_argument("--out", help="the JSON summary to write")
    p.add_argument("--figures", default="", help="folder for discrete_curves.png and discrete_belief_<task>.png")
    args = p.parse_args(argv)
    if args.render:
        with open(args.render) as f:
            print(render(json.load(f)))
        return 0
    missing = [f"--{n.replace('_', '-')}" for n in ("db", "measured", "out") if not getattr(args, n)]
    if missing:
        p.error(f"{', '.join(missing)} required (or --render SUMMARY)")
    if args.probe_sequences < 8:
        p.error(f"--probe-sequences must be at least 8 (a held-out split needs sequences on both sides), "
                f"got {args.probe_sequences}")
    torch.set_num_threads(1)
    if not os.path.isfile(args.db):
        print(f"discrete_answer.py: --db {args.db}: no such file", file=sys.stderr)
        return 2
    tasks, points = measure(args.db, probe_sequences=args.probe_sequences,
                            say=lambda s: print(s, file=sys.stderr))
    if not tasks:
        print(f"discrete_answer.py: no reported run of {', '.join(TASKS)} in {args.db}", file=sys.stderr)
        return 2
    import bayesbench

    doc = {"measured": args.measured, "command": args.command, "written_by": "scripts/discrete_answer.py",
           "bayesbench": bayesbench.__version__, "probe_sequences": args.probe_sequences, "tasks": tasks}
    dq = depth_question(tasks)
    if dq:
        doc["depth_question"] = dq
    if args.long_db:
        if not os.path.isfile(args.long_db):
            print(f"discrete_answer.py: --long-db {args.long_db}: no such file", file=sys.stderr)
            return 2
        doc["recurrence_long"] = measure_long(args.long_db)
    zoo_points: dict = {}
    if args.zoo_db:
        if not os.path.isfile(args.zoo_db):
            print(f"discrete_answer.py: --zoo-db {args.zoo_db}: no such file", file=sys.stderr)
            return 2
        zoo, zoo_points = measure(args.zoo_db, probe_sequences=args.probe_sequences,
                                  say=lambda s: print(s, file=sys.stderr))
        doc["zoo"] = {}
        for t, entry in zoo.items():
            if t not in PROBED:
                continue
            both = set(entry["archs"]) & set(tasks.get(t, {}).get("archs", {}))
            if both:
                print(f"discrete_answer.py: {', '.join(sorted(both))} on {t} is in both --db and --zoo-db; keep one",
                      file=sys.stderr)
                return 2
            entry = {k: entry[k] for k in ("label", "eval", "archs", "probe_vs_kl")}
            every = list(entry["archs"].values()) + list(tasks.get(t, {}).get("archs", {}).values())
            entry["probe_vs_kl_every"] = probe_vs_kl(every)  # tuned and untuned together
            doc["zoo"][t] = entry
    doc = rounded(doc)
    with open(args.out, "w") as f:  # compact, 8 significant digits: a summary kept under 200 kB
        json.dump(doc, f)
        f.write("\n")
    print(f"wrote {args.out}")
    if args.figures:
        print(f"wrote {figure_curves(doc, os.path.join(args.figures, 'discrete_curves.png'))}")
        for key, which, pts_of in (("tasks", "tuned run", points), ("zoo", "untuned run", zoo_points)):
            for task, pts in pts_of.items():
                name = f"discrete_belief_{task}{'_zoo' if key == 'zoo' else ''}.png"
                path = os.path.join(args.figures, name)
                print(f"wrote {figure_belief(doc[key][task], doc['probe_sequences'], pts, path, which)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
