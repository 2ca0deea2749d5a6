"""`bayesbench geometry RUN`: read a trained transformer's geometry (Paper I, arXiv 2512.22471,
section 5), beside the same model at initialisation, store the numbers, draw the figures and
write a Markdown report with its verdicts.

    bayesbench train --task bijection --arch transformer --preset quick --seeds 0,1,2,3,4
    bayesbench geometry RUN_ID_OR_DIR [--sequences 1024] [--min-seeds 5] [--json]

RUN is a run directory (holding checkpoint.pt), a checkpoint file, or a run_id of the results
store. The study takes a `GeometryConfig` (cli/geometry.py builds it). docs/geometry.md explains
every quantity.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch

from ...stats import fisher_z_interval, log_interval, logit_interval, ratio_interval, t_interval
from ..config import FieldError, check_choice, check_int
from ..cut_short import removed_if_stopped
from ..report import report_dir, write_report
from ..store import delete_study, register_study, write_dynamics
from ..verdicts import adjust, fixed, fmt, test, verdict_table
from .measure import ERRORS, Geometry, check_transformer, measure, random_abs_cos

MIN_SEEDS = 5  # intervals over seeds need enough seeds to mean something
UNIQUE = 2.0  # "uniquely destructive": the top head at least twice as destructive as the second


@dataclass(frozen=True)
class GeometryConfig:
    """What `bayesbench geometry` is asked to measure, checked (a bad value: `FieldError`)."""

    run: str
    sequences: int = 1024
    min_seeds: int = MIN_SEEDS
    sets: str = "per-seed"  # each seed's own evaluation sequences, or "shared" (one set for all: dynamics.sets)
    db: str | None = None
    as_json: bool = False

    def __post_init__(self) -> None:
        from ..sets import SETS

        check_int("sequences", self.sequences, 2)
        check_int("min_seeds", self.min_seeds, 2, "an interval over seeds needs at least 2")
        check_choice("sets", self.sets, SETS)


def _load(run: str, db: str | None):
    from ...training.checkpoint import load_result
    from ..runs import find_checkpoint

    return load_result(find_checkpoint(run, db, "run"))


def run_geometry(cfg: GeometryConfig) -> dict:
    """Measure, store, plot and report the geometry of the run `cfg.run` and of the same model at
    initialisation (same seeds); returns the summary. A run with fewer than `cfg.min_seeds` seeds
    is refused (its intervals would say little)."""
    from ...models import get_model
    from ...training.result import task_of
    from ..sets import member_sets
    from . import plots as geometry_plots

    run, sequences, db = cfg.run, cfg.sequences, cfg.db
    result = _load(run, db)
    ident = result.identity
    model = check_transformer(result.model)
    if len(result.seeds) < cfg.min_seeds:
        raise FieldError("min_seeds", f"is {cfg.min_seeds} and the run has {len(result.seeds)} seeds {result.seeds}: "
                                      f"the geometry's intervals over seeds need at least that many (train more "
                                      f"seeds, or lower the minimum)")
    task = task_of(result)
    init = check_transformer(get_model(ident["arch"], task, seeds=ident["seeds"], max_len=ident["max_len"],
                                       **ident["model"]))
    # each seed's own sequences (an evaluation seed derived from it), or one set for all (--sets shared)
    batch = member_sets(task, sequences, "geometry", list(result.seeds), cfg.sets)
    g = measure(model, batch, task, init_model=init)
    g0 = measure(init, batch, task)
    study_id = f"geometry-{result.run_id}"
    config = {"run": os.path.abspath(run) if os.path.exists(run) else run, "checkpoint": result.checkpoint,
              "run_id": result.run_id, "task": task.describe(), "arch": ident["arch"],
              "model": ident["model"], "seeds": result.seeds, "steps": result.steps, "sequences": sequences,
              "sets": cfg.sets}
    delete_study(study_id, path=db)  # measuring a run again replaces its earlier measurements
    summary = summarize(g, task.describe(), sequences, g0)
    out_dir = os.path.join(report_dir(db), study_id)
    setting = (f"{ident['arch']} on {task.describe()}, {result.steps} training steps, seeds {result.seeds}; "
               f"{sequences} evaluation sequences")
    figures = geometry_plots.all_figures(out_dir, g, setting, g0)
    register_study(study_id, "geometry", config, run_id=result.run_id, path=db)
    with removed_if_stopped(study_id, "geometry", db):
        write_dynamics(study_id, records(g) + records(g0, "init_"), path=db)
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
    seed). Ranked and measured on the same sequences the quotient is >= 1 by construction, so it
    is also given *cross-validated*: heads ranked on one half of the evaluation sequences, their
    ratios measured on the other (both ways, the log quotients averaged per seed); for heads
    that are equally destructive its null is 1."""
    out = {}
    intact = g.intact_mae[m]
    for layer in sorted({i for i, _ in g.head_mae}):
        keys = [k for k in g.head_mae if k[0] == layer]
        ratios = torch.stack([g.head_mae[k][m] / intact for k in keys])  # [H, E]
        if ratios.shape[0] < 2:
            continue
        top2 = ratios.topk(2, dim=0).values
        row = {"top": ratio_interval(top2[0].tolist()), "second": ratio_interval(top2[1].tolist()),
               "top_over_second": ratio_interval((top2[0] / top2[1]).tolist())}
        if g.head_halves is not None:
            row["top_over_second_cross"] = log_interval(_cross_values(g, layer, m), null=1.0)
        out[f"L{layer}"] = row
    return out


