"""`bayesbench emsgd`: run an EM-vs-SGD study, store it, draw its figures, write its report.

    bayesbench emsgd                          # paper variant, 16 seeds, T = 2000, 1000 steps
    bayesbench emsgd --seeds 16 --length 300  # shorter sequences (what a 2-core CPU affords)
    bayesbench emsgd --variant beta           # Beta-sticky tunnel, exact posterior predictive floor
    bayesbench emsgd --variant deep --steps 2000

Seeds: the authors' five (42, 2024, 1337, 7777, 9999) first, then 0, 1, 2, ... up to --seeds.
Numbers go to the `studies` / `dynamics` tables of the results store; the report and figures to
`<store folder>/reports/`. docs/em_vs_sgd.md explains every quantity.
"""

from __future__ import annotations

import math
import os
import uuid

import torch

from ...checks import int_at_least
from ..cut_short import removed_if_stopped
from ..report import report_dir, write_report
from ..stats import mean_ci
from ..store import register_study, write_dynamics
from . import DEFAULTS, VARIANTS  # noqa: F401  (DEFAULTS: the command's defaults)
from .chain import beta_sticky_data, conditional_entropy, nats_to_bits, paper_data, symbol_means, transition_matrix
from .speedup import speedup, speedup_text

AUTHORS_SEEDS = (42, 2024, 1337, 7777, 9999)
AUTHORS_SPEEDUP = 2.3  # Paper II section 7.2: 430 vs 1000 steps, 5 seeds
TEST_SEED_OFFSET = 10000  # the authors' held-out sequence of seed s is drawn from seed s + 10000


def default_seeds(n: int) -> list[int]:
    """The authors' five seeds, then 0, 1, 2, ... until there are n."""
    int_at_least("seeds", n, 2, "a speed-up interval needs at least 2")
    out = list(AUTHORS_SEEDS[:n])
    i = 0
    while len(out) < n:
        if i not in out:
            out.append(i)
        i += 1
    return out


