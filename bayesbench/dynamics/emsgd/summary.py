"""Numbers of an EM-vs-SGD study, from its runs (`train.py`), and the rows it stores.

The toy variants: EM-like's speed-up over SGD (per-seed threshold and the authors' pooled rule)
and over every control, the Bayes floors, each schedule's steps to fractions of the gap from
chance to the floor (`controls.py`), its update budget, its held-out losses at the step its
validation loss chose, and the attention entropy. The deep variant: the speed-up of adamw-em over
adamw and the held-out scores. Every interval is over seeds (`mean_ci`). The stored rows
(`toy_records`, `deep_records`) are (seed, step, layer, head, name, value) for the `dynamics`
table. docs/em_vs_sgd.md explains every quantity.
"""

from __future__ import annotations

import torch

from ...stats import t_interval
from .chain import ChainData, conditional_entropy, nats_to_bits, transition_matrix
from .controls import FRACTIONS, best_on_validation, gap_table, paired_speedup, tuned_grid
from .deep import DeepRun
from .speedup import SpeedUp, speedup
from .toy import ALL_SCHEDULES, GRID, NORM_MATCHED, SGD_SWEEP, ToyRun, ToyShape, total_rate
from .train import Splits

AUTHORS_SPEEDUP = 2.3  # Paper II section 7.2: 430 vs 1000 steps, 5 seeds

Record = tuple[int, int, int, int, str, float]  # (seed, step, layer, head, name, value): a `dynamics` row


def mean_ci(x: torch.Tensor) -> dict:
    """Mean over seeds with its 95% t-interval (bayesbench.stats.t_interval) of a tensor [E]."""
    return t_interval(x.double().flatten().tolist())


def held_out_summary(run: ToyRun, floors: list[float], chosen_by: str = "validation") -> dict:
    """Per schedule, on the test split: the loss after the last update and at the step where the
    *validation* split's loss was lowest (early stopping chosen on a split that is not reported),
    mean [t-interval] over seeds, and the median of those steps; the test floor. A schedule whose
    training loss falls faster but whose test loss does not is fitting its training data."""
    out: dict = {"floor_mean": sum(floors) / len(floors), "chosen_by": chosen_by}
    for j, n in enumerate(run.schedules):
        t = run.split_losses("test")[j]
        chooser = run.validation_losses[j] if run.validation_losses is not None else t
        at = chooser.argmin(1)
        stopped = t.gather(1, at.view(-1, 1)).squeeze(1)
        out[n] = {"final": mean_ci(t[:, -1]), "early_stopped": mean_ci(stopped), "per_seed": stopped.tolist(),
                  "stop_step_median": float(torch.tensor([run.record_steps[i] for i in at.tolist()]).double().median())}
    return out


def max_entropy(data: list[ChainData]) -> float:
    """log(number of keys) averaged over scored positions: uniform attention's entropy."""
    N = data[0].inputs.shape[1]
    return float(torch.log(torch.arange(1, N + 1).double()).mean())


def toy_summary(variant: str, seeds: list[int], steps: int, means: str, run: ToyRun,
                splits: Splits) -> tuple[dict, SpeedUp, SpeedUp]:
    """A toy study's numbers (its stored summary, before the verdicts, figures and headline are
    added), and EM-like's speed-up over SGD per seed and pooled."""
    names = run.schedules
    sgd, em = run.losses[names.index("sgd")], run.losses[names.index("em")]
    per_seed, pooled = speedup(em, sgd, steps), speedup(em, sgd, steps, pooled=True)
    seed_floors = torch.tensor([d.floor() for d in splits.train], dtype=torch.float64)
    floors = {"exact predictive floor (mean over seeds)": float(seed_floors.mean())}
    if variant == "paper":
        floors = {"H(Y_t | Y_(t-1))": conditional_entropy(transition_matrix()), **floors}
    n_classes = int(splits.means.shape[1])
    gaps = gap_table(run.losses, names, seed_floors, n_classes)
    em_gap = torch.tensor(gaps["em"]["steps"])
    against = {}
    for j, n in enumerate(names):
        if n == "em" or n in GRID:  # the grid points are compared as tuned families (`grid` below)
            continue
        other = run.losses[j]
        against[n] = {"speedup_per_seed": speedup(em, other, steps).as_dict(),
                      "speedup_pooled": speedup(em, other, steps, pooled=True).as_dict(),
                      "final_loss": mean_ci(other[:, steps]),
                      "em_ahead_seeds": int((em[:, steps] < other[:, steps]).sum()),
                      "gap_speedup": {f"{p:.0%}": paired_speedup(em_gap[k], torch.tensor(gaps[n]["steps"][k]), steps)
                                      for k, p in enumerate(FRACTIONS)}}
    shape = ToyShape()
    budget = {n: {"summed_lr": None if n in NORM_MATCHED else total_rate(ALL_SCHEDULES[n], shape),
                  "update_norm": float(run.update_norms[j].mean()),
                  "summed_update_norm": float(run.update_norms[j].sum(1).mean())}
              for j, n in enumerate(names)}
    ent = run.attn_entropy
    i100 = min(range(len(run.record_steps)), key=lambda r: abs(run.record_steps[r] - 100))
    held = held_out_summary(run, [d.floor() for d in splits.test])
    best = best_on_validation(run.split_losses("validation"), names, SGD_SWEEP)
    grid = tuned_grid(run.losses, run.split_losses("validation"), run.split_losses("test"), names, seed_floors,
                      n_classes)
    summary = {
        "variant": variant, "seeds": len(seeds), "steps": steps, "schedules": names, "means": means,
        "speedup_per_seed": per_seed.as_dict(), "speedup_pooled": pooled.as_dict(), "authors_speedup": AUTHORS_SPEEDUP,
        "floors_nats": floors, "floors_bits": {k: nats_to_bits(v) for k, v in floors.items()},
        "final_loss_sgd": mean_ci(sgd[:, steps]), "final_loss_em": mean_ci(em[:, steps]),
        "em_ahead_seeds": int((em[:, steps] < sgd[:, steps]).sum()), "budget": budget,
        "gap": gaps, "against": against, "best_sgd": best, "held_out": held, "grid": grid,
        "attention_entropy": {n: {"step0": float(ent[j, :, 0].mean()), f"step{run.record_steps[i100]}":
                                  float(ent[j, :, i100].mean()), "final": float(ent[j, :, -1].mean())}
                              for j, n in enumerate(names)},
        "max_attention_entropy_nats": max_entropy(splits.train),
    }
    return summary, per_seed, pooled


