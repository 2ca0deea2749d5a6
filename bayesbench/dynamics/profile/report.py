"""The one-page Markdown report of a profile study (written beside the store, figures linked).

It states what was measured: the verdicts first (primary, then the secondary family, each with
Holm's adjustment), then each statistic beside its control with its interval over seeds."""

from __future__ import annotations

import math
import os

from ..report import report_dir, write_report
from ..verdicts import fmt, verdict_table

LAW_LABELS = {
    "sign_alpha": "sign agreement of Delta s_c with A, alpha-weighted",
    "sign_abs": "sign agreement, |alpha A|-weighted",
    "cosine": "cos(row-centred Delta s, alpha A)",
    "query_test": "queries with sum_j A_ij Delta alpha_ij > 0",
    "kappa": "kappa = <Delta s_c, alpha A> / (eta ||alpha A||^2) (per-seed medians)",
    "own_cosine": "cos(own W_Q/W_K part of J Delta theta, alpha A)",
    "rest_cosine": "cos(everything else in J Delta theta, alpha A)",
    "value_cosine": "value law: cos(Delta v, -dL/dv)",
    "value_kappa": "value law: <Delta v, -dL/dv> / (eta ||dL/dv||^2) (per-seed medians)",
}


def _f(x, fmt_: str = ".3f") -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, fmt_)


def _setup(config: dict, summary: dict) -> str:
    seeds = config["seeds"]
    t = summary.get("timing", {})
    n = config["law_every"]
    law_when = ("routing law not checked" if n == 0 else
                f"routing law checked on {'every' if n == 1 else f'every {n}th'} probed step, on "
                f"{config.get('law_sequences', 8)} sequences of its batch per member")
    train = config["train"]
    return (f"- task `{config['task_config']}`, arch `{config['arch']}` ({config['model']}), seeds {seeds} "
            f"({len(seeds)} members trained as one ensemble, all probed in the same step)\n"
            f"- optimiser {config['optimizer']} at lr {train['lr']:g} ({train['schedule']}, warm-up "
            f"{train.get('warmup_steps', 0)}), batch {train['batch_size']}, gradient clipping {train['grad_clip']} "
            f"per member\n"
            f"- probe every {config['every']} steps through the `{config['attention']}` attention backward; "
            f"{law_when}\n"
            f"- {len(config['checkpoint_steps'])} checkpoints ({config.get('checkpoint_spacing', 'quadratic')} "
            f"spacing: steps {config['checkpoint_steps']}): attention maps of {config['probe_sequences']} fixed "
            f"sequences; entropy MAE and KL(Bayes || model) in bits on {config['eval_sequences']} fixed evaluation "
            f"sequences, scored on {config['scored_positions']}; {_sets(config)}"
            f"{'; entropy MAE with each head zeroed' if config.get('head_ablation') else ''}\n"
            f"- jitter floor: {_replicas(config)}; late map and robust endpoint: the mean of the last "
            f"{config.get('late_maps', 3)} checkpoints\n"
            f"- wall time {_f(t.get('wall_s'), '.0f')} s on {config['device']} ({config['threads']} threads; "
            f"{_f(t.get('cpu_s'), '.0f')} s of CPU); {_f(t.get('hooks_s'), '.0f')} s of it inside the profiler's hooks "
            f"({t.get('profiled_steps')} probed steps, {t.get('law_checks')} law checks, {t.get('records')} records), "
            f"{_f(t.get('replicas_cpu_s'), '.0f')} s of CPU in the replicas ({t.get('replica_steps')} member-ensemble "
            f"steps)")


def _sets(config: dict) -> str:
    """Whose probe and evaluation sequences (dynamics.sets): a study stored before they were drawn
    per seed has no "sets" and shared them."""
    if config.get("sets", "shared") == "per-seed":
        return ("each seed its own probe, evaluation and held-out sequences (their sampling variance is in the "
                "intervals)")
    return "one set of probe, evaluation and held-out sequences shared by every seed"


def _replicas(config: dict) -> str:
    r, every = config.get("replicas", 0), config.get("replica_every", 1)
    if not r:
        return "no replicas (floor 0)"
    where = "every checkpoint" if every == 1 else f"every {every}th checkpoint"
    return f"{r} replica continuations from {where} to the next, with other data orders"


def _verdicts(summary: dict) -> str:
    v = summary.get("verdicts") or []
    if not v:
        return "No verdicts (nothing measured)."
    return ("Primary verdicts (named before the study ran), then every other test as one family; each family "
            "adjusted by Holm's step-down method (held / did not hold only where the adjusted p < 0.05).\n\n"
            "**Primary**\n\n" + verdict_table(v, "primary") + "\n\n**Secondary**\n\n" + verdict_table(v, "secondary"))


