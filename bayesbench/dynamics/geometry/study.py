"""`bayesbench geometry RUN`: read a trained transformer's geometry (Paper I, arXiv 2512.22471,
section 5), store the numbers, draw the figures and write a Markdown report.

    bayesbench train --task bijection --arch transformer --preset quick --seeds 0,1,2
    bayesbench geometry RUN_ID_OR_DIR [--sequences 1024] [--json]

RUN is a run directory (holding checkpoint.pt), a checkpoint file, or a run_id of the results
store. docs/geometry.md explains every quantity.
"""

from __future__ import annotations

import math
import os

import torch

from ...checks import int_at_least
from ..report import report_dir, write_report
from ..stats import mean_ci
from ..store import delete_study, register_study, write_dynamics
from .measure import Geometry, check_transformer, measure


def _load(run: str, db: str | None):
    from ...training.trainer import load_result
    from ..runs import find_checkpoint

    return load_result(find_checkpoint(run, db, "RUN"))




def run_geometry(run: str, *, sequences: int = 1024, db: str | None = None) -> dict:
    """Measure, store, plot and report the geometry of the run at `run`; returns the summary."""
    from ...models import get_model
    from ...scoring.evaluate import eval_set
    from ...store.database import db_path
    from ...training.trainer import task_of
    from . import plots as geometry_plots

    int_at_least("--sequences", sequences, 2)
    result = _load(run, db)
    ident = result.identity
    check_transformer(result.model)
    task = task_of(result)
    init = get_model(ident["arch"], task, seeds=ident["seeds"], max_len=ident["max_len"], **ident["model"])
    g = measure(result.model, eval_set(task, sequences), task, init_model=init)
    study_id = f"geometry-{result.run_id}"
    config = {"run": os.path.abspath(run) if os.path.exists(run) else run, "checkpoint": result.checkpoint,
              "run_id": result.run_id, "task": task.describe(), "arch": ident["arch"],
              "model": ident["model"], "seeds": result.seeds, "steps": result.steps, "sequences": sequences}
    delete_study(study_id, path=db)  # measuring a run again replaces its earlier measurements
    summary = summarize(g, task.describe(), sequences)
    out_dir = os.path.join(report_dir(db_path(db)), study_id)
    figures = geometry_plots.all_figures(out_dir, g)
    register_study(study_id, "geometry", config, run_id=result.run_id, path=db)
    write_dynamics(study_id, records(g), path=db)
    report = write_report(os.path.join(report_dir(db_path(db)), f"{study_id}.md"),
                          f"Geometry of run {result.run_id} ({ident['arch']} on {task.describe()})",
                          sections(g, config), figures)
    summary.update({"study_id": study_id, "report": report, "config": config})
    register_study(study_id, "geometry", config, run_id=result.run_id, summary=summary, status="done", path=db)
    return summary