def run_study(variant: str, seeds: list[int], *, steps: int, length: int, sequences: int = 40,
              chunk: int | None = None, db: str | None = None, progress: bool = False,
              schedules: list[str] | None = None) -> dict:
    """Run one study end to end; returns its summary (also stored in `studies`).

    `schedules` (toy variants): which of `toy.ALL_SCHEDULES` to train, default all of them
    (SGD, EM-like and the controls); "sgd" and "em" are always among them."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    schedules = check_schedules(schedules)
    study_id = f"emsgd-{variant}-{uuid.uuid4().hex[:8]}"
    config = {"variant": variant, "seeds": seeds, "steps": steps, "length": length,
              "sequences": sequences if variant == "beta" else 1,
              "schedules": schedules if variant != "deep" else ["adamw", "adamw-em"]}
    register_study(study_id, "emsgd", config, path=db)
    out_dir = os.path.join(report_dir(db), study_id)
    os.makedirs(out_dir, exist_ok=True)
    with removed_if_stopped(study_id, "emsgd", db):
        if variant == "deep":
            summary, records, sections, figures = _deep(seeds, steps, length, out_dir, progress)
        else:
            summary, records, sections, figures = _toy(variant, seeds, steps, length, sequences, chunk, out_dir,
                                                       progress, schedules)
        write_dynamics(study_id, records, path=db)
    report = write_report(os.path.join(report_dir(db), f"{study_id}.md"),
                          f"EM-like vs SGD ({variant} variant), study {study_id}", sections, figures)
    summary.update({"study_id": study_id, "report": report, "config": config})
    register_study(study_id, "emsgd", config, summary=summary, status="done", path=db)
    return summary


def check_length(length: int) -> int:
    """Refuse, before anything is drawn, a sequence whose T x T attention map (float32, with its
    gradient and softmax: 3 copies) exceeds the free memory on its own: it could never run."""
    from ...tasks.base import available_bytes, format_bytes

    need = 3 * 4 * length * length
    free = available_bytes(torch.device("cpu"))
    if free is not None and need > free:
        most = int((free / 12) ** 0.5)
        raise ValueError(f"--length {length:,}: one sequence's {length:,} x {length:,} attention map needs at least "
                         f"{format_bytes(need)}, and this machine has {format_bytes(free)} free; at most about "
                         f"{most:,} fits")
    return length


def held_out_summary(run, floors: list[float]) -> dict:
    """Per schedule: held-out loss (nats) after the last update and at its best recorded step
    (mean [t-interval] over seeds), the step of that best, and the held-out floor: a schedule
    whose training loss falls faster but whose held-out loss does not is fitting its one sequence."""
    out = {"floor_mean": sum(floors) / len(floors)}
    for j, n in enumerate(run.schedules):
        t = run.test_losses[j]
        best, at = t.min(1)
        out[n] = {"final": mean_ci(t[:, -1]), "best": mean_ci(best),
                  "best_step_median": float(torch.tensor([run.record_steps[i] for i in at.tolist()]).double().median())}
    return out


def check_schedules(schedules: list[str] | None) -> list[str]:
    """The toy schedules to train, in `ALL_SCHEDULES` order; ValueError for an unknown name or a
    list without both "sgd" and "em" (every comparison is against them)."""
    from .toy import ALL_SCHEDULES

    if schedules is None:
        return list(ALL_SCHEDULES)
    unknown = [s for s in schedules if s not in ALL_SCHEDULES]
    if unknown:
        raise ValueError(f"--schedules: unknown {unknown}; choose from {list(ALL_SCHEDULES)}")
    if not {"sgd", "em"} <= set(schedules):
        raise ValueError(f"--schedules must include sgd and em (every comparison is against them), got {schedules}")
    return [s for s in ALL_SCHEDULES if s in schedules]


def _toy(variant, seeds, steps, length, sequences, chunk, out_dir, progress, schedules):
    from . import plots
    from .controls import FRACTIONS, best_of, gap_table, paired_speedup
    from .toy import ALL_SCHEDULES, SGD_SWEEP, train_toy

    if variant == "paper":
        data = [paper_data(s, T=length) for s in seeds]
        test = [paper_data(s + TEST_SEED_OFFSET, T=length) for s in seeds]
    else:
        data = [beta_sticky_data(s, n_sequences=sequences, L=length) for s in seeds]
        test = [beta_sticky_data(s + TEST_SEED_OFFSET, n_sequences=sequences, L=length) for s in seeds]
    mu = symbol_means()
    run = train_toy(data, seeds, steps=steps, schedules={n: ALL_SCHEDULES[n] for n in schedules}, means=mu,
                    chunk=chunk, progress=progress, test=test)
    names = run.schedules
    sgd, em = run.losses[names.index("sgd")], run.losses[names.index("em")]
    per_seed, pooled = speedup(em, sgd, steps), speedup(em, sgd, steps, pooled=True)
    seed_floors = torch.tensor([d.floor() for d in data], dtype=torch.float64)
    floors = {"exact predictive floor (mean over seeds)": float(seed_floors.mean())}
    if variant == "paper":
        floors = {"H(Y_t | Y_(t-1))": conditional_entropy(transition_matrix()), **floors}
    n_classes = int(mu.shape[0])
    gaps = gap_table(run.losses, names, seed_floors, n_classes)
    em_gap = torch.tensor(gaps["em"]["steps"])
    against = {}
    for j, n in enumerate(names):
        if n == "em":
            continue
        other = run.losses[j]
        against[n] = {"speedup_per_seed": speedup(em, other, steps).as_dict(),
                      "speedup_pooled": speedup(em, other, steps, pooled=True).as_dict(),
                      "final_loss": mean_ci(other[:, steps]),
                      "em_ahead_seeds": int((em[:, steps] < other[:, steps]).sum()),
                      "gap_speedup": {f"{p:.0%}": paired_speedup(em_gap[k], torch.tensor(gaps[n]["steps"][k]), steps)
                                      for k, p in enumerate(FRACTIONS)}}
    ent = run.attn_entropy
    i100 = min(range(len(run.record_steps)), key=lambda r: abs(run.record_steps[r] - 100))
    summary = {
        "variant": variant, "seeds": len(seeds), "steps": steps, "schedules": names,
        "speedup_per_seed": per_seed.as_dict(), "speedup_pooled": pooled.as_dict(), "authors_speedup": AUTHORS_SPEEDUP,
        "floors_nats": floors, "floors_bits": {k: nats_to_bits(v) for k, v in floors.items()},
        "final_loss_sgd": mean_ci(sgd[:, steps]), "final_loss_em": mean_ci(em[:, steps]),
        "em_ahead_seeds": int((em[:, steps] < sgd[:, steps]).sum()),
        "gap": gaps, "against": against, "best_sgd": best_of(run.losses, names, SGD_SWEEP),
        "held_out": held_out_summary(run, [d.floor() for d in test]),
        "attention_entropy": {n: {"step0": float(ent[j, :, 0].mean()), f"step{run.record_steps[i100]}":
                                  float(ent[j, :, i100].mean()), "final": float(ent[j, :, -1].mean())}
                              for j, n in enumerate(names)},
        "max_attention_entropy_nats": _max_entropy(data),
    }
    records = []
    for j, n in enumerate(names):
        for e, s in enumerate(seeds):
            records += [(s, i, -1, -1, f"loss_{n}", v) for i, v in enumerate(run.losses[j, e].tolist())]
            records += [(s, st, -1, -1, f"attn_entropy_{n}", float(ent[j, e, r]))
                        for r, st in enumerate(run.record_steps)]
            records += [(s, st, -1, -1, f"test_loss_{n}", float(run.test_losses[j, e, r]))
                        for r, st in enumerate(run.record_steps)]
            records += [(s, -1, -1, -1, f"steps_to_gap{round(100 * p)}_{n}", gaps[n]["steps"][k][e])
                        for k, p in enumerate(FRACTIONS)]
    for e, (s, d) in enumerate(zip(seeds, data)):
        records += [(s, -1, -1, -1, "floor_exact_predictive", d.floor()),
                    (s, -1, -1, -1, "floor_exact_predictive_held_out", test[e].floor()),
                    (s, -1, -1, -1, "speedup_steps_per_seed", per_seed.steps[e]),
                    (s, -1, -1, -1, "speedup_steps_pooled", pooled.steps[e])]
    pair = [names.index("sgd"), names.index("em")]  # the section 7.1 figures: the two schedules of the paper
    data_words = f"T={length}" if variant == "paper" else f"{sequences} sequences of L={length} per seed"
    setting = f"{variant} variant, {data_words}; {steps} full-batch updates; {len(seeds)} seeds {seeds}"
    figures = [plots.loss_curves(os.path.join(out_dir, "loss.png"), run.losses, names, floors,
                                 "training loss of each schedule", setting=setting),
               plots.loss_curves(os.path.join(out_dir, "held_out_loss.png"), run.test_losses, names,
                                 {"exact filtering floor, held-out (mean over seeds)":
                                  summary["held_out"]["floor_mean"], "chance, ln 8": math.log(n_classes)},
                                 f"held-out loss: a held-out sequence per seed (seed + {TEST_SEED_OFFSET}), scored "
                                 "every 10 updates", steps=run.record_steps, ylabel="held-out cross-entropy (nats)",
                                 ylim=(summary["held_out"]["floor_mean"] - 0.05, math.log(n_classes) + 0.25),
                                 setting=setting),
               plots.heatmaps(os.path.join(out_dir, "attention_heatmaps.png"),
                              {n: run.heatmaps[n] for n in ("sgd", "em")}, seeds[0], setting),
               plots.attention_entropy(os.path.join(out_dir, "attention_entropy.png"), run.record_steps, ent,
                                       names, setting, uniform=summary["max_attention_entropy_nats"])]
    path, frac = plots.value_trajectories(os.path.join(out_dir, "value_pca.png"), run.prototypes[pair, 0],
                                          ["sgd", "em"], run.record_steps, seeds[0], setting)
    figures.append(path)
    summary["value_pca_variance_pc1_pc2"] = frac
    summary["headline"] = _headline(variant, summary, per_seed, pooled)
    sections = _toy_sections(variant, seeds, steps, length, sequences, summary, per_seed, pooled, run)
    return summary, records, sections, figures


def _max_entropy(data) -> float:
    """log(number of keys) averaged over scored positions: uniform attention's entropy."""
    N = data[0].inputs.shape[1]
    return float(torch.log(torch.arange(1, N + 1).double()).mean())