def toy_records(run: ToyRun, seeds: list[int], splits: Splits, summary: dict, per_seed: SpeedUp,
                pooled: SpeedUp) -> list[Record]:
    """A toy study's stored rows: per schedule and seed its loss and update norm at every update,
    its attention entropy, test and validation losses at the recorded steps and its steps to each
    fraction of the gap; per seed its floors and EM-like's steps to SGD's final loss."""
    gaps, ent = summary["gap"], run.attn_entropy
    test, validation = run.split_losses("test"), run.split_losses("validation")
    records: list[Record] = []
    for j, n in enumerate(run.schedules):
        for e, s in enumerate(seeds):
            records += [(s, i, -1, -1, f"loss_{n}", v) for i, v in enumerate(run.losses[j, e].tolist())]
            records += [(s, i, -1, -1, f"update_norm_{n}", v) for i, v in enumerate(run.update_norms[j, e].tolist())]
            records += [(s, st, -1, -1, f"attn_entropy_{n}", float(ent[j, e, r]))
                        for r, st in enumerate(run.record_steps)]
            records += [(s, st, -1, -1, f"test_loss_{n}", float(test[j, e, r]))
                        for r, st in enumerate(run.record_steps)]
            records += [(s, st, -1, -1, f"validation_loss_{n}", float(validation[j, e, r]))
                        for r, st in enumerate(run.record_steps)]
            records += [(s, -1, -1, -1, f"steps_to_gap{round(100 * p)}_{n}", gaps[n]["steps"][k][e])
                        for k, p in enumerate(FRACTIONS)]
    for e, (s, d) in enumerate(zip(seeds, splits.train)):
        records += [(s, -1, -1, -1, "floor_exact_predictive", d.floor()),
                    (s, -1, -1, -1, "floor_exact_predictive_validation", splits.validation[e].floor()),
                    (s, -1, -1, -1, "floor_exact_predictive_test", splits.test[e].floor()),
                    (s, -1, -1, -1, "speedup_steps_per_seed", per_seed.steps[e]),
                    (s, -1, -1, -1, "speedup_steps_pooled", pooled.steps[e])]
    return records


def deep_summary(seeds: list[int], steps: int, run: DeepRun, test: list[ChainData]) -> tuple[dict, SpeedUp, SpeedUp]:
    """The deep variant's numbers (its stored summary, before the headline), and the speed-up of
    adamw-em over adamw per seed and pooled."""
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
    return summary, per_seed, pooled


def deep_records(run: DeepRun, seeds: list[int]) -> list[Record]:
    """The deep variant's stored rows: per schedule and seed its loss at every update and its
    held-out loss, entropy and accuracy."""
    records: list[Record] = []
    for j, n in enumerate(run.schedules):
        for e, s in enumerate(seeds):
            records += [(s, i, -1, -1, f"loss_{n}", v) for i, v in enumerate(run.losses[j, e].tolist())]
            records += [(s, -1, -1, -1, f"test_loss_{n}", float(run.test_loss[j, e])),
                        (s, -1, -1, -1, f"test_entropy_{n}", float(run.test_entropy[j, e])),
                        (s, -1, -1, -1, f"test_accuracy_{n}", float(run.test_accuracy[j, e]))]
    return records