def _cross_values(g: Geometry, layer: int, m: int = 0) -> list[float]:
    """Per seed, the cross-validated top / second damage quotient of `layer` (`_ranked_heads`)."""
    if g.head_halves is None or g.intact_halves is None:
        raise ValueError("the cross-validated quotient needs the measurement's halves (head_halves, intact_halves)")
    head_halves, intact_halves = g.head_halves, g.intact_halves
    keys = [k for k in g.head_mae if k[0] == layer]
    halves = torch.stack([head_halves[k][:, m] / intact_halves[:, m] for k in keys])  # [H, 2, E]
    logq = []
    for rank_on, measure_on in ((0, 1), (1, 0)):
        order = halves[:, rank_on].argsort(0, descending=True)
        logq.append((halves[:, measure_on].gather(0, order[:1])[0] / halves[:, measure_on].gather(0, order[1:2])[0])
                    .log())
    return (0.5 * (logq[0] + logq[1])).exp().tolist()


def _ablated(mae: torch.Tensor, intact: torch.Tensor) -> dict:
    return {"mae": log_interval(mae.tolist()), "ratio": ratio_interval((mae / intact).tolist())}


def _paired(trained: list[float], init: list[float]) -> dict:
    """The per-seed change trained - init, a t-interval over seeds with its test against 0."""
    return t_interval([a - b for a, b in zip(trained, init) if math.isfinite(a) and math.isfinite(b)], null=0.0)


def _quantities(g: Geometry) -> dict:
    """Every per-seed quantity of `g`, one value per seed (heads averaged), by name, with its scale."""
    out = {}
    for k in g.keys:
        for f in ("offdiag", "concat", "static", "centred"):
            out[f"keys/{k.name}/{f}"] = (_per_seed(getattr(k, f)), "logit")
    for i in sorted(g.attn_entropy):
        out[f"attention_entropy_bits/{i}"] = (_per_seed(g.attn_entropy[i]), "log")
        out[f"attention_entropy_ratio/{i}"] = (_per_seed(g.attn_entropy_ratio[i]), "logit")
        out[f"qk_cos/{i}"] = (_per_seed(g.qk_cos[i]), "logit-sym")
        out[f"qk_contrast/{i}"] = (_per_seed(g.qk_contrast[i]), "logit-2")
        out[f"value_pc1_variance/{i}"] = ([v[0] for v in g.value_var[i]], "logit")
        out[f"value_pc1_variance_raw/{i}"] = ([v[0] for v in g.value_var_raw[i]], "logit")
        # sign-aligned or absolute correlations, in [0, 1]: logit-t keeps them there
        out[f"value_pc1_spearman/{i}"] = (g.value_spearman[i], "logit")
        out[f"value_pc1_spearman_null/{i}"] = (g.value_spearman_null[i], "logit")
        out[f"value_pc1_position/{i}"] = (g.value_position[i], "logit")
        out[f"value_pc1_partial/{i}"] = (g.value_partial[i], "logit")
        out[f"value_pc1_partial_null/{i}"] = (g.value_partial_null[i], "logit")
    return out