def _headline(variant, summary, per_seed, pooled) -> list[str]:
    lines = [f"speed-up (per-seed threshold): {speedup_text(per_seed)}; authors' pooled rule: {speedup_text(pooled)}; "
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
            f"{n} {g['final_gap_share']['mean']:.2f}" for n, g in summary["gap"].items()))
        held = summary["held_out"]
        lines.append(f"held-out loss after the last update (floor {held['floor_mean']:.4f} nats): " + ", ".join(
            f"{n} {held[n]['final']['mean']:.4f}" for n in summary["schedules"]))
    return lines


def _controls_section(summary: dict, n_seeds: int) -> str:
    """The controls table: where each schedule gets, and EM-like's speed-up over it."""
    from ..intervals import fmt

    gaps, against, best = summary["gap"], summary["against"], summary.get("best_sgd")
    fr = gaps["em"]["fractions"]
    head = " | ".join(f"steps to {p:.0%} (median; seeds)" for p in fr)
    held = summary.get("held_out", {})
    rows = [f"| schedule | final loss (nats) | share of the gap covered | {head} | EM-like speed-up to its final "
            f"loss (per seed) | pooled (authors' rule) | EM-like paired speed-up at 50% of the gap | held-out loss, "
            f"final | held-out loss, best (median step) |",
            "|---|---|---|" + "---|" * len(fr) + "---|---|---|---|---|"]
    for n, g in gaps.items():
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
        label = f"{n} (best plain SGD)" if n == best else n
        h = held.get(n)
        ho = (f"{fmt(h['final'], '{:.4f}')} | {fmt(h['best'], '{:.4f}')} ({h['best_step_median']:.0f})" if h
              else "- | -")
        rows.append(f"| {label} | {final['mean']:.4f} | {fmt(g['final_gap_share'], '{:.2f}')} | {steps} | {cmp} | "
                    f"{ho} |")
    from .toy import ALL_SCHEDULES

    lrs = "; ".join(f"{n}: " + ", ".join(f"{w} {v:g}" for w, v in ALL_SCHEDULES[n].items()) for n in gaps)
    return ("Every schedule trains the same data, seeds and initial weights. Learning rates: " + lrs + ". The gap runs "
            "from chance (ln 8) to each seed's exact filtering floor; steps are the first update below ln 8 - p "
            "(ln 8 - floor) (the step count where never reached). Speed-ups: EM-like's steps to the control's final "
            "loss (per seed, and the authors' pooled threshold), 95% bootstrap intervals over seeds; the paired "
            "speed-up is the geometric mean over seeds of control steps / EM-like steps at 50% of the gap, over the "
            "seeds where both reached it (t-interval of the mean log ratio). Held-out: the same schedules scored on "
            f"another sequence per seed (seed + {TEST_SEED_OFFSET}), whose exact filtering floor is "
            f"{held.get('floor_mean', math.nan):.4f} nats; a training loss below the floor with no held-out gain is "
            "the model fitting its one training sequence.\n\n" + "\n".join(rows))


