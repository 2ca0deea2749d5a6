"""The one-page Markdown report of a profile study (written beside the store, figures linked)."""

from __future__ import annotations

import math
import os

from ..report import report_dir, write_report


def _f(x, fmt: str = ".3f") -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, fmt)


def profile_sections(config: dict, summary: dict) -> list[tuple[str, str]]:
    seeds = config["seeds"]
    t = summary.get("timing", {})
    n = config["law_every"]
    law_when = ("routing law not checked" if n == 0 else
                f"routing law checked on {'every' if n == 1 else f'every {n}th'} probed step, on "
                f"{config.get('law_sequences', 8)} sequences of its batch per member")
    setup = (f"- task `{config['task_config']}`, arch `{config['arch']}` ({config['model']}), seeds {seeds} "
             f"({len(seeds)} members trained as one ensemble, all probed in the same step)\n"
             f"- optimiser {config['optimizer']} at lr {config['train']['lr']:g} ({config['train']['schedule']}), "
             f"batch {config['train']['batch_size']}, gradient clipping {config['train']['grad_clip']} per member\n"
             f"- probe every {config['every']} steps through the `{config['attention']}` attention backward; "
             f"{law_when}\n"
             f"- {len(config['checkpoint_steps'])} checkpoints (steps {config['checkpoint_steps']}): attention maps of "
             f"{config['probe_sequences']} fixed sequences; entropy MAE and KL(Bayes || model) in bits on "
             f"{config['eval_sequences']} fixed evaluation sequences, scored on {config['scored_positions']}\n"
             f"- wall time {_f(t.get('wall_s'), '.0f')} s on {config['device']} ({config['threads']} threads); "
             f"{_f(t.get('hooks_s'), '.0f')} s of it inside the profiler's hooks "
             f"({t.get('profiled_steps')} probed steps, {t.get('law_checks')} law checks, {t.get('records')} records)")
    law = summary.get("law", {})
    rows = ["| layer | R^2 mean | R^2 median | R^2 min | sign agreement | centred sign agreement | "
            "cos(Delta s, alpha A) | median rel. error of prediction | checks (seed x head x step) |",
            "|---|---|---|---|---|---|---|---|---|"]
    for layer, v in sorted(law.items(), key=lambda kv: int(kv[0])):
        rows.append(f"| {layer} | {_f(v['r2_mean'], '.4f')} | {_f(v['r2_median'], '.4f')} | {_f(v['r2_min'], '.4f')} | "
                    f"{_f(v['sign_agreement'])} | {_f(v['sign_agreement_centred'])} | {_f(v.get('cosine'))} | "
                    f"{_f(v['pred_rel_error_median'], '.2e')} | {v['checks']} |")
    law_text = ("Per layer, over every (seed, head, checked step): R^2 of the actual score change Delta s after the "
                "optimiser step against its first-order prediction (a Jacobian-vector product along the step's "
                "parameter update), and the alpha-weighted share of visible (i, j) where sign(Delta s_ij) = "
                "sign(A_ij) (centred: Delta s minus its alpha-mean per query), and the cosine between Delta s and "
                "alpha * A (= -dL/ds).\n\n" + "\n".join(rows)
                if law else "No routing-law checks in this study (--law-every 0).")
    frames = summary.get("frames", {})
    cal = summary.get("calibration", {})
    rows = ["| layer | freeze step per seed | mean | entropy MAE at freeze | final entropy MAE "
            "| MAE gained after freeze "
            "| share of the run's MAE gain after freeze |", "|---|---|---|---|---|---|---|"]
    for layer, v in sorted(frames.items(), key=lambda kv: int(kv[0])):
        rows.append(f"| {layer} | {v['freeze_steps']} | {_f(v['freeze_step_mean'], '.0f')} | "
                    f"{_f(v['mae_at_freeze_mean'], '.4f')} | {_f(v['mae_final_mean'], '.4f')} | "
                    f"{_f(v['gained_after_mean'], '.4f')} | {_f(v['share_after_mean'], '.0%')} |")
    mae = cal.get("entropy_mae", {})
    kl = cal.get("kl", {})
    frame_text = (f"Drift = mean total-variation distance between a layer's attention rows at a checkpoint and at "
                  f"the last checkpoint (probe sequences, heads, queries); a layer is frozen at the first "
                  f"checkpoint where its drift is at most 10% of its drift at the first checkpoint. Entropy MAE "
                  f"(bits, mean over seeds) went from {_f(mae.get('first'), '.4f')} at step {mae.get('first_step')} to "
                  f"{_f(mae.get('last'), '.4f')} at step {mae.get('last_step')}; KL from {_f(kl.get('first'), '.4f')} "
                  f"to {_f(kl.get('last'), '.4f')}.\n\n" + "\n".join(rows)) if frames else "No checkpoints."
    probe = summary.get("probe", {})
    rows = ["| quantity | layer | first probed step | value | last probed step | value |", "|---|---|---|---|---|---|"]
    for name, layers in probe.items():
        for layer, v in sorted(layers.items(), key=lambda kv: int(kv[0])):
            rows.append(f"| {name} | {layer} | {v['first_step']} | {_f(v['first'], '.4g')} | {v['last_step']} | "
                        f"{_f(v['last'], '.4g')} |")
    probe_text = ("Mean over seeds and heads (see docs/dynamics.md for each definition).\n\n" + "\n".join(rows))
    return [("Setup", setup), ("Routing law on real training", law_text),
            ("Frame vs precision", frame_text), ("Probe quantities", probe_text)]


def write_profile_report(study_id: str, config: dict, summary: dict, figures: list[str], db: str | None) -> str:
    path = os.path.join(report_dir(db), f"{study_id}.md")
    return write_report(path, f"Profile {study_id}: gradient dynamics of attention", profile_sections(config, summary),
                        figures)