def interval_on(values: list[float], scale: str) -> dict:
    """The interval over seeds of a geometry quantity on the scale that keeps it in its range."""
    if scale == "logit":
        return logit_interval(values)
    if scale == "logit-sym":
        return logit_interval(values, low=-1.0, high=1.0)
    if scale == "logit-2":
        return logit_interval(values, low=0.0, high=2.0)
    if scale == "fisher-z":
        return fisher_z_interval(values)
    if scale == "log":
        return log_interval(values)
    return t_interval(values)


def _z(r: float) -> float:
    return math.atanh(max(-1 + 1e-12, min(1 - 1e-12, r)))


def summarize(g: Geometry, task: str, sequences: int, g0: Geometry | None = None) -> dict:
    """JSON-ready numbers, each a mean over seeds with a 95% interval that stays in its range
    (logit-t for bounded quantities and the sign-aligned |correlations|, log-t for positive ones
    and the ablation ratios; bayesbench.stats), beside the same quantity at initialisation (`g0`)
    with the paired change; and the verdicts (`geometry_verdicts`)."""
    layers = sorted(g.attn_entropy)
    q, q0 = _quantities(g), (_quantities(g0) if g0 is not None else {})
    quantities = {}
    for name, (values, scale) in q.items():
        row = {"trained": interval_on(values, scale)}
        if name in q0:
            row["init"] = interval_on(q0[name][0], scale)
            row["change"] = _paired(values, q0[name][0])
        quantities[name] = row
    for i in layers:  # the within-position correlation against its within-position null, per seed on z
        z = [_z(a) - _z(b) for a, b in zip(g.value_partial[i], g.value_partial_null[i])
             if math.isfinite(a) and math.isfinite(b)]
        quantities[f"value_pc1_partial_excess/{i}"] = {"trained": t_interval(z, null=0.0)}
        zr = [_z(a) - _z(b) for a, b in zip(g.value_spearman[i], g.value_position[i])]
        quantities[f"value_pc1_entropy_minus_position/{i}"] = {"trained": t_interval(zr, null=0.0)}
    keys = {k.name: {"tokens": k.tokens, "words": k.words, "simplex": 1 / (len(k.tokens) - 1),
                     **{f: quantities[f"keys/{k.name}/{f}"]["trained"] for f in ("offdiag", "concat", "static",
                                                                                   "centred")},
                     "init": logit_interval(_per_seed(k.init)),
                     "init_centred": logit_interval(_per_seed(k.init_centred)),
                     "per_head": k.offdiag.mean(0).tolist()} for k in g.keys}
    ablation: dict[str, dict] = {}
    for m, metric in enumerate(ERRORS):
        intact = g.intact_mae[m]
        heads = {f"L{i}H{h}": _ablated(v[m], intact) for (i, h), v in g.head_mae.items()}
        least = torch.stack([v[m] / intact for v in g.layer_mae.values()]).min(0).values
        ablation[metric] = {
            "intact": log_interval(intact.tolist()), "heads": heads, "ranked": _ranked_heads(g, m),
            "most_destructive_head": max(heads, key=lambda k: heads[k]["ratio"]["mean"]),
            "layers": {f"L{i}": _ablated(v[m], intact) for i, v in g.layer_mae.items()},
            "least_layer_ratio": log_interval(least.tolist(), null=10.0)}
        if g0 is not None:
            ablation[metric]["intact_init"] = log_interval(g0.intact_mae[m].tolist())
            ablation[metric]["ranked_init"] = _ranked_heads(g0, m)
    out: dict[str, object] = {
        "task": task, "sequences": sequences, "seeds": g.seeds, "d_head": g.d_head,
        "random_abs_cos": random_abs_cos(g.d_head), "keys": keys, "quantities": quantities,
        **{name: {i: quantities[f"{name}/{i}"]["trained"] for i in layers}
           for name in ("attention_entropy_bits", "attention_entropy_ratio", "qk_cos", "qk_contrast",
                        "value_pc1_variance", "value_pc1_variance_raw", "value_pc1_spearman",
                        "value_pc1_spearman_null", "value_pc1_position", "value_pc1_partial",
                        "value_pc1_partial_null")},
        "ablation": ablation,
    }
    verdicts = geometry_verdicts(g, out, g0 is not None)
    out["verdicts"] = verdicts
    out["headline"] = [f"{v['verdict']}: {v['claim']} ({v['number']})" for v in verdicts
                       if v["family"] == "primary"]
    return out