def _toy_sections(variant, seeds, steps, length, sequences, summary, per_seed, pooled, run):
    if variant == "paper":
        setting = (f"The authors' sticky chain (8 symbols, self weight 0.3, other transitions ∝ 1/circular distance, "
                   f"normalised as their script does: P(stay) = {float(transition_matrix()[0, 0]):.4f}); one sequence "
                   f"of T = {length} per seed, inputs mu_(y_(t-1)) + N(0, I) in 20 dimensions; one causal head "
                   f"W_Q, W_K 20x10, W_V 20x15, W_O 15x8; full-batch gradient descent for {steps} updates: SGD lr 0.01 "
                   f"on all, EM-like lr 0.1 on W_V and 0.01 on the rest; controls {run.schedules[2:]} "
                   f"(see below). {len(seeds)} seeds {seeds}, one batched ensemble of "
                   f"{len(run.schedules) * len(seeds)} members.")
    else:
        setting = (f"Beta-sticky tunnel: per seed {sequences} sequences of L = {length} symbols over 8, "
                   f"each with its own stickiness rho ~ Beta(1, 1); inputs mu_(y_t) (no noise); the same head and "
                   f"schedules, {steps} full-batch updates; {len(seeds)} seeds {seeds}.")
    rows = ["| threshold | speed-up | 95% interval | mean steps of EM-like | seeds that reached it |",
            "|---|---|---|---|---|"]
    for s in (per_seed, pooled):
        value, interval = ((f"{s.value:.2f}x", f"[{s.ci_low:.2f}, {s.ci_high:.2f}]") if s.reached
                           else ("not reached", "-"))
        rows.append(f"| {s.threshold} | {value} | {interval} | {s.mean_steps:.1f} | {s.reached}/{len(seeds)} |")
    rows.append(f"| authors (Paper II §7.2, 5 seeds) | {AUTHORS_SPEEDUP}x | - | 430 | - |")
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
    controls = [("EM-like against matched controls", _controls_section(summary, len(seeds)))] \
        if len(run.schedules) > 2 else []
    return [("Setting", setting), ("Speed-up (EM-like over SGD)", "\n".join(rows)), *controls,
            ("Bayes floors (training cross-entropy)", floors),
            ("Final training loss per seed (nats)", "\n".join(per)),
            ("Section 7.1 toy: attention entropy (nats, mean over seeds)", toy)]