def summarize(g: Geometry, task: str, sequences: int) -> dict:
    """JSON-ready numbers: means over seeds with 95% t-style intervals, and per-seed lists."""
    layers = sorted(g.attn_entropy)
    d_head = g.key_cos.shape[-1]
    intact = g.intact_mae
    heads = {f"L{i}H{h}": {"mae": mean_ci(v), "ratio": mean_ci(v / intact)} for (i, h), v in g.head_mae.items()}
    worst = max(heads, key=lambda k: heads[k]["ratio"]["mean"])
    out = {
        "task": task, "sequences": sequences, "seeds": g.seeds, "hypothesis_tokens": g.hyp_words,
        "key_offdiag_abs_cos_layer0": mean_ci(g.key_offdiag.mean(1)),
        "key_offdiag_abs_cos_layer0_per_head": g.key_offdiag.mean(0).tolist(),
        "key_offdiag_abs_cos_layer0_all_heads": mean_ci(g.key_offdiag_concat),
        "key_offdiag_abs_cos_layer0_init": mean_ci(g.key_offdiag_init.mean(1)),
        "key_offdiag_abs_cos_layer0_token_only": mean_ci(g.key_offdiag_static.mean(1)),
        "key_offdiag_abs_cos_layer0_centred": mean_ci(g.key_offdiag_centred.mean(1)),
        "attention_entropy_bits": {i: mean_ci(g.attn_entropy[i].mean(1)) for i in layers},
        "attention_entropy_ratio": {i: mean_ci(g.attn_entropy_ratio[i].mean(1)) for i in layers},
        "value_pc1_variance": {i: mean_ci(torch.tensor([v[0] for v in g.value_var[i]])) for i in layers},
        "value_pc1_spearman_posterior_entropy": {i: mean_ci(torch.tensor(g.value_spearman[i])) for i in layers},
        "value_pc1_abs_spearman": {i: mean_ci(torch.tensor(g.value_spearman[i]).abs()) for i in layers},
        "intact_entropy_mae_bits": mean_ci(intact),
        "head_ablation": heads, "most_destructive_head": worst,
        "layer_ablation": {f"L{i}": {"mae": mean_ci(v), "ratio": mean_ci(v / intact)} for i, v in g.layer_mae.items()},
    }
    ent = [out["attention_entropy_ratio"][i]["mean"] for i in layers]
    out["headline"] = [
        f"layer-0 keys of {g.hyp_words}: mean off-diagonal |cos| {out['key_offdiag_abs_cos_layer0']['mean']:.3f} "
        f"(centred {out['key_offdiag_abs_cos_layer0_centred']['mean']:.3f}, simplex {1 / (len(g.hyp_tokens) - 1):.3f}; "
        f"token embeddings alone {out['key_offdiag_abs_cos_layer0_token_only']['mean']:.3f}; "
        f"at initialisation {out['key_offdiag_abs_cos_layer0_init']['mean']:.3f}; random vectors in {d_head} dims "
        f"~{math.sqrt(2 / (math.pi * d_head)):.3f})",
        "attention entropy / uniform by layer: " + ", ".join(f"L{i} {v:.3f}" for i, v in zip(layers, ent)),
        "value PC1 vs posterior entropy, |Spearman| by layer: " + ", ".join(
            f"L{i} {out['value_pc1_abs_spearman'][i]['mean']:.3f}" for i in layers),
        f"intact entropy MAE {out['intact_entropy_mae_bits']['mean']:.4f} bits; most destructive head {worst} "
        f"(x{heads[worst]['ratio']['mean']:.1f}); layer ablations: " + ", ".join(
            f"{k} x{v['ratio']['mean']:.1f}" for k, v in out["layer_ablation"].items()),
    ]
    return out


def records(g: Geometry) -> list[tuple]:
    """Long-format rows (seed, step=-1, layer, head, name, value)."""
    rows = []
    first = min(g.attn_entropy)
    for e, s in enumerate(g.seeds):
        for h in range(g.key_offdiag.shape[1]):
            rows += [(s, -1, first, h, "key_offdiag_abs_cos", float(g.key_offdiag[e, h])),
                     (s, -1, first, h, "key_offdiag_abs_cos_token_only", float(g.key_offdiag_static[e, h])),
                     (s, -1, first, h, "key_offdiag_abs_cos_centred", float(g.key_offdiag_centred[e, h])),
                     (s, -1, first, h, "key_offdiag_abs_cos_init", float(g.key_offdiag_init[e, h]))]
        rows.append((s, -1, first, -1, "key_offdiag_abs_cos_all_heads", float(g.key_offdiag_concat[e])))
        for i in g.attn_entropy:
            for h in range(g.attn_entropy[i].shape[1]):
                rows += [(s, -1, i, h, "attn_entropy_bits", float(g.attn_entropy[i][e, h])),
                         (s, -1, i, h, "attn_entropy_ratio", float(g.attn_entropy_ratio[i][e, h]))]
            rows += [(s, -1, i, -1, "value_pc1_variance", g.value_var[i][e][0]),
                     (s, -1, i, -1, "value_pc1_spearman_posterior_entropy", g.value_spearman[i][e])]
        rows.append((s, -1, -1, -1, "entropy_mae_intact", float(g.intact_mae[e])))
        for (i, h), v in g.head_mae.items():
            rows.append((s, -1, i, h, "entropy_mae_head_zeroed", float(v[e])))
        for i, v in g.layer_mae.items():
            rows.append((s, -1, i, -1, "entropy_mae_layer_skipped", float(v[e])))
    return rows


