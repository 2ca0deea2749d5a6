"""Numbers of a profile study, computed from its stored records (so a report can be rebuilt
from the store alone): the routing law and the value law per layer against their shuffle nulls,
whether routing and value updates feed each other (cross-lagged, against a time-shift null),
frame vs precision on a common axis against the jitter floor, the probe quantities at the first
and last profiled step, the two extensions (relevant-key ranks with the label-route control on
the bijection with repeated keys; per-head timing), and the verdicts as families with Holm's
adjustment (verdicts.py)."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

from ...stats import t_interval
from ..store import Measurement, read_dynamics
from .frames import freeze_step, gain_after
from .law import HELDOUT_NULLED, NULLED, PLAIN, VALUE_NULLED
from .lead import lead_summary, lr_budget


def _mean(xs) -> float:
    xs = _finite(xs)
    return sum(xs) / len(xs) if xs else math.nan


def _finite(xs) -> list[float]:
    return [x for x in xs if x is not None and math.isfinite(x)]


def short(name: str) -> str:
    """law_sign_alpha -> sign_alpha."""
    return name[4:] if name.startswith("law_") else name


# kappa divides by ||alpha A||^2, which some checks make tiny: its per-seed summary is the median
# over the seed's checks, not the mean (every other statistic is bounded and uses the mean)
PER_SEED = {"law_kappa": statistics.median, "value_kappa": statistics.median}
# the interval over seeds of each plain statistic, on the scale that keeps it in range: R^2 <= 1
# (log of 1 - R^2), the row-shift share in [0, 1] (logit), the sizes > 0 (log); the own-update
# share is a projection ratio, unbounded (t)
PLAIN_SCALE = {"law_linearity_r2": "one-minus-log", "law_row_shift_share": "logit", "law_own_share": "t",
               "law_ds_norm": "log", "value_dv_norm": "log"}


def plain_interval(values, scale: str) -> dict:
    """The interval over seeds of a plain statistic on its scale (`PLAIN_SCALE`)."""
    from ...stats import log_interval, logit_interval

    fin = _finite(values)
    if scale == "logit":  # a value outside [0, 1] is counted (`outside`), never dropped silently
        return {**logit_interval(fin), "outside": sum(1 for x in fin if not 0 <= x <= 1)}
    if scale == "log":
        return {**log_interval(fin), "outside": sum(1 for x in fin if not x > 0)}
    if scale == "one-minus-log":  # x < 1: the log-t interval of 1 - x, mapped back; x >= 1 counted
        d = log_interval([1 - x for x in fin if x < 1])
        return {**d, "mean": 1 - d["mean"], "ci_low": 1 - d["ci_high"], "ci_high": 1 - d["ci_low"],
                "method": "log-t of 1 - x", "outside": sum(1 for x in fin if not x < 1)}
    return t_interval(values)


def law_summary(records: list[Measurement], nulled: tuple[str, ...] = NULLED + VALUE_NULLED,
                plain: tuple[str, ...] = PLAIN + ("value_dv_norm",)) -> dict[int, dict]:
    """Per layer and statistic: the mean over seeds of the per-seed mean (over checked steps and
    heads; the median for kappa) of the statistic and of its null, the excess (statistic - null)
    with a t-interval over seeds and its t-test against 0, and the share of (seed, step, head)
    cells above their null. The plain statistics (linearity check, own-update share, row-shift
    share, update sizes): per-seed means with an interval over seeds on their scale
    (`PLAIN_SCALE`), the median and minimum over cells."""
    cells: dict[int, dict[str, dict[tuple, float]]] = defaultdict(lambda: defaultdict(dict))
    wanted = set(nulled) | {f"{n}_null" for n in nulled} | set(plain)
    for r in records:
        if r.name in wanted:
            cells[r.layer][r.name][(r.seed, r.step, r.head)] = r.value
    out: dict[int, dict] = {}
    for layer, by_name in sorted(cells.items()):
        seeds = sorted({k[0] for v in by_name.values() for k in v})
        row: dict = {"checks": len(by_name.get(plain[0], {})), "seeds": len(seeds)}
        for name in nulled:
            stat, null = by_name.get(name, {}), by_name.get(f"{name}_null", {})
            keys = [k for k in stat if k in null and math.isfinite(stat[k]) and math.isfinite(null[k])]
            if not keys:
                continue
            per_seed = {s: [k for k in keys if k[0] == s] for s in seeds}
            agg = PER_SEED.get(name, _mean)
            row[short(name)] = {
                "value": _mean(agg([stat[k] for k in ks]) for ks in per_seed.values() if ks),
                "null": _mean(agg([null[k] for k in ks]) for ks in per_seed.values() if ks),
                "excess": t_interval([agg([stat[k] - null[k] for k in ks]) for ks in per_seed.values() if ks],
                                     null=0.0),
                "above_null": sum(stat[k] > null[k] for k in keys) / len(keys) if keys else math.nan,
                "cells": len(keys)}
        for name in plain:
            vals = by_name.get(name, {})
            if not vals:
                continue
            fin = _finite(vals.values())
            row[short(name)] = {
                "mean": plain_interval([_mean(v for k, v in vals.items() if k[0] == s) for s in seeds],
                                       PLAIN_SCALE.get(name, "t")),
                "median": statistics.median(fin) if fin else math.nan, "min": min(fin) if fin else math.nan}
        out[layer] = row
    return out


HELDOUT = "heldout_"
HELDOUT_PLAIN = ("law_linearity_r2", "law_row_shift_share", "law_ds_norm", "value_dv_norm")


def heldout_records(records: list[Measurement]) -> list[Measurement]:
    """The held-out law check's records (profiler.py, prefix `heldout_`) under the in-batch names."""
    from dataclasses import replace

    return [replace(r, name=r.name[len(HELDOUT):]) for r in records if r.name.startswith(HELDOUT)]