def _deep(seeds, steps, length, out_dir, progress):
    from . import plots
    from .deep import train_deep

    train = [paper_data(s, T=length) for s in seeds]
    test = [paper_data(s + TEST_SEED_OFFSET, T=length) for s in seeds]
    run = train_deep(train, test, seeds, steps=steps, progress=progress)
    base, em = run.losses[0], run.losses[1]
    per_seed, pooled = speedup(em, base, steps), speedup(em, base, steps, pooled=True)
    H = conditional_entropy(transition_matrix())
    floors = {"H(Y_t | Y_(t-1))": H,
              "exact predictive floor, held-out (mean over seeds)": sum(d.floor() for d in test) / len(test)}
    summary = {"variant": "deep", "seeds": len(seeds), "steps": steps,
               "speedup_per_seed": per_seed.as_dict(), "speedup_pooled": pooled.as_dict(),
               "authors_speedup": AUTHORS_SPEEDUP, "floors_nats": floors,
               "floors_bits": {k: nats_to_bits(v) for k, v in floors.items()},
               "final_loss_sgd": mean_ci(base[:, steps]), "final_loss_em": mean_ci(em[:, steps]),
               "em_ahead_seeds": int((em[:, steps] < base[:, steps]).sum()),
               "test": {n: {"loss": mean_ci(run.test_loss[j]), "entropy": mean_ci(run.test_entropy[j]),
                            "accuracy": mean_ci(run.test_accuracy[j]),
                            "entropy_gap_to_H": float(run.test_entropy[j].mean()) - H}
                        for j, n in enumerate(run.schedules)}}
    records = []
    for j, n in enumerate(run.schedules):
        for e, s in enumerate(seeds):
            records += [(s, i, -1, -1, f"loss_{n}", v) for i, v in enumerate(run.losses[j, e].tolist())]
            records += [(s, -1, -1, -1, f"test_loss_{n}", float(run.test_loss[j, e])),
                        (s, -1, -1, -1, f"test_entropy_{n}", float(run.test_entropy[j, e])),
                        (s, -1, -1, -1, f"test_accuracy_{n}", float(run.test_accuracy[j, e]))]
    figures = [plots.loss_curves(os.path.join(out_dir, "loss.png"), run.losses, run.schedules, floors,
                                 "deep variant (4 layers x 4 heads, AdamW): training loss",
                                 setting=f"T={length}; {steps} steps; {len(seeds)} seeds {seeds}")]
    summary["headline"] = [
        f"adamw-em over adamw, speed-up (per-seed threshold): {speedup_text(per_seed)}; pooled: {speedup_text(pooled)}",
        *(f"{n}: held-out loss {d['loss']['mean']:.4f}, entropy {d['entropy']['mean']:.4f} nats "
          f"(gap to H(Y_t|Y_(t-1)) = {d['entropy_gap_to_H']:+.4f}), accuracy {d['accuracy']['mean']:.4f}"
          for n, d in summary["test"].items()),
        *(f"floor {k}: {v:.4f} nats" for k, v in floors.items())]
    table = ["| schedule | held-out loss (nats) | 95% CI | held-out entropy (nats) | gap to H(Y_t|Y_(t-1)) "
             "| accuracy |",
             "|---|---|---|---|---|---|"]
    for n, d in summary["test"].items():
        table.append(f"| {n} | {d['loss']['mean']:.4f} | [{d['loss']['ci_low']:.4f}, {d['loss']['ci_high']:.4f}] | "
                     f"{d['entropy']['mean']:.4f} | {d['entropy_gap_to_H']:+.4f} | {d['accuracy']['mean']:.4f} |")
    setting = (f"4-layer, 4-head pre-norm transformer (d_model 64) on the paper variant's data (T = {length}), "
               f"AdamW lr 3e-4, weight decay 0.01, cosine to 0 over {steps} steps, clip 1; adamw-em: value "
               f"projections at 10x the learning rate; held-out sequence from seed + {TEST_SEED_OFFSET}; "
               f"{len(seeds)} seeds {seeds}. No dropout (the authors use 0.1).")
    sections = [("Setting", setting),
                ("Held-out scores (mean over seeds)", "\n".join(table)),
                ("Speed-up of adamw-em over adamw", "\n".join(summary["headline"][:1])),
                ("Floors", "\n".join(f"- {k}: {v:.4f} nats" for k, v in floors.items()))]
    return summary, records, sections, figures