def _law(summary: dict) -> str:
    law = summary.get("law", {})
    if not law:
        return "No routing-law checks in this study (law_every 0)."
    parts = ["Per layer, over every (seed, checked step, head). The null pairs each sequence's score change with "
             "another sequence's alpha and A of the same step (all cyclic shifts, averaged); the excess is the "
             "statistic minus its null, its 95% interval a t-interval over the per-seed means (the seeds are the "
             "independent unit, not the checks). Definitions: docs/dynamics.md."]
    for layer, v in sorted(law.items(), key=lambda kv: int(kv[0])):
        rows = [f"**Layer {layer}** ({v['checks']} checks over {v['seeds']} seeds)", "",
                "| statistic | value | shuffle null | excess [95% CI] | above its null in | p (unadjusted) |",
                "|---|---|---|---|---|---|"]
        for key, label in LAW_LABELS.items():
            d = v.get(key)
            if not d:
                continue
            f = "{:+.3g}" if "kappa" in key else "{:+.4f}"
            p = d["excess"].get("p", math.nan)
            rows.append(f"| {label} | {_f(d['value'], '.4g')} | {_f(d['null'], '.4g')} | "
                        f"{fmt(d['excess'], f)} | {_f(d['above_null'], '.0%')} | "
                        f"{'n/a' if not math.isfinite(p) else format(p, '.2g')} |")
        r2, share, shift = v.get("linearity_r2", {}), v.get("own_share", {}), v.get("row_shift_share", {})
        h = (summary.get("law_heldout") or {}).get(layer) or {}
        si = (summary.get("self_influence") or {}).get(layer) or {}
        if h:
            rows += ["", "On the held-out sequences (the primary statistics; the in-batch ones above are the "
                         "self-influence reference):", "",
                     "| statistic | value | shuffle null | excess [95% CI] | self-influence (in-batch - held-out) |",
                     "|---|---|---|---|---|"]
            for key in ("cosine", "value_cosine", "sign_alpha", "sign_abs", "query_test"):
                d = h.get(key)
                if d:
                    rows.append(f"| {LAW_LABELS[key]} | {_f(d['value'], '.4g')} | {_f(d['null'], '.4g')} | "
                                f"{fmt(d['excess'], '{:+.4f}')} | "
                                f"{fmt((si.get(key) or {}).get('self_term'), '{:+.4f}')} |")
        rows += ["", f"Linearity check (R^2 of the row-centred change against its first-order prediction): mean "
                     f"{fmt(r2.get('mean'), '{:.4f}')}, median {_f(r2.get('median'), '.4f')}, minimum "
                     f"{_f(r2.get('min'), '.3g')}. Share of the predicted centred change from the head's own "
                     f"W_Q/W_K update: {fmt(share.get('mean'), '{:.3f}')} (the rest comes through shared weights: "
                     f"embeddings, earlier layers, LayerNorms). Row shifts, which move no weight, were "
                     f"{fmt(shift.get('mean'), '{:.3f}')} of the raw ||Delta s||^2 (median "
                     f"{_f(shift.get('median'), '.3f')}): what an uncentred statistic counts."]
        parts.append("\n".join(rows))
    return "\n\n".join(parts)