def per_seed_excess(records: list[Measurement], name: str) -> dict[int, dict[int, float]]:
    """layer -> seed -> the mean over the seed's checks and heads of `name` - `name`_null."""
    stat = {(r.layer, r.seed, r.step, r.head): r.value for r in records if r.name == name}
    null = {(r.layer, r.seed, r.step, r.head): r.value for r in records if r.name == f"{name}_null"}
    cells: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for k, v in stat.items():
        if k in null and math.isfinite(v) and math.isfinite(null[k]):
            cells[k[0]][k[1]].append(v - null[k])
    return {layer: {seed: sum(v) / len(v) for seed, v in by_seed.items()} for layer, by_seed in cells.items()}


def self_influence_summary(records: list[Measurement], names: tuple[str, ...] = ("law_cosine", "value_cosine")
                           ) -> dict[int, dict]:
    """Per layer and law: the self-influence, the in-batch excess minus the held-out excess per
    seed (the part of the in-batch alignment a step owes to its own batch's gradients, a positive
    semidefinite self-term to first order), with a t-interval over the seeds that have both."""
    out: dict[int, dict] = defaultdict(dict)
    held = heldout_records(records)
    for name in names:
        inb, ho = per_seed_excess(records, name), per_seed_excess(held, name)
        for layer in sorted(set(inb) & set(ho)):
            seeds = sorted(set(inb[layer]) & set(ho[layer]))
            out[layer][short(name)] = {"in_batch": t_interval([inb[layer][s] for s in seeds], null=0.0),
                                       "heldout": t_interval([ho[layer][s] for s in seeds], null=0.0),
                                       "self_term": t_interval([inb[layer][s] - ho[layer][s] for s in seeds],
                                                               null=0.0)}
    return dict(out)


def _by_seed(records, name: str, layer: int, head: int = -1) -> dict[int, dict[int, float]]:
    out: dict[int, dict[int, float]] = defaultdict(dict)
    for r in records:
        if r.name == name and r.layer == layer and r.head == head:
            out[r.seed][r.step] = r.value
    return out


