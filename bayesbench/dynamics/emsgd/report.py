"""An EM-vs-SGD study's report: its headline and the sections of its one-page Markdown report.

Built from the study's summary (`summary.py`; the verdicts first, then each statistic beside its
control), plus, for the toy's per-seed table, the run itself. `dynamics/report.write_report`
writes the page with its figures.
"""

from __future__ import annotations

import math

from ..verdicts import fmt, verdict_table
from .chain import transition_matrix
from .speedup import SpeedUp, speedup_text
from .summary import AUTHORS_SPEEDUP
from .toy import ALL_SCHEDULES, GRID, NORM_MATCHED, ToyRun
from .train import TEST_SEED_OFFSET, VALIDATION_SEED_OFFSET


def toy_headline(summary: dict, per_seed: SpeedUp, pooled: SpeedUp) -> list[str]:
    """A toy study's headline: its primary verdicts, the speed-up over SGD, the final losses, the floors and
    (with controls) EM-like against each of them."""
    lines = [f"{v['verdict']}: {v['claim']} ({v['number']})" for v in summary["verdicts"] if v["family"] == "primary"]
    lines += [f"speed-up (per-seed threshold): {speedup_text(per_seed)}; authors' pooled rule: {speedup_text(pooled)}; "
              f"authors report {AUTHORS_SPEEDUP}x",
              f"final loss (nats, mean over {summary['seeds']} seeds): SGD {summary['final_loss_sgd']['mean']:.4f}, "
              f"EM-like {summary['final_loss_em']['mean']:.4f}; EM-like lower on {summary['em_ahead_seeds']} of "
              f"{summary['seeds']} seeds"]
    lines += [f"floor {k}: {v:.4f} nats ({summary['floors_bits'][k]:.4f} bits)"
              for k, v in summary["floors_nats"].items()]
    against = summary.get("against", {})
    if len(against) > 1:
        best = summary.get("best_sgd")
        lines.append("EM-like against each control, per-seed speed-up to the control's final loss: " + "; ".join(
            f"{n}{' (best plain SGD)' if n == best else ''} {speedup_text(a['speedup_per_seed'], detail=False)}"
            for n, a in against.items()))
        lines.append("share of the gap chance -> exact filtering floor covered after the last update: " + ", ".join(
            f"{n} {g['final_gap_share']['mean']:.2f}" for n, g in summary["gap"].items() if n not in GRID))
        held = summary["held_out"]
        lines.append(f"test loss at the validation-chosen step (test floor {held['floor_mean']:.4f} nats): "
                     + ", ".join(f"{n} {held[n]['early_stopped']['mean']:.4f}" for n in summary["schedules"]
                                 if n not in GRID))
    return lines