def geometry_verdicts(g: Geometry, s: dict, with_init: bool) -> list[dict]:
    """The geometry's verdicts (docs/geometry.md names the primary ones), Holm within each family.

    Primary: (1) training makes the layer-0 hypothesis keys more orthogonal (centred mean
    off-diagonal |cos|, trained - init < 0); (2) attention sharpens with depth (entropy / uniform,
    last layer - layer 0 < 0); (3) the last layer's attention outputs follow the posterior entropy
    *within positions* (the partial correlation above its within-position null; not tested where
    the entropy is a function of the position); (4) one layer-0 head uniquely destructive (the
    top head's damage ratio at least UNIQUE x the second's, ranked on the other half of the
    sequences); (5) removing any layer costs more than 10x (the least layer-skip ratio > 10).
    Secondary: what training changed in each layer (sharper attention, a larger q-k contrast, a
    larger |rho(PC1, H)| than at initialisation), whether PC1 follows the entropy more than the
    position, and whether the top layer-0 head is more destructive than the second at all."""
    layers = sorted(g.attn_entropy)
    q = s["quantities"]
    out = []
    hyp = g.keys[0]
    key = f"keys/{hyp.name}/centred"
    if with_init:
        out.append(test("primary", f"training makes the layer-0 keys of the {hyp.name} more orthogonal (centred "
                                   f"mean off-diagonal |cos|, trained - init)", q[key]["change"],
                        f"the same seeds at initialisation, {fmt(q[key]['init'])}", side=-1,
                        number=f"{fmt(q[key]['trained'])}, change {fmt(q[key]['change'], '{:+.3f}')}"))
    else:
        out.append(fixed("primary", "training makes the layer-0 keys more orthogonal", fmt(q[key]["trained"]),
                         "no initialisation measured", "not tested"))
    first, last = layers[0], layers[-1]
    if last != first:
        diff = t_interval([a - b for a, b in zip(_per_seed(g.attn_entropy_ratio[last]),
                                                 _per_seed(g.attn_entropy_ratio[first]))], null=0.0)
        out.append(test("primary", f"attention sharpens with depth (entropy / uniform, layer {last} - layer {first})",
                        diff, "0: equally sharp", side=-1,
                        number=f"{fmt(q[f'attention_entropy_ratio/{first}']['trained'])} -> "
                               f"{fmt(q[f'attention_entropy_ratio/{last}']['trained'])}, "
                               f"change {fmt(diff, '{:+.3f}')}"))
    part = q[f"value_pc1_partial_excess/{last}"]["trained"]
    if part["n"] >= 2:
        out.append(test("primary", f"layer {last}'s attention outputs: PC1 tracks the posterior entropy within "
                                   f"positions (|partial Spearman| - its within-position null, on z)", part,
                        f"entropies permuted within positions, {fmt(q[f'value_pc1_partial_null/{last}']['trained'])}",
                        number=f"{fmt(q[f'value_pc1_partial/{last}']['trained'])}; excess on z {fmt(part, '{:+.3f}')}"))
    else:
        out.append(fixed("primary", f"layer {last}'s attention outputs follow the posterior entropy within positions",
                         f"raw |Spearman| {fmt(q[f'value_pc1_spearman/{last}']['trained'])}, |Spearman with "
                         f"position| {fmt(q[f'value_pc1_position/{last}']['trained'])}",
                         "the posterior entropy does not vary within positions on this tunnel", "not tested"))
    ranked = s["ablation"]["entropy_mae"]["ranked"].get(f"L{first}", {})
    cross = ranked.get("top_over_second_cross")
    if cross is not None:
        unique = log_interval(_cross_values(g, first), null=UNIQUE)
        out.append(test("primary", f"one layer-{first} head uniquely destructive (the top head's damage ratio at least "
                                   f"{UNIQUE:g}x the second's, ranked on the other half of the sequences)", unique,
                        f"{UNIQUE:g}x", null=UNIQUE, f="{:.2f}"))
    out.append(test("primary", "removing any layer costs more than 10x in entropy MAE (the least layer-skip ratio)",
                    s["ablation"]["entropy_mae"]["least_layer_ratio"], "10x", null=10.0, f="{:.2f}"))
    if cross is not None:
        out.append(test("secondary", f"the top layer-{first} head more destructive than the second at all (ranked on "
                                     f"the other half of the sequences)", cross, "1: equally destructive", null=1.0,
                        f="{:.2f}"))
    for i in layers:
        for name, words, side in (("attention_entropy_ratio", "training sharpens the attention (entropy / uniform, "
                                   "trained - init)", -1),
                                  ("qk_contrast", "training raises the q-k cosine contrast (trained - init)", 1),
                                  ("value_pc1_spearman", "training raises |Spearman(PC1, posterior entropy)| "
                                   "(trained - init)", 1)):
            row = q[f"{name}/{i}"]
            if "change" in row:
                out.append(test("secondary", f"layer {i}: {words}", row["change"],
                                f"initialisation {fmt(row['init'])}", side=side))
        out.append(test("secondary", f"layer {i}: PC1 follows the posterior entropy more than the position "
                                     f"(|rho(PC1, H)| - |rho(PC1, position)|, on z)",
                        q[f"value_pc1_entropy_minus_position/{i}"]["trained"], "0: no more than position"))
    return adjust(out)