def _frames(summary: dict) -> str:
    frames = summary.get("frames", {})
    if not frames:
        return "No checkpoints."
    cal = summary.get("calibration", {})
    mae, kl = cal.get("entropy_mae", {}), cal.get("kl", {})
    rows = ["| layer | precision by | t90 frame (steps) | t90 precision (steps) | lead (steps) [95% CI] | p | "
            "lead (lr budget) | frame first / precision first / frame never / precision never |",
            "|---|---|---|---|---|---|---|---|"]
    for layer, v in sorted(frames.items(), key=lambda kv: int(kv[0])):
        leads = [("predictive distributions (one scale)", v.get("lead_one_scale")), ("entropy MAE", v["lead"]),
                 ("KL", v["lead_kl"]), ("entropy MAE, one-interval floor", v.get("lead_one_interval_floor"))]
        for metric, ld in leads:
            if not ld:
                continue
            rows.append(f"| {layer} | {metric} | {fmt(ld['t90_frame_steps'], '{:.0f}')} | "
                        f"{fmt(ld['t90_precision_steps'], '{:.0f}')} | {fmt(ld['lead_steps'], '{:+.0f}')} | "
                        f"{_f(ld['lead_steps'].get('p'), '.2g')} | {fmt(ld['lead_budget'], '{:+.3f}')} | "
                        f"{ld['frame_first_seeds']} / {ld['precision_first_seeds']} / {ld['frame_never_seeds']} / "
                        f"{ld['precision_never_seeds']} of {ld['seeds']} |")
    fr = ["| layer | frame t90 per seed (None: not settled before the late checkpoints) | systematic distance left "
          "at the last checkpoint before them, share of the first [95% CI] | movement / jitter, last 3 intervals "
          "[95% CI] | first version: t90 frame (TV drift to final) | velocity freeze (10% of peak) | drift-to-final "
          "criterion fires at |", "|---|---|---|---|---|---|---|"]
    for layer, v in sorted(frames.items(), key=lambda kv: int(kv[0])):
        old = v["lead_first_version"]
        t90 = [None if r["t90_frame"] is None else round(r["t90_frame"]) for r in v["per_seed"].values()]
        c = v.get("freeze") or {}
        left = (f"{c['below']} of {c['seeds']} seeds below {c['threshold']:g} ({c['unreadable']} unreadable); mean "
                f"{fmt(c['mean'], '{:.3f}')}" if c else fmt(v["remaining"], "{:.3f}"))
        fr.append(f"| {layer} | {t90} | {left} (step {v['remaining_at']}) | "
                  f"{fmt(v['last_movement_vs_chance'], '{:.2f}')} | {fmt(old['t90_frame_steps'], '{:.0f}')} | "
                  f"{v['velocity_freeze_steps']} | {v['drift_criterion_steps']} |")
    kind = next(iter(frames.values())).get("floor")
    floor = ("the floor of each checkpoint is half the mean pairwise squared distance between the drift vectors "
             "(to their own late value) of the run's continuation of the previous checkpoint and its replicas, run "
             "on through the late window: right for any jitter process" if kind == "through the late window" else
             "the jitter floor of each checkpoint is the mean pairwise distance between the run's own "
             "continuation of the previous checkpoint and its replicas, J2 (1 + 1/K) / 2 (right only for jitter "
             "independent between checkpoints)" if next(iter(frames.values())).get("replicas")
             else "no replicas were run, so the floor is 0")
    return (f"Frame distance: the squared distance of a layer's attention rows to the late map (the mean of the "
            f"last checkpoints' maps); precision distance: the entropy MAE (or KL) minus its mean over the last "
            f"checkpoints, squared; {floor}. The systematic distance S = sqrt(distance - floor share); progress = "
            f"1 - S / S(first); t90: where its running mean over 3 checkpoints reaches 0.9 and stays, before the "
            f"late checkpoints (interpolated), on steps and on the learning-rate budget; lead = t90(precision) - "
            f"t90(frame), positive when the maps settle first, a t-interval over the seeds where both settled (the "
            f"t90s: logit-t intervals inside the run); where some never settled, the order is a sign test over "
            f"seeds. Entropy MAE (bits, mean over seeds) went from "
            f"{_f(mae.get('first'), '.4f')} at step {mae.get('first_step')} to {_f(mae.get('last'), '.4f')} at step "
            f"{mae.get('last_step')}; KL from {_f(kl.get('first'), '.4f')} to {_f(kl.get('last'), '.4f')}.\n\n"
            + "\n".join(rows) +
            "\n\nFreeze: a frame is frozen once less than 10% of its systematic distance to the late map is left; "
            "the table gives that share at the last checkpoint before the late ones. Beside it the movement over each "
            "of the last 3 intervals against the replicas' jitter over it (1: as much as chance; a steady drift "
            "smaller than the jitter per interval stays near 1 and still adds up). The same learning rate moves the "
            "run and its replicas, so both hold per unit of learning rate. The first version's criteria are shown "
            "for the record: the TV drift to the final map and the velocity at 10% of its peak.\n\n" + "\n".join(fr))


def _crosslag(summary: dict) -> str | None:
    cross = summary.get("crosslag") or {}
    if not cross:
        return None
    rows = ["| layer | direction | lagged partial correlation | time-shift null | excess [95% CI] | p |",
            "|---|---|---|---|---|---|"]
    for layer, v in sorted(cross.items(), key=lambda kv: int(kv[0])):
        for direction in ("value_to_routing", "routing_to_value"):
            d = v.get(direction)
            if d:
                rows.append(f"| {layer} | {direction.replace('_', ' ')} | {_f(d['value'], '+.3f')} | "
                            f"{_f(d['null'], '+.3f')} | {fmt(d['excess'], '{:+.3f}')} | "
                            f"{_f(d['excess'].get('p'), '.2g')} |")
    return ("Log sizes of the routing update ||Delta s^c|| and of the value update ||Delta v|| at each checked "
            "step; the partial correlation of one at a check with the other at the next check, given the other at "
            "the first and a cubic trend in time, against the same with one series shifted in time "
            "(docs/dynamics.md). Per seed the heads' z-values averaged; intervals over seeds.\n\n" + "\n".join(rows))


