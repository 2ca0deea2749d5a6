"""When does each head specialise? Per-head timing over seeds (a profile with --head-ablation).

Head indices mean nothing across seeds (any permutation of a layer's heads is the same model), so
within each layer and seed the heads are ranked by their final *ablation damage*, the entropy
MAE with the head's output zeroed minus the intact model's (bits, on the evaluation set): rank 0
is the head the finished model can least do without. Per seed and head:

    damage            final ablation damage (bits)
    t90_damage        the step from which the damage has made and keeps 90% of its change from
                      the first checkpoint to its end (the mean of the last K checkpoints, a
                      robust endpoint), interpolated, read before those K (lead.settled)
    t90_entropy       the same for the drop of the head's attention entropy on the probe
                      batch's maps (`map_entropy`): the same fixed sequences and the same
                      checkpoints as the damage (the training-batch probes are noisier and on
                      another grid, which biases "damage after entropy")
    t_peak_velocity   the checkpoint interval where the head's map moved fastest (its end step)
    t_peak_advantage  the probed step with the largest mean |A_ij|

Leads, each a t-interval over seeds of the per-seed difference with its t-test against 0
(positive: the first-named event comes later):

    rank1_after_rank0_damage / _entropy  t90 of the rank-1 head minus the rank-0 head's, per layer
    layer1_after_layer0_damage           t90_damage of layer 1's rank-0 head minus layer 0's
    damage_after_entropy                 t90_damage - t90_entropy of each layer's rank-0 head:
                                         positive when the map sharpens before the head matters
"""

from __future__ import annotations

import math
from collections import defaultdict

from ...stats import logit_interval, t_interval
from .lead import settled

LATE = 3  # the robust endpoint: the mean of the last LATE checkpoints


def _progress(values: list[float], rising: bool, late: int = LATE) -> list[float]:
    tail = [v for v in values[-late:] if math.isfinite(v)]
    change = (sum(tail) / len(tail) if tail else math.nan) - values[0]
    if not math.isfinite(change) or change == 0 or (change > 0) != rising:
        return [math.nan] * len(values)
    return [(v - values[0]) / change for v in values]


def _argmax_step(series: dict[int, float]) -> float | None:
    fin = {s: v for s, v in series.items() if math.isfinite(v)}
    return float(max(fin, key=fin.__getitem__)) if fin else None


def head_timing(records) -> dict:
    """{(seed, layer, head): timing dict} from a study's records (empty without head ablations)."""
    series: dict = defaultdict(lambda: defaultdict(dict))  # (seed, layer, head) -> name -> step -> value
    intact: dict = defaultdict(dict)
    names = ("entropy_mae_head_zeroed", "map_entropy", "map_velocity", "adv_abs_mean")
    for r in records:
        if r.name == "entropy_mae":
            intact[r.seed][r.step] = r.value
        elif r.name in names and r.head >= 0:
            series[(r.seed, r.layer, r.head)][r.name][r.step] = r.value
    out = {}
    for key, s in series.items():
        zeroed = s.get("entropy_mae_head_zeroed")
        if not zeroed:
            continue
        steps = sorted(zeroed)
        cut = max(1, len(steps) - LATE)
        damage = [zeroed[c] - intact[key[0]].get(c, math.nan) for c in steps]
        ent = [s.get("map_entropy", {}).get(c, math.nan) for c in steps]
        out[key] = {"damage": damage[-1], "steps": (steps[0], steps[-1]),
                    "t90_damage": settled(steps, _progress(damage, rising=True), cut=cut),
                    "t90_entropy": settled(steps, _progress(ent, rising=False), cut=cut),
                    "t_peak_velocity": _argmax_step(s.get("map_velocity", {})),
                    "t_peak_advantage": _argmax_step(s.get("adv_abs_mean", {}))}
    return out


def _diff(a, b):
    return a - b if a is not None and b is not None else None


def head_summary(records) -> dict:
    """Per layer and rank: intervals over seeds of each timing; the leads of the module docstring."""
    timing = head_timing(records)
    if not timing:
        return {}
    ranked: dict = defaultdict(dict)  # (layer, rank) -> seed -> timing
    for seed in sorted({k[0] for k in timing}):
        for layer in sorted({k[1] for k in timing if k[0] == seed}):
            heads = sorted((k for k in timing if k[0] == seed and k[1] == layer),
                           key=lambda k: -timing[k]["damage"] if math.isfinite(timing[k]["damage"]) else math.inf)
            for rank, k in enumerate(heads):
                ranked[(layer, rank)][seed] = {**timing[k], "head": k[2]}
    fields = ("damage", "t90_damage", "t90_entropy", "t_peak_velocity", "t_peak_advantage")
    out: dict = {"by_rank": {}, "leads": {}}
    lo, hi = next(iter(timing.values()))["steps"]

    def interval(f: str, values: list) -> dict:
        vals = [v for v in values if v is not None]
        return t_interval(vals) if f == "damage" or hi <= lo else logit_interval(vals, low=lo, high=hi)

    for (layer, rank), per_seed in sorted(ranked.items()):
        out["by_rank"][f"L{layer} rank {rank}"] = {
            "layer": layer, "rank": rank, "heads": {s: v["head"] for s, v in per_seed.items()},
            **{f: interval(f, [v[f] for v in per_seed.values()]) for f in fields}}
    layers = sorted({layer for layer, _ in ranked})
    for layer in layers:
        top, second = ranked.get((layer, 0), {}), ranked.get((layer, 1), {})
        for f in ("damage", "entropy"):
            out["leads"][f"L{layer}: rank1_after_rank0_{f}"] = t_interval(
                [_diff(second[s][f"t90_{f}"], top[s][f"t90_{f}"]) for s in top if s in second], null=0.0)
        out["leads"][f"L{layer}: damage_after_entropy (rank 0)"] = t_interval(
            [_diff(v["t90_damage"], v["t90_entropy"]) for v in top.values()], null=0.0)
    if len(layers) > 1:
        a, b = ranked.get((layers[0], 0), {}), ranked.get((layers[-1], 0), {})
        out["leads"][f"L{layers[-1]}_after_L{layers[0]}_damage (rank 0)"] = t_interval(
            [_diff(b[s]["t90_damage"], a[s]["t90_damage"]) for s in a if s in b], null=0.0)
    return out