def controls_section(summary: dict, n_seeds: int) -> str:
    """The controls table: where each schedule gets, its budget, and EM-like's speed-up over it."""
    gaps, against, best, budget = summary["gap"], summary["against"], summary.get("best_sgd"), summary["budget"]
    fr = gaps["em"]["fractions"]
    head = " | ".join(f"steps to {p:.0%} (median; seeds)" for p in fr)
    held = summary.get("held_out", {})
    rows = [f"| schedule | summed lr | mean update norm | final loss (nats) | share of the gap covered | {head} | "
            f"EM-like speed-up to its final loss (per seed) | pooled (authors' rule) | EM-like paired speed-up at 50% "
            f"of the gap | test loss, final | test loss at the validation-chosen step (median step) |",
            "|---|---|---|---|---|" + "---|" * len(fr) + "---|---|---|---|---|"]
    for n, g in gaps.items():
        if n in GRID:  # the grid's own section
            continue
        a = against.get(n)
        steps = " | ".join(f"{m:.0f} ({r}/{n_seeds})" for m, r in zip(g["median_steps"], g["reached"]))
        final = summary["final_loss_em"] if n == "em" else a["final_loss"]
        if a is None:
            cmp = "- | - | -"
        else:
            half = a["gap_speedup"]["50%"]
            cmp = (f"{speedup_text(a['speedup_per_seed'], detail=False)} | "
                   f"{speedup_text(a['speedup_pooled'], detail=False)} | "
                   f"{fmt(half, '{:.2f}x')} (n={half['n']}; EM-like only {half['only_fast']}, control only "
                   f"{half['only_slow']})")
        label = f"{n} (best plain SGD, on validation)" if n == best else n
        h = held.get(n)
        ho = (f"{fmt(h['final'], '{:.4f}')} | {fmt(h['early_stopped'], '{:.4f}')} ({h['stop_step_median']:.0f})"
              if h else "- | -")
        b = budget[n]
        lr = "EM-like's norm" if b["summed_lr"] is None else f"{b['summed_lr']:.1f}"
        rows.append(f"| {label} | {lr} | {b['update_norm']:.4f} | {final['mean']:.4f} | "
                    f"{fmt(g['final_gap_share'], '{:.2f}')} | {steps} | {cmp} | {ho} |")
    lrs = "; ".join(f"{n}: " + (f"the gradient direction at {NORM_MATCHED[n]}'s update norm" if n in NORM_MATCHED
                                else ", ".join(f"{w} {v:.4g}" for w, v in ALL_SCHEDULES[n].items()))
                    for n in gaps if n not in GRID)
    return ("Every schedule trains the same data, seeds and initial weights. Learning rates: " + lrs + ". Summed lr: "
            "sum over the four matrices of lr x number of entries; the mean update norm is ||Delta theta|| per "
            "update, over updates and seeds. The gap runs from chance (ln 8) to each seed's exact filtering floor; "
            "steps are the first update below ln 8 - p (ln 8 - floor) (the step count where never reached). "
            "Speed-ups: EM-like's steps to the control's final loss (per seed: the step count over the t-interval "
            "of the mean steps; the authors' pooled threshold: a BCa bootstrap); the paired speed-up is the "
            "geometric mean over seeds of control steps / EM-like steps at 50% of the gap, over the seeds where both "
            "reached it (log-t interval). Validation and test: two more sequences per seed (seed + "
            f"{VALIDATION_SEED_OFFSET}, seed + {TEST_SEED_OFFSET}); each schedule's stopping step is where its "
            "validation loss is lowest, and the test loss there is reported; the best plain SGD is chosen on "
            f"validation too. Test floor: {held.get('floor_mean', math.nan):.4f} nats.\n\n" + "\n".join(rows))


def grid_section(summary: dict, n_seeds: int) -> str | None:
    """The 2-D grid of rates: each point's validation score, its family and its steps to 50% of the
    gap; the tuned pair and their comparison."""
    grid = summary.get("grid") or {}
    if not grid:
        return None
    from .toy import BASE_LR, grid_points

    points, gaps = grid_points(), summary["gap"]
    k = gaps["em"]["fractions"].index(0.5) if 0.5 in gaps["em"]["fractions"] else 0
    rows = ["| point | W_V rate | W_Q, W_K, W_O rate | family | validation score (lowest validation loss, mean over "
            "seeds) | steps to 50% of the gap (median; seeds) |", "|---|---|---|---|---|---|"]
    for n, (v, o) in points.items():
        if n not in gaps:
            continue
        fam = next((f for f, names in grid["families"].items() if n in names), "W_V slower (neither)")
        score = grid["scores"].get(fam, {}).get(n)
        chosen = " (chosen)" if grid["chosen"].get(fam) == n else ""
        g = gaps[n]
        rows.append(f"| {n}{chosen} | {v * BASE_LR:g} | {o * BASE_LR:g} | {fam} | "
                    f"{'-' if score is None else f'{score:.4f}'} | {g['median_steps'][k]:.0f} "
                    f"({g['reached'][k]}/{n_seeds}) |")
    sp = "; ".join(f"{p}: {fmt(d, '{:.2f}x')} (n={d['n']})" for p, d in grid["speedup"].items())
    ties = ", ".join(n for f in ("equal", "value_faster") for n in grid.get("ties", {}).get(f, []))
    against = "; ".join(f"{'against' if f == 'equal' else 'with'} {n}: {fmt(d, '{:.2f}x')}"
                        for f in ("equal", "value_faster") for n, d in grid.get("against_ties", {}).get(f, {}).items())
    return (f"Rates W_V x (W_Q, W_K, W_O), each family's point chosen on the validation split alone "
            f"({grid['criterion']}); the training and test splits are not read by the choice. Paired speed-up of the "
            f"tuned W_V-faster point over the tuned equal-rate point (equal-rate steps / W_V-faster steps, geometric "
            f"mean over the seeds where both reached it): {sp}. Test loss at each one's validation-chosen step, "
            f"W_V-faster - equal-rate: {fmt(grid['test_difference'], '{:+.4f}')} nats. Points the validation split "
            f"cannot tell from the chosen one (paired t-interval of the score difference not above 0): "
            f"{ties or 'none'}; the comparison at 50% against each of them: {against or '-'}; the same side "
            f"against all: {'yes' if grid.get('robust_to_ties') else 'no'}.\n\n" + "\n".join(rows))


