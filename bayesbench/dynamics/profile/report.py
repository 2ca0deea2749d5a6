"""The one-page Markdown report of a profile study (written beside the store, figures linked).

It states what was measured: each statistic beside its shuffle null with the interval of the
excess over seeds, and a verdict only where the interval says so."""

from __future__ import annotations

import math
import os

from ..intervals import fmt
from ..report import report_dir, write_report

LAW_LABELS = {
    "sign_alpha": "sign agreement of Delta s_c with A, alpha-weighted",
    "sign_abs": "sign agreement, |alpha A|-weighted",
    "cosine": "cos(row-centred Delta s, alpha A)",
    "query_test": "queries with sum_j A_ij Delta alpha_ij > 0",
    "kappa": "kappa = <Delta s_c, alpha A> / (eta ||alpha A||^2) (per-seed medians)",
    "own_cosine": "cos(own W_Q/W_K part of J Delta theta, alpha A)",
    "rest_cosine": "cos(everything else in J Delta theta, alpha A)",
}


def _f(x, fmt_: str = ".3f") -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, fmt_)


def verdict(interval: dict, positive: str, negative: str) -> str:
    """`positive` / `negative` when the 95% interval excludes 0 on that side, else 'cannot tell'."""
    lo, hi = interval.get("ci_low", math.nan), interval.get("ci_high", math.nan)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "cannot tell (fewer than 2 seeds with a value)"
    if lo > 0:
        return positive
    if hi < 0:
        return negative
    return "cannot tell at this scale (the interval contains 0)"


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
            f"sequences, scored on {config['scored_positions']}"
            f"{'; entropy MAE with each head zeroed' if config.get('head_ablation') else ''}\n"
            f"- wall time {_f(t.get('wall_s'), '.0f')} s on {config['device']} ({config['threads']} threads); "
            f"{_f(t.get('hooks_s'), '.0f')} s of it inside the profiler's hooks "
            f"({t.get('profiled_steps')} probed steps, {t.get('law_checks')} law checks, {t.get('records')} records)")


def _law(summary: dict) -> str:
    law = summary.get("law", {})
    if not law:
        return "No routing-law checks in this study (--law-every 0)."
    parts = ["Per layer, over every (seed, checked step, head). The null pairs each sequence's score change with "
             "another sequence's alpha and A of the same step (all cyclic shifts, averaged); the excess is the "
             "statistic minus its null, its 95% interval a t-interval over the per-seed means (the seeds are the "
             "independent unit, not the checks). Definitions: docs/dynamics.md."]
    for layer, v in sorted(law.items(), key=lambda kv: int(kv[0])):
        rows = [f"**Layer {layer}** ({v['checks']} checks over {v['seeds']} seeds)", "",
                "| statistic | value | shuffle null | excess [95% CI] | above its null in | verdict |",
                "|---|---|---|---|---|---|"]
        for key, label in LAW_LABELS.items():
            d = v.get(key)
            if not d:
                continue
            f = "{:+.3g}" if key == "kappa" else "{:+.4f}"
            rows.append(f"| {label} | {_f(d['value'], '.4g')} | {_f(d['null'], '.4g')} | "
                        f"{fmt(d['excess'], f)} | {_f(d['above_null'], '.0%')} | "
                        f"{verdict(d['excess'], 'above its null', 'below its null')} |")
        r2, share, shift = v.get("linearity_r2", {}), v.get("own_share", {}), v.get("row_shift_share", {})
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
    rows = ["| layer | t90 frame (steps) | t90 precision (steps) | lead (steps) [95% CI] | t90 frame (lr budget) | "
            "t90 precision (lr budget) | lead (lr budget) [95% CI] | frame first in | verdict |",
            "|---|---|---|---|---|---|---|---|---|"]
    for layer, v in sorted(frames.items(), key=lambda kv: int(kv[0])):
        ld = v["lead"]
        rows.append(f"| {layer} | {fmt(ld['t90_frame_steps'], '{:.0f}')} | "
                    f"{fmt(ld['t90_precision_steps'], '{:.0f}')} | "
                    f"{fmt(ld['lead_steps'], '{:+.0f}')} | {fmt(ld['t90_frame_budget'], '{:.3f}')} | "
                    f"{fmt(ld['t90_precision_budget'], '{:.3f}')} | {fmt(ld['lead_budget'], '{:+.3f}')} | "
                    f"{ld['frame_first_seeds']}/{ld['seeds']} seeds | "
                    f"{verdict(ld['lead_steps'], 'the frame settled first', 'calibration settled first')} |")
    fr = ["| layer | velocity freeze step per seed | seeds frozen | share of the MAE gain after the freeze | "
          "freeze per unit of learning rate | drift-to-final criterion fires at |", "|---|---|---|---|---|---|"]
    for layer, v in sorted(frames.items(), key=lambda kv: int(kv[0])):
        fr.append(f"| {layer} | {v['freeze_steps']} | {v['frozen_seeds']}/{len(v['freeze_steps'])} | "
                  f"{_f(v['share_after_mean'], '.0%')} | {v.get('freeze_steps_per_lr')} | "
                  f"{v['drift_criterion_steps']} |")
    return (f"Frame progress = 1 - drift/drift(first checkpoint), drift the mean TV distance of a layer's attention "
            f"rows to the last checkpoint's; precision progress = the share of the run's entropy-MAE gain made so far. "
            f"t90: where each first reaches 0.9 (interpolated between checkpoints), on steps and on the share of the "
            f"learning-rate budget sum(lr) spent; lead = t90(precision) - t90(frame), positive when the maps settle "
            f"first; 95% intervals over seeds (t for the lead; bootstrap for the t90s, which stay in the run's "
            f"steps and in [0, 1] of its budget). Entropy MAE (bits, mean over seeds) went from "
            f"{_f(mae.get('first'), '.4f')} at step {mae.get('first_step')} to {_f(mae.get('last'), '.4f')} at step "
            f"{mae.get('last_step')}; KL from {_f(kl.get('first'), '.4f')} to {_f(kl.get('last'), '.4f')}.\n\n"
            + "\n".join(rows) +
            "\n\nFreeze: the first checkpoint from which a layer's map velocity (TV distance between consecutive "
            "checkpoints per step) stays at most 10% of its largest value (None: still moving at the end); per unit "
            "of learning rate: the same with the TV distance per unit of sum(lr) spent, which does not fire only "
            "because a schedule has run out of learning rate. The "
            "drift-to-final criterion (drift <= 10% of its first value) is shown for the record: drift is 0 at the "
            "last checkpoint by construction, so it fires by then in every run.\n\n" + "\n".join(fr))


