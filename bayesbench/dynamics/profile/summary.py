"""Numbers of a profile study, computed from its stored records (so a report can be rebuilt
from the store alone): the routing law per layer, frame freeze against calibration gained,
and the probe quantities at the first and last profiled step."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

from ..store import Measurement, read_dynamics
from .frames import freeze_step, gain_after


def _mean(xs) -> float:
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    return sum(xs) / len(xs) if xs else math.nan


def _finite(xs) -> list[float]:
    return [x for x in xs if x is not None and math.isfinite(x)]


def table(records: list[Measurement], name: str) -> dict[tuple[int, int, int, int], float]:
    """{(seed, step, layer, head): value} of one quantity."""
    return {(r.seed, r.step, r.layer, r.head): r.value for r in records if r.name == name}


def law_summary(records: list[Measurement]) -> dict[int, dict]:
    """Per layer: R^2 and sign agreements over every (seed, checked step, head)."""
    out: dict[int, dict] = {}
    names = {"law_r2": "r2", "law_sign_agreement": "sign", "law_sign_agreement_centred": "sign_centred",
             "law_pred_rel_error": "pred_rel_error", "law_cosine": "cosine"}
    by_layer: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.name in names:
            by_layer[r.layer][names[r.name]].append(r.value)
    for layer, vals in sorted(by_layer.items()):
        r2 = _finite(vals["r2"])
        out[layer] = {"r2_mean": _mean(r2), "r2_median": statistics.median(r2) if r2 else math.nan,
                      "r2_min": min(r2) if r2 else math.nan,
                      "sign_agreement": _mean(vals["sign"]), "cosine": _mean(vals["cosine"]),
                      "sign_agreement_centred": _mean(vals["sign_centred"]),
                      "pred_rel_error_median": statistics.median(_finite(vals["pred_rel_error"]))
                      if _finite(vals["pred_rel_error"]) else math.nan,
                      "checks": len(vals["r2"])}
    return out


def frame_summary(records: list[Measurement], fraction: float = 0.1) -> dict[int, dict]:
    """Per layer: the freeze step of each seed (drift <= fraction of its first value) and the
    entropy MAE it still gains afterwards; means over seeds."""
    drift = {(r.seed, r.step, r.layer): r.value for r in records if r.name == "map_drift" and r.head == -1}
    mae = {(r.seed, r.step): r.value for r in records if r.name == "entropy_mae"}
    seeds = sorted({k[0] for k in mae})
    steps = sorted({k[1] for k in mae})
    layers = sorted({k[2] for k in drift})
    out: dict[int, dict] = {}
    for layer in layers:
        per_seed = {}
        for seed in seeds:
            d = [drift.get((seed, s, layer), math.nan) for s in steps]
            m = [mae.get((seed, s), math.nan) for s in steps]
            f = freeze_step(steps, d, fraction)
            per_seed[seed] = {"freeze_step": f, **gain_after(steps, m, f)}
        keys = ("mae_at_freeze", "mae_final", "gained_after", "share_after")
        frozen = [v["freeze_step"] for v in per_seed.values() if v["freeze_step"] is not None]
        out[layer] = {"freeze_step_mean": _mean(frozen), "freeze_steps": [v["freeze_step"] for v in per_seed.values()],
                      **{f"{k}_mean": _mean(v[k] for v in per_seed.values()) for k in keys},
                      "per_seed": per_seed, "fraction": fraction, "last_step": steps[-1] if steps else None}
    return out


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
    from .probes import PROBE_NAMES

    records = read_dynamics(study_id, path=db)
    return {"law": law_summary(records), "frames": frame_summary(records),
            "probe": probe_summary(records, PROBE_NAMES), "calibration": calibration_summary(records)}