def _replica_jitter(records: list[Measurement], name: str) -> dict[int, dict[int, float]]:
    """seed -> step -> mean pairwise squared difference of calibration `name` between the run's own
    value and its replicas' (`<name>_replica`, head = replica index) at that step."""
    own = {(r.seed, r.step): r.value for r in records if r.name == name}
    reps: dict = defaultdict(list)
    for r in records:
        if r.name == f"{name}_replica":
            reps[(r.seed, r.step)].append(r.value)
    out: dict[int, dict[int, float]] = defaultdict(dict)
    for (seed, step), vals in reps.items():
        v = _finite([own.get((seed, step), math.nan), *vals])
        pairs = [(a - b) ** 2 for i, a in enumerate(v) for b in v[i + 1:]]
        out[seed][step] = sum(pairs) / len(pairs) if pairs else math.nan
    return out


PRECISION_METRICS = ("entropy_mae", "kl")
FREEZE_LEFT = 0.1  # frozen: at most this share of the frame's systematic distance left (the t90's 10%)


def frame_summary(records: list[Measurement], config: dict | None = None, fraction: float = 0.1) -> dict[int, dict]:
    """Per layer: the frame-precision lead (lead.py) on steps and on the learning-rate budget,
    with precision measured by the entropy MAE and by the KL, each distance to its late end with
    the replicas' jitter taken out; the freeze: the share of the frame's systematic distance
    still to go at the last checkpoint before the late ones (a frozen frame has none left; the
    claim is tested against the 10% the t90 allows); the movement over each interval against
    the replicas' jitter over it (frames.movement_ratio); and, for
    the record, the first version's numbers (TV drift to the final map, the last checkpoint as
    the endpoint, the first crossing; the velocity freeze at `fraction` of its peak per step and
    per unit of learning rate; where the drift-to-final criterion fires)."""
    from ...stats import log_interval, logit_interval, running_mean
    from .frames import interpolate, movement_ratio
    from .lead import frame_progress, jitter_floor, precision_progress, progress_of, systematic_distance

    cal = {m: {(r.seed, r.step): r.value for r in records if r.name == m and r.head == -1} for m in PRECISION_METRICS}
    mae = cal["entropy_mae"]
    seeds = sorted({k[0] for k in mae})
    steps = sorted({k[1] for k in mae})
    layers = sorted({r.layer for r in records if r.name == "map_drift" and r.head == -1})
    if not steps:
        return {}
    budget = _budget(config, steps)
    late = min(int((config or {}).get("late_maps", 3)), max(1, len(steps) - 1))
    cut = len(steps) - late  # t90s are read before the late checkpoints the references average
    has_replicas = any(r.name == "map_jitter_sq" for r in records)
    # the floor from replicas run through the late window (any jitter process) where the study has it
    to_end = any(r.name == "map_floor_sq" for r in records)
    floor_kind = "through the late window" if to_end else "one interval" if has_replicas else "none"
    zero = [0.0] * len(steps)
    precision: dict[str, dict[int, list[float]]] = {}
    precision_one: dict[str, dict[int, list[float]]] = {}  # the one-interval floor, for the record
    for metric in PRECISION_METRICS:
        jit = _replica_jitter(records, metric)
        late_floor = _by_seed(records, f"{metric}_floor_sq", -1)
        precision[metric], precision_one[metric] = {}, {}
        for seed in seeds:
            m = [cal[metric].get((seed, s), math.nan) for s in steps]
            end = _mean(m[-late:])
            d = [x - end for x in m]
            one = jitter_floor(interpolate(steps, jit.get(seed, {})), late) if has_replicas else zero
            floor = interpolate(steps, late_floor.get(seed, {})) if to_end else one
            sign = [1.0 if x >= 0 else -1.0 for x in d]
            precision[metric][seed] = progress_of(systematic_distance([x * x for x in d], floor, sign))
            precision_one[metric][seed] = progress_of(systematic_distance([x * x for x in d], one, sign))
    # the precision on the frame's scale: the predictive distributions of the probe batch
    pred_drift, pred_floor = _by_seed(records, "pred_drift_sq", -1), _by_seed(records, "pred_floor_sq", -1)
    predictive = {seed: progress_of(systematic_distance([pred_drift[seed].get(s, math.nan) for s in steps],
                                                        interpolate(steps, pred_floor.get(seed, {}))))
                  for seed in seeds if to_end and seed in pred_drift}
    out: dict[int, dict] = {}
    for layer in layers:
        drift = _by_seed(records, "map_drift", layer)
        drift_sq = _by_seed(records, "map_drift_sq", layer)
        step_sq = _by_seed(records, "map_step_sq", layer)
        velocity = _by_seed(records, "map_velocity", layer)
        jitter_sq = _by_seed(records, "map_jitter_sq", layer)
        floor_sq = _by_seed(records, "map_floor_sq", layer)
        per_seed: dict[int, dict] = {}
        frame_new, frame_old, frame_one, maes, ratios = {}, {}, {}, {}, {}
        for seed in seeds:
            d = [drift[seed].get(s, math.nan) for s in steps]
            dsq = [drift_sq[seed].get(s, math.nan) for s in steps]
            m = [mae.get((seed, s), math.nan) for s in steps]
            v = [velocity[seed].get(s, math.nan) for s in steps[1:]]
            j = interpolate(steps, jitter_sq.get(seed, {})) if has_replicas else zero
            one = jitter_floor(j, late) if has_replicas else zero
            frame_one[seed] = progress_of(systematic_distance(dsq, one))
            frame_new[seed] = (progress_of(systematic_distance(dsq, interpolate(steps, floor_sq.get(seed, {}))))
                               if to_end else frame_one[seed])
            frame_old[seed], maes[seed] = frame_progress(d), m
            moved = [step_sq[seed].get(s, math.nan) for s in steps[1:]]
            ratio = movement_ratio(moved, j[1:]) if has_replicas else [math.nan] * len(moved)
            ratios[seed] = ratio
            smooth = running_mean(frame_new[seed][:cut], 3)
            remaining = 1 - smooth[-1] if smooth and math.isfinite(smooth[-1]) else math.nan
            # the first version's criteria, for the record
            v_lr = [x * (b - a) / (lb - la) if lb > la else math.nan
                    for x, a, b, la, lb in zip(v, steps, steps[1:], budget, budget[1:])]
            f = freeze_step(steps, v, fraction) if len(steps) > 1 else None
            f_lr = freeze_step(steps, v_lr, fraction) if len(steps) > 1 else None
            old = next((s for s, x in zip(steps, d) if d[0] > 0 and x <= fraction * d[0]), None)
            per_seed[seed] = {"remaining": remaining, "velocity_freeze_step": f,
                              "velocity_freeze_step_per_lr": f_lr, "drift_criterion_step": old,
                              "movement_ratio": ratio, "jitter_sq": j}
        leads = {metric: lead_summary(steps, budget, frame_new, precision[metric], cut=cut)
                 for metric in PRECISION_METRICS}
        one_scale = lead_summary(steps, budget, frame_new, predictive, cut=cut) if predictive else None
        one_interval = lead_summary(steps, budget, frame_one, precision_one["entropy_mae"], cut=cut)
        first_version = lead_summary(steps, budget, frame_old, {s: precision_progress(maes[s]) for s in seeds},
                                     stays=False)
        for seed, row in per_seed.items():  # the MAE still gained after the frame settled (first checkpoint past t90)
            t90 = leads["entropy_mae"]["per_seed"][seed]["t90_frame_steps"]
            at = next((s for s in steps if t90 is not None and s >= t90), None)
            row.update(t90_frame=t90, **gain_after(steps, maes[seed], at))
        # per seed the geometric mean of the last 3 intervals' ratios, over seeds a log-t interval
        # with its test against 1 (moves more than chance at the end)
        last = [math.exp(sum(math.log(x) for x in r[-3:]) / len(r[-3:])) for r in ratios.values()
                if r and all(x > 0 and math.isfinite(x) for x in r[-3:])]
        beyond_chance = {**log_interval(last, null=1.0), "unreadable": len(ratios) - len(last)}  # counted, not dropped
        out[layer] = {"lead": leads["entropy_mae"], "lead_kl": leads["kl"], "lead_first_version": first_version,
                      "lead_one_scale": one_scale, "lead_one_interval_floor": one_interval, "floor": floor_kind,
                      "replicas": has_replicas, "late_maps": late,
                      "remaining": logit_interval([v["remaining"] for v in per_seed.values()], null=FREEZE_LEFT),
                      "freeze": freeze_counts([v["remaining"] for v in per_seed.values()], FREEZE_LEFT),
                      "dissociation": dissociation(per_seed, budget, steps),
                      "remaining_at": steps[cut - 1], "freeze_left": FREEZE_LEFT,
                      "frozen_seeds": sum(1 for v in per_seed.values() if v["t90_frame"] is not None),
                      "last_movement_vs_chance": beyond_chance,
                      "velocity_freeze_steps": [v["velocity_freeze_step"] for v in per_seed.values()],
                      "velocity_freeze_steps_per_lr": [v["velocity_freeze_step_per_lr"] for v in per_seed.values()],
                      "drift_criterion_steps": [v["drift_criterion_step"] for v in per_seed.values()],
                      "share_after_mean": _mean(v["share_after"] for v in per_seed.values()),
                      "per_seed": per_seed, "fraction": fraction, "steps": steps, "budget": budget,
                      "last_step": steps[-1], "frame_progress": frame_new, "precision_progress": precision}
    return out