def records(g: Geometry, prefix: str = "") -> list[tuple]:
    """Long-format rows (seed, step=-1, layer, head, name, value); names start with `prefix`
    ("init_" for the model at initialisation)."""
    rows = []
    first = min(g.attn_entropy)
    for e, s in enumerate(g.seeds):
        for k in g.keys:
            tag = k.name.replace(" ", "_")
            for h in range(k.offdiag.shape[1]):
                rows += [(s, -1, first, h, f"key_offdiag_abs_cos_{tag}", float(k.offdiag[e, h])),
                         (s, -1, first, h, f"key_offdiag_abs_cos_token_only_{tag}", float(k.static[e, h])),
                         (s, -1, first, h, f"key_offdiag_abs_cos_centred_{tag}", float(k.centred[e, h]))]
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
                     (s, -1, i, -1, "value_pc1_spearman_null", g.value_spearman_null[i][e]),
                     (s, -1, i, -1, "value_pc1_spearman_position", g.value_position[i][e]),
                     (s, -1, i, -1, "value_pc1_partial_entropy_within_position", g.value_partial[i][e]),
                     (s, -1, i, -1, "value_pc1_partial_null", g.value_partial_null[i][e])]
        for m, metric in enumerate(ERRORS):
            rows.append((s, -1, -1, -1, f"{metric}_intact", float(g.intact_mae[m, e])))
            for (i, h), v in g.head_mae.items():
                rows.append((s, -1, i, h, f"{metric}_head_zeroed", float(v[m, e])))
                if g.head_halves is not None:
                    rows += [(s, -1, i, h, f"{metric}_head_zeroed_half{k}", float(g.head_halves[(i, h)][k, m, e]))
                             for k in range(2)]
            for i, v in g.layer_mae.items():
                rows.append((s, -1, i, -1, f"{metric}_layer_skipped", float(v[m, e])))
    return [(a, b, c, d, prefix + n, v) for a, b, c, d, n, v in rows]


def _sets(config: dict) -> str:
    """Whose sequences (dynamics.sets); a study stored before per-seed sets has no "sets": shared."""
    return ("each seed its own" if config.get("sets", "shared") == "per-seed"
            else "one set shared by every seed")