def _relevance(summary: dict) -> str | None:
    rel = summary.get("relevance") or {}
    if not rel:
        return None
    rows = ["| layer | top-1 share: A (first / last tenth) | permuted-label control: A | excess over the control "
            "(last tenth) | top-1 share: alpha | |R|/n | t(alpha) - t(A) at 0.5 [95% CI] | A first in |",
            "|---|---|---|---|---|---|---|---|"]
    for layer, v in sorted(rel.items(), key=lambda kv: int(kv[0])):
        rows.append(
            f"| {layer} | {fmt(v['relevant_top1_adv_first'])} / {fmt(v['relevant_top1_adv_last'])} | "
            f"{fmt(v['label_top1_adv_control_first'])} / {fmt(v['label_top1_adv_control_last'])} | "
            f"{fmt(v['excess_over_control_last'], '{:+.3f}')} | "
            f"{fmt(v['relevant_top1_alpha_first'])} / {fmt(v['relevant_top1_alpha_last'])} | "
            f"{fmt(v['relevant_top1_chance_first'])} | {fmt(v['lead'], '{:+.0f}')} | "
            f"{v['adv_first_seeds']}/{v['seeds']} seeds (attention never reached 0.5 in {v['alpha_never_seeds']}; "
            f"sign test p = {v['sign_test_p']:.2g}) |")
    return ("Bijection with repeated keys: for a query at a key seen before, the relevant keys are the value "
            "positions right after its earlier occurrences. Per seed, the layer's retrieval head (largest late "
            "top-1 share under alpha); shares over the queries with a relevant key, first and last tenth of the "
            "checks, mean [95% logit-t interval] over seeds. The control recomputes the advantage against permuted "
            "targets (class c -> c + 1 mod V) and counts its top key at the permuted label's positions: what "
            "copying a label alone gives; the excess over it is what relevance adds. t = first checked step where "
            "the running mean over 5 checks reaches 0.5.\n\n" + "\n".join(rows))


def _heads(summary: dict) -> str | None:
    heads = summary.get("heads") or {}
    if not heads:
        return None
    rows = ["| layer, rank by final damage | ablation damage (bits) | t90 damage | t90 entropy drop | "
            "peak map velocity at | peak mean abs(A) at |", "|---|---|---|---|---|---|"]
    for key, v in heads["by_rank"].items():
        rows.append(f"| {key} | {fmt(v['damage'], '{:.4f}')} | {fmt(v['t90_damage'], '{:.0f}')} | "
                    f"{fmt(v['t90_entropy'], '{:.0f}')} | {fmt(v['t_peak_velocity'], '{:.0f}')} | "
                    f"{fmt(v['t_peak_advantage'], '{:.0f}')} |")
    leads = ["| lead | steps [95% CI over seeds] | n | p |", "|---|---|---|---|"]
    leads += [f"| {k} | {fmt(v, '{:+.0f}')} | {v['n']} | {_f(v.get('p'), '.2g')} |" for k, v in heads["leads"].items()]
    return ("Heads ranked within each layer and seed by their final ablation damage (entropy MAE with the head "
            "zeroed minus intact, bits); t90s on the checkpoints (the damage and the attention entropy of the probe "
            "batch's maps, each against the mean of its last checkpoints), mean [95% interval] over seeds. A lead "
            "'X_after_Y' is t(X) - t(Y) per seed.\n\n" + "\n".join(rows) + "\n\n" + "\n".join(leads))


def _probe(summary: dict) -> str:
    rows = ["| quantity | layer | first probed step | value | last probed step | value |", "|---|---|---|---|---|---|"]
    for name, layers in summary.get("probe", {}).items():
        for layer, v in sorted(layers.items(), key=lambda kv: int(kv[0])):
            rows.append(f"| {name} | {layer} | {v['first_step']} | {_f(v['first'], '.4g')} | {v['last_step']} | "
                        f"{_f(v['last'], '.4g')} |")
    return "Mean over seeds and heads (see docs/dynamics.md for each definition).\n\n" + "\n".join(rows)


def profile_sections(config: dict, summary: dict) -> list[tuple[str, str]]:
    sections = [("Setup", _setup(config, summary)), ("Verdicts", _verdicts(summary)),
                ("Routing and value laws against their shuffle nulls", _law(summary)),
                ("Frame vs precision against the jitter floor", _frames(summary))]
    for title, body in (("Do routing and value updates feed each other?", _crosslag(summary)),
                        ("Relevant key: advantage vs attention, and the label route", _relevance(summary)),
                        ("Per-head specialisation timing", _heads(summary))):
        if body:
            sections.append((title, body))
    return sections + [("Probe quantities", _probe(summary))]


def write_profile_report(study_id: str, config: dict, summary: dict, figures: list[str], db: str | None) -> str:
    path = os.path.join(report_dir(db), f"{study_id}.md")
    return write_report(path, f"Profile {study_id}: gradient dynamics of attention", profile_sections(config, summary),
                        figures)