def freeze_counts(remaining: list[float], threshold: float) -> dict:
    """The freeze as per-seed counts (issue 44: a share with a point mass at its bound makes a
    logit-t interval degenerate: eight seeds at 0 give "0.001 [0.001, 0.001]" and p = 0). Per
    seed the share of the frame's systematic distance still to go: `below` seeds under
    `threshold` (a share below 0, past the late map, counts as 0 left), `above` the rest, and
    `unreadable` (no finite share: the frame moved no further than its floor) counted against the
    claim, never dropped; the sign test of below against above + unreadable; the arithmetic mean
    of the shares clipped to [0, 1] with its t-interval clipped to [0, 1] (`clipped`: how many
    were moved onto a bound); `at_bound` True when every readable seed sits at one value (no
    spread: no p-value of a t-test exists)."""
    from ...stats import sign_test

    readable = [x for x in remaining if x is not None and math.isfinite(x)]
    clipped = [min(max(x, 0.0), 1.0) for x in readable]
    below = sum(1 for x in clipped if x < threshold)
    above = len(clipped) - below
    unreadable = len(remaining) - len(readable)
    mean = t_interval(clipped)
    mean = {**mean, "ci_low": max(0.0, mean["ci_low"]) if math.isfinite(mean["ci_low"]) else math.nan,
            "ci_high": min(1.0, mean["ci_high"]) if math.isfinite(mean["ci_high"]) else math.nan,
            "method": "t, clipped to [0, 1]"}
    return {"below": below, "above": above, "unreadable": unreadable, "seeds": len(remaining),
            "clipped": sum(1 for x, c in zip(readable, clipped) if x != c), "mean": mean,
            "at_bound": len(set(clipped)) == 1 and len(clipped) >= 2, "threshold": threshold,
            "sign_test_p": sign_test(below, above + unreadable)}