def toy_sections(variant: str, seeds: list[int], steps: int, length: int, sequences: int, summary: dict,
                 per_seed: SpeedUp, pooled: SpeedUp, run: ToyRun) -> list[tuple[str, str]]:
    """A toy study's report: its setting, verdicts, speed-up, controls, floors, per-seed losses and attention
    entropy, as (heading, Markdown) sections."""
    means = ("the authors' symbol means (drawn once, shared by every seed)" if summary["means"] == "shared"
             else "symbol means drawn per seed")
    if variant == "paper":
        setting = (f"The authors' sticky chain (8 symbols, self weight 0.3, other transitions ∝ 1/circular distance, "
                   f"normalised as their script does: P(stay) = {float(transition_matrix()[0, 0]):.4f}); one sequence "
                   f"of T = {length} per seed, inputs mu_(y_(t-1)) + N(0, I) in 20 dimensions, {means}; one causal "
                   f"head W_Q, W_K 20x10, W_V 20x15, W_O 15x8; full-batch gradient descent for {steps} updates: SGD lr "
                   f"0.01 on all, EM-like lr 0.1 on W_V and 0.01 on the rest; controls {run.schedules[2:]} "
                   f"(see below). {len(seeds)} seeds {seeds}.")
    else:
        setting = (f"Beta-sticky tunnel: per seed {sequences} sequences of L = {length} symbols over 8, "
                   f"each with its own stickiness rho ~ Beta(1, 1); inputs mu_(y_t) (no noise), {means}; the same "
                   f"head and schedules, {steps} full-batch updates; {len(seeds)} seeds {seeds}.")
    verdicts = ("Primary verdicts (docs/em_vs_sgd.md names them before the numbers), then the secondary family; "
                "Holm's adjustment within each.\n\n**Primary**\n\n" + verdict_table(summary["verdicts"], "primary")
                + "\n\n**Secondary**\n\n" + verdict_table(summary["verdicts"], "secondary"))
    rows = ["| threshold | speed-up | 95% interval | method | mean steps of EM-like | seeds that reached it |",
            "|---|---|---|---|---|---|"]
    for sp in (per_seed, pooled):
        value, interval = ((f"{sp.value:.2f}x", f"[{sp.ci_low:.2f}, {sp.ci_high:.2f}]") if sp.reached
                           else ("not reached", "-"))
        method = "t-interval of the mean steps" if sp.method == "t" else "BCa bootstrap"
        rows.append(f"| {sp.threshold} | {value} | {interval} | {method} | {sp.mean_steps:.1f} | "
                    f"{sp.reached}/{len(seeds)} |")
    rows.append(f"| authors (Paper II §7.2, 5 seeds) | {AUTHORS_SPEEDUP}x | - | - | 430 | - |")
    floors = "\n".join(f"- {k}: {v:.4f} nats = {summary['floors_bits'][k]:.4f} bits"
                       for k, v in summary["floors_nats"].items())
    per = ["| seed | SGD final loss | EM-like final loss | EM steps to SGD's final loss |", "|---|---|---|---|"]
    i_sgd, i_em = run.schedules.index("sgd"), run.schedules.index("em")
    for e, s in enumerate(seeds):
        per.append(f"| {s} | {float(run.losses[i_sgd, e, steps]):.4f} | {float(run.losses[i_em, e, steps]):.4f} | "
                   f"{per_seed.steps[e]} |")
    ae = summary["attention_entropy"]
    toy = "\n".join(f"- {n}: " + ", ".join(f"{k} {v:.3f}" for k, v in d.items()) for n, d in ae.items())
    toy += (f"\n- uniform attention would be {summary['max_attention_entropy_nats']:.3f} nats; "
            f"PC1 + PC2 of the value-prototype trajectories (seed {seeds[0]}): "
            f"{100 * sum(summary['value_pca_variance_pc1_pc2']):.0f}% of their variance")
    controls = [("EM-like against matched controls", controls_section(summary, len(seeds)))] \
        if len(run.schedules) > 2 else []
    grid = grid_section(summary, len(seeds))
    if grid:
        controls.append(("The 2-D grid of rates, each family tuned on validation", grid))
    return [("Setting", setting), ("Verdicts", verdicts), ("Speed-up (EM-like over SGD)", "\n".join(rows)), *controls,
            ("Bayes floors (training cross-entropy)", floors),
            ("Final training loss per seed (nats)", "\n".join(per)),
            ("The section 7.2 head's attention entropy (nats, mean over seeds; section 7.1's toy is not built)", toy)]


