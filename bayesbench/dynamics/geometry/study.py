"""`bayesbench geometry RUN`: read a trained transformer's geometry (Paper I, arXiv 2512.22471,
section 5), store the numbers, draw the figures and write a Markdown report.

    bayesbench train --task bijection --arch transformer --preset quick --seeds 0,1,2,3,4
    bayesbench geometry RUN_ID_OR_DIR [--sequences 1024] [--min-seeds 5] [--json]

RUN is a run directory (holding checkpoint.pt), a checkpoint file, or a run_id of the results
store. docs/geometry.md explains every quantity.
"""

from __future__ import annotations

import os

import torch

from ...checks import int_at_least
from ..cut_short import removed_if_stopped
from ..intervals import bootstrap_interval, fisher_z_interval, fmt, ratio_interval
from ..report import report_dir, write_report
from ..store import delete_study, register_study, write_dynamics
from .measure import ERRORS, Geometry, check_transformer, measure, random_abs_cos


def _load(run: str, db: str | None):
    from ...training.trainer import load_result
    from ..runs import find_checkpoint

    return load_result(find_checkpoint(run, db, "RUN"))


MIN_SEEDS = 5  # intervals over seeds need enough seeds to mean something


def run_geometry(run: str, *, sequences: int = 1024, db: str | None = None, min_seeds: int = MIN_SEEDS) -> dict:
    """Measure, store, plot and report the geometry of the run at `run`; returns the summary.
    A run with fewer than `min_seeds` seeds is refused (its intervals would say little)."""
    from ...models import get_model
    from ...scoring.evaluate import eval_set
    from ...training.trainer import task_of
    from . import plots as geometry_plots

    int_at_least("--sequences", sequences, 2)
    int_at_least("--min-seeds", min_seeds, 2, "an interval over seeds needs at least 2")
    result = _load(run, db)
    ident = result.identity
    check_transformer(result.model)
    if len(result.seeds) < min_seeds:
        raise ValueError(f"RUN has {len(result.seeds)} seeds {result.seeds}; the geometry's intervals over seeds need "
                         f"at least --min-seeds {min_seeds} (train more seeds, or lower --min-seeds)")
    task = task_of(result)
    init = get_model(ident["arch"], task, seeds=ident["seeds"], max_len=ident["max_len"], **ident["model"])
    g = measure(result.model, eval_set(task, sequences), task, init_model=init)
    study_id = f"geometry-{result.run_id}"
    config = {"run": os.path.abspath(run) if os.path.exists(run) else run, "checkpoint": result.checkpoint,
              "run_id": result.run_id, "task": task.describe(), "arch": ident["arch"],
              "model": ident["model"], "seeds": result.seeds, "steps": result.steps, "sequences": sequences}
    delete_study(study_id, path=db)  # measuring a run again replaces its earlier measurements
    summary = summarize(g, task.describe(), sequences)
    out_dir = os.path.join(report_dir(db), study_id)
    setting = (f"{ident['arch']} on {task.describe()}, {result.steps} training steps, seeds {result.seeds}; "
               f"{sequences} evaluation sequences")
    figures = geometry_plots.all_figures(out_dir, g, setting)
    register_study(study_id, "geometry", config, run_id=result.run_id, path=db)
    with removed_if_stopped(study_id, "geometry", db):
        write_dynamics(study_id, records(g), path=db)
    report = write_report(os.path.join(report_dir(db), f"{study_id}.md"),
                          f"Geometry of run {result.run_id} ({ident['arch']} on {task.describe()})",
                          sections(g, config, summary), figures)
    summary.update({"study_id": study_id, "report": report, "config": config})
    register_study(study_id, "geometry", config, run_id=result.run_id, summary=summary, status="done", path=db)
    return summary


def _per_seed(t: torch.Tensor) -> list[float]:
    """[E, H] or [E] -> one value per seed (heads averaged)."""
    return (t.mean(1) if t.dim() > 1 else t).tolist()


def _ranked_heads(g: Geometry, m: int) -> dict:
    """Per layer: the ablation ratio of each seed's most and second most destructive head, and
    their quotient (head indices mean nothing across seeds, so heads are ranked within each
    seed). A uniquely destructive head has a quotient well above 1."""
    out = {}
    intact = g.intact_mae[m]
    for layer in sorted({i for i, _ in g.head_mae}):
        ratios = torch.stack([g.head_mae[(i, h)][m] / intact for i, h in g.head_mae if i == layer])  # [H, E]
        if ratios.shape[0] < 2:
            continue
        top2 = ratios.topk(2, dim=0).values
        out[f"L{layer}"] = {"top": ratio_interval(top2[0].tolist()), "second": ratio_interval(top2[1].tolist()),
                            "top_over_second": ratio_interval((top2[0] / top2[1]).tolist())}
    return out


def _ablated(mae: torch.Tensor, intact: torch.Tensor) -> dict:
    return {"mae": bootstrap_interval(mae.tolist()), "ratio": ratio_interval((mae / intact).tolist())}