def dissociation(per_seed: dict[int, dict], budget: list[float], steps: list[int]) -> dict:
    """The freeze on the learning-rate axis (issue 44): a frame that stops because the learning
    rate went to zero stops everything else too; Paper II's freeze (arXiv 2512.22473, section 6)
    is a frame that stops *while the calibration still improves*. Per seed whose frame settled:
    the entropy MAE gained after the frame's t90 (bits; t-interval over those seeds, tested
    against 0) and the share of the learning-rate budget still to be spent then (logit-t); the
    seeds whose frame never settled are counted."""
    from ...stats import logit_interval

    gained, left = [], []
    for row in per_seed.values():
        t90 = row.get("t90_frame")
        if t90 is None or not math.isfinite(row.get("gained_after", math.nan)):
            continue
        gained.append(row["gained_after"])
        k = next(i for i, s in enumerate(steps) if s >= t90)
        left.append(1 - budget[k])
    return {"gained_after": t_interval(gained, null=0.0), "budget_left": logit_interval(left),
            "settled_seeds": len(gained), "seeds": len(per_seed)}


def _lr_at(config: dict | None):
    """The study's learning-rate schedule as a function of the step (None without a config)."""
    if not (config and config.get("train")):
        return None
    from ...training.config import TrainConfig

    return TrainConfig(**config["train"]).lr_at