def _relevance(summary: dict) -> str | None:
    rel = summary.get("relevance") or {}
    if not rel:
        return None
    rows = ["| layer | top-1 share: A (first / last tenth) | top-1 share: alpha | chance | rank under A (0 = first) "
            "| rank under alpha | t(alpha) - t(A) at 0.5 [95% CI] | A first in | verdict |",
            "|---|---|---|---|---|---|---|---|---|"]
    for layer, v in sorted(rel.items(), key=lambda kv: int(kv[0])):
        rows.append(
            f"| {layer} | {fmt(v['relevant_top1_adv_first'])} / {fmt(v['relevant_top1_adv_last'])} | "
            f"{fmt(v['relevant_top1_alpha_first'])} / {fmt(v['relevant_top1_alpha_last'])} | "
            f"{fmt(v['relevant_top1_chance_first'])} | {fmt(v['relevant_adv_rank_first'])} / "
            f"{fmt(v['relevant_adv_rank_last'])} | {fmt(v['relevant_alpha_rank_first'])} / "
            f"{fmt(v['relevant_alpha_rank_last'])} | {fmt(v['lead'], '{:+.0f}')} | "
            f"{v['adv_first_seeds']}/{v['seeds']} seeds (attention never reached 0.5 in {v['alpha_never_seeds']}) | "
            f"{_sign_verdict(v)} |")
    return ("Bijection with repeated keys: for a query at a key seen before, the relevant keys are the value "
            "positions right after its earlier occurrences. Per seed, the layer's retrieval head (largest late "
            "top-1 share under alpha); shares over the queries with a relevant key, first and last tenth of the "
            "checks, mean [95% bootstrap interval] over seeds; t = first checked step where the running mean "
            "over 5 checks reaches 0.5; the lead's t-interval uses the seeds where both happened, the verdict a sign "
            "test over every seed where at least one did.\n\n" + "\n".join(rows))


def _sign_verdict(v: dict) -> str:
    """From the sign test over seeds (censored leads count by their sign)."""
    p = v.get("sign_test_p", 1.0)
    if p >= 0.05:
        return f"cannot tell at this scale (sign test over seeds p = {p:.2g})"
    first = "the advantage pointed first" if v["adv_first_seeds"] > v["alpha_first_seeds"] else \
        "attention concentrated first"
    return f"{first} (sign test p = {p:.2g})"


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
    leads = ["| lead | steps [95% CI over seeds] | n |", "|---|---|---|"]
    leads += [f"| {k} | {fmt(v, '{:+.0f}')} | {v['n']} |" for k, v in heads["leads"].items()]
    return ("Heads ranked within each layer and seed by their final ablation damage (entropy MAE with the head "
            "zeroed minus intact, bits); timings in steps, mean [95% t-interval] over seeds. A lead 'X_after_Y' "
            "is t(X) - t(Y) per seed.\n\n" + "\n".join(rows) + "\n\n" + "\n".join(leads))


def _probe(summary: dict) -> str:
    rows = ["| quantity | layer | first probed step | value | last probed step | value |", "|---|---|---|---|---|---|"]
    for name, layers in summary.get("probe", {}).items():
        for layer, v in sorted(layers.items(), key=lambda kv: int(kv[0])):
            rows.append(f"| {name} | {layer} | {v['first_step']} | {_f(v['first'], '.4g')} | {v['last_step']} | "
                        f"{_f(v['last'], '.4g')} |")
    return "Mean over seeds and heads (see docs/dynamics.md for each definition).\n\n" + "\n".join(rows)


def profile_sections(config: dict, summary: dict) -> list[tuple[str, str]]:
    sections = [("Setup", _setup(config, summary)), ("Routing law against its shuffle null", _law(summary)),
                ("Frame vs precision", _frames(summary))]
    for title, body in (("Relevant key: advantage vs attention", _relevance(summary)),
                        ("Per-head specialisation timing", _heads(summary))):
        if body:
            sections.append((title, body))
    return sections + [("Probe quantities", _probe(summary))]


def write_profile_report(study_id: str, config: dict, summary: dict, figures: list[str], db: str | None) -> str:
    path = os.path.join(report_dir(db), f"{study_id}.md")
    return write_report(path, f"Profile {study_id}: gradient dynamics of attention", profile_sections(config, summary),
                        figures)