def _ci(d: dict, f: str = "{:.3f}") -> str:
    return f"{f.format(d['mean'])} [{f.format(d['ci_low'])}, {f.format(d['ci_high'])}]"


def sections(g: Geometry, config: dict) -> list[tuple[str, str]]:
    s = summarize(g, config["task"], config["sequences"])
    n = len(g.seeds)
    setting = (f"Run {config['run_id']}: {config['arch']} {config['model']} on {config['task']}, "
               f"{config['steps']} steps, seeds {config['seeds']}; measured on {config['sequences']} evaluation "
               f"sequences. Intervals: 95% t-intervals of the mean over the {n} seeds.")
    keys = ["| quantity | mean [95% CI] over seeds |", "|---|---|",
            f"| layer-0 mean off-diagonal \\|cos\\|, per head then averaged | {_ci(s['key_offdiag_abs_cos_layer0'])} |",
            f"| the same, all heads' keys concatenated | {_ci(s['key_offdiag_abs_cos_layer0_all_heads'])} |",
            f"| centred keys (their mean over the tokens subtracted; a regular simplex gives "
            f"{1 / (len(g.hyp_tokens) - 1):.3f}) | {_ci(s['key_offdiag_abs_cos_layer0_centred'])} |",
            f"| keys of the token embeddings alone (no position, no context) | "
            f"{_ci(s['key_offdiag_abs_cos_layer0_token_only'])} |",
            f"| the same model at initialisation (baseline) | {_ci(s['key_offdiag_abs_cos_layer0_init'])} |",
            f"| random vectors in d_head = {g.key_cos.shape[-1]} dims (expected) | "
            f"{math.sqrt(2 / (math.pi * g.key_cos.shape[-1])):.3f} |"]
    ent = ["| layer | attention entropy (bits) | entropy / uniform | value PC1 variance share "
           "| Spearman(PC1, posterior entropy) |",
           "|---|---|---|---|---|"]
    for i in sorted(g.attn_entropy):
        ent.append(f"| {i} | {_ci(s['attention_entropy_bits'][i])} | {_ci(s['attention_entropy_ratio'][i])} | "
                   f"{_ci(s['value_pc1_variance'][i])} | "
                   f"{_ci(s['value_pc1_spearman_posterior_entropy'][i], '{:+.3f}')} |")
    heads = ["| head zeroed | entropy MAE (bits) | ratio to intact |", "|---|---|---|",
             f"| none (intact) | {_ci(s['intact_entropy_mae_bits'], '{:.4f}')} | 1 |"]
    heads += [f"| {k} | {_ci(v['mae'], '{:.4f}')} | {_ci(v['ratio'], '{:.2f}')} |"
              for k, v in s["head_ablation"].items()]
    layers = ["| block skipped | entropy MAE (bits) | ratio to intact |", "|---|---|---|"]
    layers += [f"| {k} | {_ci(v['mae'], '{:.4f}')} | {_ci(v['ratio'], '{:.2f}')} |"
               for k, v in s["layer_ablation"].items()]
    return [("Setting", setting), ("Summary", "\n".join(f"- {line}" for line in s["headline"])),
            (f"Key orthogonality ({g.hyp_words})", "\n".join(keys)),
            ("Attention entropy and value manifold by layer", "\n".join(ent)),
            ("Head ablation", "\n".join(heads)), ("Layer ablation", "\n".join(layers))]