def _budget(config: dict | None, steps: list[int]) -> list[float]:
    """The learning-rate budget spent at each checkpoint, from the study's training config
    (the even share of steps when there is none)."""
    if config and config.get("train"):
        from ...training.config import TrainConfig

        cfg = TrainConfig(**config["train"])
        return lr_budget(cfg.lr_at, steps)
    span = steps[-1] - steps[0]
    return [(s - steps[0]) / span if span else math.nan for s in steps]


def probe_summary(records: list[Measurement], names: tuple[str, ...]) -> dict[str, dict[int, dict]]:
    """Per quantity and layer: the mean over seeds and heads at the first and the last profiled step."""
    out: dict[str, dict[int, dict]] = {}
    for name in names:
        vals = [r for r in records if r.name == name]
        if not vals:
            continue
        first, last = min(r.step for r in vals), max(r.step for r in vals)
        per_layer: dict[int, dict] = {}
        for layer in sorted({r.layer for r in vals}):
            per_layer[layer] = {"first_step": first,
                                "first": _mean(r.value for r in vals if r.layer == layer and r.step == first),
                                "last_step": last,
                                "last": _mean(r.value for r in vals if r.layer == layer and r.step == last)}
        out[name] = per_layer
    return out


def calibration_summary(records: list[Measurement]) -> dict:
    """Entropy MAE and KL (bits) at the first and last checkpoint, mean over seeds."""
    out = {}
    for name in ("entropy_mae", "kl"):
        vals = [r for r in records if r.name == name]
        if vals:
            first, last = min(r.step for r in vals), max(r.step for r in vals)
            out[name] = {"first_step": first, "first": _mean(r.value for r in vals if r.step == first),
                         "last_step": last, "last": _mean(r.value for r in vals if r.step == last)}
    return out


def summarize_profile(study_id: str, db: str | None = None) -> dict:
    from ..store import read_study
    from .crosslag import crosslag_summary
    from .heads import head_summary
    from .probes import PROBE_NAMES
    from .relevance import relevance_summary
    from .verdicts import profile_verdicts

    records = read_dynamics(study_id, path=db)
    study = read_study(study_id, db)
    config = study["config"] if study else None
    held = heldout_records(records)
    summary: dict[str, object] = {"law": law_summary(records),
               "law_heldout": law_summary(held, HELDOUT_NULLED + VALUE_NULLED, HELDOUT_PLAIN) if held else {},
               "self_influence": self_influence_summary(records),
               "frames": frame_summary(records, config),
               "crosslag": crosslag_summary(records, _lr_at(config)),
               "probe": probe_summary(records, PROBE_NAMES), "calibration": calibration_summary(records),
               "relevance": relevance_summary(records), "heads": head_summary(records)}
    verdicts = profile_verdicts(summary)
    summary["verdicts"] = verdicts
    summary["headline"] = [f"{v['verdict']}: {v['claim']} ({v['number']})" for v in verdicts
                           if v["family"] == "primary"]
    return summary
