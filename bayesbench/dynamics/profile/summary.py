"""Numbers of a profile study, computed from its stored records (so a report can be rebuilt
from the store alone): the routing law per layer against its shuffle null, frame vs precision
on a common axis, the probe quantities at the first and last profiled step, and the two
extensions (relevant-key ranks on the bijection with repeated keys; per-head timing)."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

from ..intervals import bootstrap_interval, t_interval
from ..store import Measurement, read_dynamics
from .frames import freeze_step, gain_after
from .law import NULLED, PLAIN
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
PER_SEED = {"law_kappa": statistics.median}
# bounded per check (R^2 <= 1, the row-shift share in [0, 1]): a bootstrap interval over seeds stays in
# range; the own-update share is a projection ratio, unbounded, and keeps the t-interval
BOUNDED = ("law_linearity_r2", "law_row_shift_share")


def law_summary(records: list[Measurement]) -> dict[int, dict]:
    """Per layer and statistic: the mean over seeds of the per-seed mean (over checked steps and
    heads; the median for kappa) of the statistic and of its null, the excess (statistic - null)
    with a t-interval over seeds, and the share of (seed, step, head) cells above their null. The
    linearity check, the own-update share and the row-shift share: per-seed means with an
    interval over seeds (bootstrap for the bounded two, `BOUNDED`; t for the share), the median
    and minimum over cells."""
    cells: dict[int, dict[str, dict[tuple, float]]] = defaultdict(lambda: defaultdict(dict))
    wanted = set(NULLED) | {f"{n}_null" for n in NULLED} | set(PLAIN)
    for r in records:
        if r.name in wanted:
            cells[r.layer][r.name][(r.seed, r.step, r.head)] = r.value
    out: dict[int, dict] = {}
    for layer, by_name in sorted(cells.items()):
        seeds = sorted({k[0] for v in by_name.values() for k in v})
        row: dict = {"checks": len(by_name.get(PLAIN[0], {})), "seeds": len(seeds)}
        for name in NULLED:
            stat, null = by_name.get(name, {}), by_name.get(f"{name}_null", {})
            keys = [k for k in stat if k in null and math.isfinite(stat[k]) and math.isfinite(null[k])]
            per_seed = {s: [k for k in keys if k[0] == s] for s in seeds}
            agg = PER_SEED.get(name, _mean)
            row[short(name)] = {
                "value": _mean(agg([stat[k] for k in ks]) for ks in per_seed.values() if ks),
                "null": _mean(agg([null[k] for k in ks]) for ks in per_seed.values() if ks),
                "excess": t_interval([agg([stat[k] - null[k] for k in ks]) for ks in per_seed.values() if ks]),
                "above_null": sum(stat[k] > null[k] for k in keys) / len(keys) if keys else math.nan,
                "cells": len(keys)}
        for name in PLAIN:
            vals = by_name.get(name, {})
            fin = _finite(vals.values())
            interval = bootstrap_interval if name in BOUNDED else t_interval
            row[short(name)] = {
                "mean": interval([_mean(v for k, v in vals.items() if k[0] == s) for s in seeds]),
                "median": statistics.median(fin) if fin else math.nan, "min": min(fin) if fin else math.nan}
        out[layer] = row
    return out


def _by_seed(records, name: str, layer: int, head: int = -1) -> dict[int, dict[int, float]]:
    out: dict[int, dict[int, float]] = defaultdict(dict)
    for r in records:
        if r.name == name and r.layer == layer and r.head == head:
            out[r.seed][r.step] = r.value
    return out


def frame_summary(records: list[Measurement], config: dict | None = None, fraction: float = 0.1) -> dict[int, dict]:
    """Per layer: the frame-precision lead (lead.py) on steps and on the learning-rate budget,
    the velocity freeze step of each seed (frames.freeze_step) and the MAE still gained after it,
    and, for the record, the step where the drift-to-final criterion fires (it always does by
    the last checkpoint)."""
    mae = {(r.seed, r.step): r.value for r in records if r.name == "entropy_mae"}
    seeds = sorted({k[0] for k in mae})
    steps = sorted({k[1] for k in mae})
    layers = sorted({r.layer for r in records if r.name == "map_drift" and r.head == -1})
    if not steps:
        return {}
    budget = _budget(config, steps)
    out: dict[int, dict] = {}
    for layer in layers:
        drift = _by_seed(records, "map_drift", layer)
        velocity = _by_seed(records, "map_velocity", layer)
        per_seed, drifts, maes = {}, {}, {}
        for seed in seeds:
            d = [drift[seed].get(s, math.nan) for s in steps]
            m = [mae.get((seed, s), math.nan) for s in steps]
            v = [velocity[seed].get(s, math.nan) for s in steps[1:]]
            drifts[seed], maes[seed] = d, m
            # the same movement per unit of learning rate spent: a map that stops only because the
            # schedule stopped moving it is not frozen by this one
            v_lr = [x * (b - a) / (lb - la) if lb > la else math.nan
                    for x, a, b, la, lb in zip(v, steps, steps[1:], budget, budget[1:])]
            f = freeze_step(steps, v, fraction) if len(steps) > 1 else None
            f_lr = freeze_step(steps, v_lr, fraction) if len(steps) > 1 else None
            old = next((s for s, x in zip(steps, d) if d[0] > 0 and x <= fraction * d[0]), None)
            per_seed[seed] = {"freeze_step": f, "freeze_step_per_lr": f_lr, "drift_criterion_step": old,
                              **gain_after(steps, m, f)}
        lead = lead_summary(steps, budget, drifts, maes)
        frozen = [v["freeze_step"] for v in per_seed.values() if v["freeze_step"] is not None]
        out[layer] = {"lead": lead, "freeze_steps": [v["freeze_step"] for v in per_seed.values()],
                      "freeze_steps_per_lr": [v["freeze_step_per_lr"] for v in per_seed.values()],
                      "frozen_seeds": len(frozen), "freeze_step_mean": _mean(frozen),
                      "drift_criterion_steps": [v["drift_criterion_step"] for v in per_seed.values()],
                      "share_after_mean": _mean(v["share_after"] for v in per_seed.values()),
                      "per_seed": per_seed, "fraction": fraction, "steps": steps, "budget": budget,
                      "last_step": steps[-1]}
    return out


def _budget(config: dict | None, steps: list[int]) -> list[float]:
    """The learning-rate budget spent at each checkpoint, from the study's training config
    (the even share of steps when there is none)."""
    if config and config.get("train"):
        from ...training.trainer import TrainConfig

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
    from .heads import head_summary
    from .probes import PROBE_NAMES
    from .relevance import relevance_summary

    records = read_dynamics(study_id, path=db)
    study = read_study(study_id, db)
    config = study["config"] if study else None
    return {"law": law_summary(records), "frames": frame_summary(records, config),
            "probe": probe_summary(records, PROBE_NAMES), "calibration": calibration_summary(records),
            "relevance": relevance_summary(records), "heads": head_summary(records)}