def summarize(g: Geometry, task: str, sequences: int) -> dict:
    """JSON-ready numbers, each a mean over seeds with a 95% interval that respects its range:
    bootstrap over seeds for bounded quantities, Fisher z for the correlations, the geometric mean
    with a log-t interval for the ablation ratios (intervals.py)."""
    layers = sorted(g.attn_entropy)
    keys = {}
    for k in g.keys:
        keys[k.name] = {"tokens": k.tokens, "words": k.words, "simplex": 1 / (len(k.tokens) - 1),
                        **{f: bootstrap_interval(_per_seed(getattr(k, f)))
                           for f in ("offdiag", "concat", "init", "static", "centred", "init_centred")},
                        "per_head": k.offdiag.mean(0).tolist()}
    ablation = {}
    for m, metric in enumerate(ERRORS):
        intact = g.intact_mae[m]
        heads = {f"L{i}H{h}": _ablated(v[m], intact) for (i, h), v in g.head_mae.items()}
        ablation[metric] = {
            "intact": bootstrap_interval(intact.tolist()), "heads": heads, "ranked": _ranked_heads(g, m),
            "most_destructive_head": max(heads, key=lambda k: heads[k]["ratio"]["mean"]),
            "layers": {f"L{i}": _ablated(v[m], intact) for i, v in g.layer_mae.items()}}
    out = {
        "task": task, "sequences": sequences, "seeds": g.seeds, "d_head": g.d_head,
        "random_abs_cos": random_abs_cos(g.d_head), "keys": keys,
        "attention_entropy_bits": {i: bootstrap_interval(_per_seed(g.attn_entropy[i])) for i in layers},
        "attention_entropy_ratio": {i: bootstrap_interval(_per_seed(g.attn_entropy_ratio[i])) for i in layers},
        "qk_cos": {i: bootstrap_interval(_per_seed(g.qk_cos[i])) for i in layers},
        "qk_contrast": {i: bootstrap_interval(_per_seed(g.qk_contrast[i])) for i in layers},
        "value_pc1_variance": {i: bootstrap_interval([v[0] for v in g.value_var[i]]) for i in layers},
        "value_pc1_variance_raw": {i: bootstrap_interval([v[0] for v in g.value_var_raw[i]]) for i in layers},
        "value_pc1_spearman": {i: fisher_z_interval(g.value_spearman[i]) for i in layers},
        "value_pc1_spearman_null": {i: bootstrap_interval(g.value_spearman_null[i]) for i in layers},
        "ablation": ablation,
    }
    per_seq = ablation["entropy_mae"]
    worst = per_seq["most_destructive_head"]
    out["headline"] = [
        "layer-0 keys, mean off-diagonal |cos|: " + "; ".join(
            f"{name} {fmt(v['offdiag'])} (at initialisation {fmt(v['init'])}; centred {fmt(v['centred'])}, at "
            f"initialisation {fmt(v['init_centred'])}, simplex {v['simplex']:.3f})" for name, v in keys.items())
        + f"; random directions in d_head = {g.d_head} dims {out['random_abs_cos']:.3f}",
        "attention entropy / uniform by layer: " + ", ".join(
            f"L{i} {fmt(out['attention_entropy_ratio'][i])}" for i in layers)
        + "; q-k cosine by layer: " + ", ".join(f"L{i} {fmt(out['qk_cos'][i])}" for i in layers),
        "value PC1 (standardised, sign-aligned) vs posterior entropy, Spearman by layer: " + ", ".join(
            f"L{i} {fmt(out['value_pc1_spearman'][i])} (chance {out['value_pc1_spearman_null'][i]['mean']:.3f})"
            for i in layers),
        f"intact entropy MAE {fmt(per_seq['intact'], '{:.4f}')} bits; most destructive head {worst} "
        f"(x{per_seq['heads'][worst]['ratio']['mean']:.1f}); layer ablations: " + ", ".join(
            f"{k} x{v['ratio']['mean']:.1f}" for k, v in per_seq["layers"].items()),
    ]
    return out