def sections(g: Geometry, config: dict, s: dict | None = None) -> list[tuple[str, str]]:
    s = s or summarize(g, config["task"], config["sequences"])
    n = len(g.seeds)
    q = s["quantities"]
    setting = (f"Run {config['run_id']}: {config['arch']} {config['model']} on {config['task']}, "
               f"{config['steps']} steps, seeds {config['seeds']}; measured on {config['sequences']} evaluation "
               f"sequences ({_sets(config)}), and the same seeds at initialisation. Every number: a mean over the "
               f"{n} seeds on the scale of its 95% interval, transformed back (logit-t for bounded quantities and "
               f"the sign-aligned |correlations|: the back-transformed mean logit; log-t for positive quantities "
               f"and ratios: the geometric mean; bayesbench.stats), with that interval.")
    verdicts = ("Primary verdicts (docs/geometry.md names them before the numbers), then the secondary family; "
                "Holm's adjustment within each.\n\n**Primary**\n\n" + verdict_table(s["verdicts"], "primary")
                + "\n\n**Secondary**\n\n" + verdict_table(s["verdicts"], "secondary"))
    keys = ["| tokens | mean off-diagonal \\|cos\\|, per head then averaged | at initialisation | all heads "
            "concatenated | centred (simplex) | centred at initialisation | token embeddings alone |",
            "|---|---|---|---|---|---|---|"]
    for name, v in s["keys"].items():
        keys.append(f"| {v['words']} | {fmt(v['offdiag'])} | {fmt(v['init'])} | {fmt(v['concat'])} | "
                    f"{fmt(v['centred'])} ({v['simplex']:.3f}) | {fmt(v['init_centred'])} | {fmt(v['static'])} |")
    keys.append(f"\nRandom directions in d_head = {s['d_head']} dimensions: E|cos| = {s['random_abs_cos']:.3f}.")

    def both(name: str) -> str:
        row = q.get(name, {})
        init = f" (init {fmt(row['init'])})" if "init" in row else ""
        return f"{fmt(row.get('trained'))}{init}"

    ent = ["| layer | attention entropy (bits) | entropy / uniform | q-k cosine (authors') | max - mean q-k cosine "
           "| value PC1 share (standardised) | unstandardised |", "|---|---|---|---|---|---|---|"]
    val = ["| layer | \\|Spearman(PC1, H)\\| | its shuffle chance level | \\|Spearman(PC1, position)\\| | "
           "within-position \\|partial Spearman(PC1, H)\\| | its within-position null | excess on z |",
           "|---|---|---|---|---|---|---|"]
    for i in sorted(g.attn_entropy):
        ent.append(f"| {i} | {both(f'attention_entropy_bits/{i}')} | {both(f'attention_entropy_ratio/{i}')} | "
                   f"{both(f'qk_cos/{i}')} | {both(f'qk_contrast/{i}')} | {both(f'value_pc1_variance/{i}')} | "
                   f"{both(f'value_pc1_variance_raw/{i}')} |")
        val.append(f"| {i} | {both(f'value_pc1_spearman/{i}')} | {both(f'value_pc1_spearman_null/{i}')} | "
                   f"{both(f'value_pc1_position/{i}')} | {both(f'value_pc1_partial/{i}')} | "
                   f"{both(f'value_pc1_partial_null/{i}')} | "
                   f"{fmt(q[f'value_pc1_partial_excess/{i}']['trained'], '{:+.3f}')} |")
    out = [("Setting", setting), ("Verdicts", verdicts),
           ("Key orthogonality (layer 0)", "\n".join(keys)),
           ("Attention entropy and q-k alignment by layer", "\n".join(ent)),
           ("Value manifold, against position", "PC1 of the attention outputs g_i at the scored positions "
            "(standardised, sign-aligned with the posterior entropy H). The posterior entropy can be a function of "
            "the position, and an untrained model's PC1 tracks position: the within-position (partial) "
            "correlation, against entropies permuted within positions, is what position cannot carry (NaN where H "
            "does not vary within positions).\n\n" + "\n".join(val))]
    for metric, a in s["ablation"].items():
        heads = [f"| head zeroed | {metric} (bits) | ratio to intact |", "|---|---|---|",
                 f"| none (intact) | {fmt(a['intact'], '{:.4f}')} | 1 |"]
        heads += [f"| {k} | {fmt(v['mae'], '{:.4f}')} | {fmt(v['ratio'], '{:.2f}')} |" for k, v in a["heads"].items()]
        heads += ["", "Ranked within each seed (head indices mean nothing across seeds); the quotient of the top two "
                      "is "
                      ">= 1 by construction when ranked and measured on the same sequences, so the last column ranks "
                      "on one half of the sequences and measures on the other (its null: 1):", "",
                  "| layer | most destructive head: ratio | second: ratio | most / second | most / second, "
                  "cross-validated |", "|---|---|---|---|---|"]
        heads += [f"| {k} | {fmt(v['top'], '{:.2f}')} | {fmt(v['second'], '{:.2f}')} | "
                  f"{fmt(v['top_over_second'], '{:.2f}')} | {fmt(v.get('top_over_second_cross'), '{:.2f}')} |"
                  for k, v in a["ranked"].items()]
        layers = [f"| block skipped | {metric} (bits) | ratio to intact |", "|---|---|---|"]
        layers += [f"| {k} | {fmt(v['mae'], '{:.4f}')} | {fmt(v['ratio'], '{:.2f}')} |" for k, v in a["layers"].items()]
        out += [(f"Head ablation ({metric})", "\n".join(heads)), (f"Layer ablation ({metric})", "\n".join(layers))]
    return out