def deep_headline(summary: dict, per_seed: SpeedUp, pooled: SpeedUp) -> list[str]:
    """The deep variant's headline: the speed-up of adamw-em over adamw, each schedule's held-out
    scores, the floors."""
    return [
        f"adamw-em over adamw, speed-up (per-seed threshold): {speedup_text(per_seed)}; pooled: {speedup_text(pooled)}",
        *(f"{v['verdict']}: {v['claim']} ({v['number']})" for v in summary.get("verdicts", [])),
        *(f"{n}: held-out loss {d['loss']['mean']:.4f}, entropy {d['entropy']['mean']:.4f} nats "
          f"(gap to H(Y_t|Y_(t-1)) = {d['entropy_gap_to_H']:+.4f}), accuracy {d['accuracy']['mean']:.4f}"
          for n, d in summary["test"].items()),
        *(f"floor {k}: {v:.4f} nats" for k, v in summary["floors_nats"].items())]


def deep_sections(seeds: list[int], steps: int, length: int, summary: dict) -> list[tuple[str, str]]:
    """The deep variant's report: its setting, held-out scores, speed-up (the headline's first line)
    and floors, as (heading, Markdown) sections."""
    table = ["| schedule | held-out loss (nats) | 95% CI | held-out entropy (nats) | gap to H(Y_t|Y_(t-1)) "
             "| accuracy |",
             "|---|---|---|---|---|---|"]
    for n, d in summary["test"].items():
        table.append(f"| {n} | {d['loss']['mean']:.4f} | [{d['loss']['ci_low']:.4f}, {d['loss']['ci_high']:.4f}] | "
                     f"{d['entropy']['mean']:.4f} | {d['entropy_gap_to_H']:+.4f} | {d['accuracy']['mean']:.4f} |")
    setting = (f"4-layer, 4-head pre-norm transformer (d_model 64) on the paper variant's data (T = {length}), "
               f"AdamW lr 3e-4, weight decay 0.01, cosine to 0 over {steps} steps, clip 1; adamw-em: value "
               f"projections at 10x the learning rate; held-out sequence from seed + {VALIDATION_SEED_OFFSET}; "
               f"{len(seeds)} seeds {seeds}. No dropout (the authors use 0.1).")
    return [("Setting", setting),
            ("Held-out scores (mean over seeds)", "\n".join(table)),
            ("Speed-up of adamw-em over adamw", "\n".join(summary["headline"][:1])),
            ("Floors", "\n".join(f"- {k}: {v:.4f} nats" for k, v in summary["floors_nats"].items()))]