def records(g: Geometry) -> list[tuple]:
    """Long-format rows (seed, step=-1, layer, head, name, value)."""
    rows = []
    first = min(g.attn_entropy)
    for e, s in enumerate(g.seeds):
        for k in g.keys:
            tag = k.name.replace(" ", "_")
            for h in range(k.offdiag.shape[1]):
                rows += [(s, -1, first, h, f"key_offdiag_abs_cos_{tag}", float(k.offdiag[e, h])),
                         (s, -1, first, h, f"key_offdiag_abs_cos_centred_init_{tag}", float(k.init_centred[e, h])),
                         (s, -1, first, h, f"key_offdiag_abs_cos_token_only_{tag}", float(k.static[e, h])),
                         (s, -1, first, h, f"key_offdiag_abs_cos_centred_{tag}", float(k.centred[e, h])),
                         (s, -1, first, h, f"key_offdiag_abs_cos_init_{tag}", float(k.init[e, h]))]
            rows.append((s, -1, first, -1, f"key_offdiag_abs_cos_all_heads_{tag}", float(k.concat[e])))
        for i in g.attn_entropy:
            for h in range(g.attn_entropy[i].shape[1]):
                rows += [(s, -1, i, h, "attn_entropy_bits", float(g.attn_entropy[i][e, h])),
                         (s, -1, i, h, "attn_entropy_ratio", float(g.attn_entropy_ratio[i][e, h])),
                         (s, -1, i, h, "qk_cos", float(g.qk_cos[i][e, h])),
                         (s, -1, i, h, "qk_contrast", float(g.qk_contrast[i][e, h]))]
            rows += [(s, -1, i, -1, "value_pc1_variance", g.value_var[i][e][0]),
                     (s, -1, i, -1, "value_pc1_variance_raw", g.value_var_raw[i][e][0]),
                     (s, -1, i, -1, "value_pc1_spearman_posterior_entropy", g.value_spearman[i][e]),
                     (s, -1, i, -1, "value_pc1_spearman_null", g.value_spearman_null[i][e])]
        for m, metric in enumerate(ERRORS):
            rows.append((s, -1, -1, -1, f"{metric}_intact", float(g.intact_mae[m, e])))
            for (i, h), v in g.head_mae.items():
                rows.append((s, -1, i, h, f"{metric}_head_zeroed", float(v[m, e])))
            for i, v in g.layer_mae.items():
                rows.append((s, -1, i, -1, f"{metric}_layer_skipped", float(v[m, e])))
    return rows


def sections(g: Geometry, config: dict, s: dict | None = None) -> list[tuple[str, str]]:
    s = s or summarize(g, config["task"], config["sequences"])
    n = len(g.seeds)
    setting = (f"Run {config['run_id']}: {config['arch']} {config['model']} on {config['task']}, "
               f"{config['steps']} steps, seeds {config['seeds']}; measured on {config['sequences']} evaluation "
               f"sequences. Every number: the mean over the {n} seeds with a 95% interval that stays in the "
               f"quantity's range (bootstrap over seeds; Fisher z for correlations; geometric mean with a log-t "
               f"interval for ratios).")
    keys = ["| tokens | mean off-diagonal \\|cos\\|, per head then averaged | at initialisation | all heads "
            "concatenated | centred (simplex) | centred at initialisation | token embeddings alone |",
            "|---|---|---|---|---|---|---|"]
    for name, v in s["keys"].items():
        keys.append(f"| {v['words']} | {fmt(v['offdiag'])} | {fmt(v['init'])} | {fmt(v['concat'])} | "
                    f"{fmt(v['centred'])} ({v['simplex']:.3f}) | {fmt(v['init_centred'])} | {fmt(v['static'])} |")
    keys.append(f"\nRandom directions in d_head = {s['d_head']} dimensions: E|cos| = {s['random_abs_cos']:.3f}.")
    ent = ["| layer | attention entropy (bits) | entropy / uniform | q-k cosine (authors') | max - mean q-k cosine "
           "| value PC1 share (standardised) | unstandardised | Spearman(PC1, posterior entropy), sign-aligned | "
           "its chance level |", "|---|---|---|---|---|---|---|---|---|"]
    for i in sorted(g.attn_entropy):
        ent.append(f"| {i} | {fmt(s['attention_entropy_bits'][i])} | {fmt(s['attention_entropy_ratio'][i])} | "
                   f"{fmt(s['qk_cos'][i])} | {fmt(s['qk_contrast'][i])} | {fmt(s['value_pc1_variance'][i])} | "
                   f"{fmt(s['value_pc1_variance_raw'][i])} | {fmt(s['value_pc1_spearman'][i])} | "
                   f"{fmt(s['value_pc1_spearman_null'][i])} |")
    out = [("Setting", setting), ("Summary", "\n".join(f"- {line}" for line in s["headline"])),
           ("Key orthogonality (layer 0)", "\n".join(keys)),
           ("Attention entropy, q-k alignment and value manifold by layer", "\n".join(ent))]
    for metric, a in s["ablation"].items():
        heads = [f"| head zeroed | {metric} (bits) | ratio to intact |", "|---|---|---|",
                 f"| none (intact) | {fmt(a['intact'], '{:.4f}')} | 1 |"]
        heads += [f"| {k} | {fmt(v['mae'], '{:.4f}')} | {fmt(v['ratio'], '{:.2f}')} |" for k, v in a["heads"].items()]
        heads += ["", "Ranked within each seed (head indices mean nothing across seeds):", "",
                  "| layer | most destructive head: ratio | second: ratio | most / second |", "|---|---|---|---|"]
        heads += [f"| {k} | {fmt(v['top'], '{:.2f}')} | {fmt(v['second'], '{:.2f}')} | "
                  f"{fmt(v['top_over_second'], '{:.2f}')} |" for k, v in a["ranked"].items()]
        layers = [f"| block skipped | {metric} (bits) | ratio to intact |", "|---|---|---|"]
        layers += [f"| {k} | {fmt(v['mae'], '{:.4f}')} | {fmt(v['ratio'], '{:.2f}')} |" for k, v in a["layers"].items()]
        out += [(f"Head ablation ({metric})", "\n".join(heads)), (f"Layer ablation ({metric})", "\n".join(layers))]
    return out
