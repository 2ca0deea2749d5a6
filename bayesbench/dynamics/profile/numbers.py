"""The small summary of a profile study that docs/dynamics.md quotes (docs/data/dynamics_*.json).

A number copied by hand from a run stays when the next run changes it; the docs quote these
files instead, and a test compares each quoted number with its file. `docs_numbers` keeps, from a
study's full summary (summary.py), the verdicts and the few intervals the page quotes, each
interval as [mean, low, high], rounded to 4 significant digits.

    python scripts/dynamics_numbers.py STUDY --db STORE --out docs/data/dynamics_X.json \
        [--before BEFORE.json] [--command "..."] [--wall-s S]

    python scripts/dynamics_numbers.py self-term 16=STUDY@STORE 64=STUDY@STORE --out FILE

(`write_study_numbers`; `write_self_term`: the self-influence, in-batch minus held-out cosine
excess, of studies at several batch sizes, and the ratio of each to the smallest batch's: the
self-term is one of B terms of the step, so it should fall with B).

`--before` adds the same study's verdicts as the instruments before issue 44 read them (a JSON
list of verdict dicts, e.g. from the previous version's `summarize_profile` on the same store).
"""

from __future__ import annotations

import json
import math


def _r(x) -> float | None:
    if x is None or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(f"{x:.4g}")


def interval(d: dict | None) -> list | None:
    """[mean, low, high] of an interval dict (None where absent)."""
    if not d:
        return None
    return [_r(d.get("mean")), _r(d.get("ci_low")), _r(d.get("ci_high"))]


def verdict_rows(verdicts: list[dict], family: str = "primary") -> list[dict]:
    return [{"claim": v["claim"], "number": v["number"], "p": _r(v.get("p")), "p_adj": _r(v.get("p_adj")),
             "verdict": v["verdict"]} for v in verdicts if v["family"] == family]


def _lead(lead: dict | None) -> dict | None:
    if not lead:
        return None
    out = {k: interval(lead.get(k)) for k in ("lead_steps", "t90_frame_steps", "t90_precision_steps")}
    out.update({k: lead.get(k) for k in ("frame_first_seeds", "precision_first_seeds", "frame_never_seeds",
                                         "precision_never_seeds", "seeds")})
    return {**out, "sign_test_p": _r(lead.get("sign_test_p"))}


def floor_ratios(records, late: int) -> dict:
    """Per checkpoint with a floor through the late window and per layer (-1: the predictive
    distributions): [min, max] over seeds of that floor over the one-interval floor J2 (1 + 1/K) / 2
    at the same checkpoint (how wrong the independence assumption is there)."""
    by: dict = {}
    for r in records:
        by[(r.name, r.seed, r.step, r.layer, r.head)] = r.value
    out: dict = {}
    for (name, seed, step, layer, head), v in by.items():
        if head != -1 or name not in ("map_floor_sq", "pred_floor_sq"):
            continue
        one = by.get(("map_jitter_sq" if name == "map_floor_sq" else "pred_jitter_sq", seed, step, layer, -1))
        if one is None or not one > 0:
            continue
        out.setdefault(str(step), {}).setdefault(str(layer), []).append(v / (one * (1 + 1 / late) / 2))
    return {step: {layer: [_r(min(x)), _r(max(x))] for layer, x in d.items()} for step, d in sorted(
        out.items(), key=lambda kv: int(kv[0]))}


def docs_numbers(summary: dict) -> dict:
    """The quoted part of a profile summary (module docstring)."""
    law, held, selfinf = summary.get("law") or {}, summary.get("law_heldout") or {}, summary.get("self_influence") or {}
    laws = {}
    for layer in sorted(law, key=int):
        row = {}
        for key, name in (("cosine", "routing"), ("value_cosine", "value")):
            s = (selfinf.get(layer) or selfinf.get(int(layer)) or {}).get(key, {})
            row[name] = {"in_batch": interval((law[layer].get(key) or {}).get("excess")),
                         "heldout": interval(((held.get(layer) or held.get(int(layer)) or {}).get(key) or {})
                                             .get("excess")),
                         "self_term": interval(s.get("self_term"))}
        laws[str(layer)] = row
    frames = {}
    for layer, f in sorted((summary.get("frames") or {}).items(), key=lambda kv: int(kv[0])):
        c, d = f.get("freeze") or {}, f.get("dissociation") or {}
        frames[str(layer)] = {
            "floor": f.get("floor"), "lead_one_scale": _lead(f.get("lead_one_scale")),
            "lead_entropy_mae": _lead(f.get("lead")), "lead_entropy_mae_one_interval_floor":
                _lead(f.get("lead_one_interval_floor")),
            "freeze": {"below": c.get("below"), "above": c.get("above"), "unreadable": c.get("unreadable"),
                       "sign_test_p": _r(c.get("sign_test_p")), "mean_clipped": interval(c.get("mean")),
                       "at_bound": c.get("at_bound"), "at_step": f.get("remaining_at")},
            "freeze_logit_first_form": interval(f.get("remaining")),
            "dissociation": {"gained_after_bits": interval(d.get("gained_after")),
                             "budget_left": interval(d.get("budget_left")), "settled_seeds": d.get("settled_seeds"),
                             "seeds": d.get("seeds")}}
    cal = summary.get("calibration") or {}
    return {"verdicts": verdict_rows(summary.get("verdicts") or []),
            "verdicts_secondary": verdict_rows(summary.get("verdicts") or [], "secondary"),
            "laws": laws, "frames": frames,
            "calibration": {k: {"first": _r(v.get("first")), "last": _r(v.get("last"))} for k, v in cal.items()},
            "timing": {k: _r(v) for k, v in (summary.get("timing") or {}).items()
                       if k in ("wall_s", "cpu_s", "replicas_cpu_s", "replica_steps", "steps")}}


def self_term_numbers(runs: dict[int, tuple[str, str | None]]) -> dict:
    """Per batch size (-> (study, store)): per layer the in-batch, held-out and self-influence
    excesses of the routing and value laws (summary.self_influence_summary) as [mean, low, high],
    and each self-influence mean over the smallest batch's."""
    from ..store import read_dynamics
    from .summary import self_influence_summary

    out: dict = {}
    for batch, (study, db) in sorted(runs.items()):
        si = self_influence_summary(read_dynamics(study, path=db))
        out[str(batch)] = {"study_id": study, "layers": {
            str(layer): {name: {k: interval(v.get(k)) for k in ("in_batch", "heldout", "self_term")}
                         for name, v in d.items()} for layer, d in si.items()}}
    first = out[str(min(runs))]["layers"]
    for batch, row in out.items():
        row["self_term_over_smallest_batch"] = {
            layer: {name: _r(v["self_term"][0] / first[layer][name]["self_term"][0])
                    if v["self_term"][0] is not None and first[layer][name]["self_term"][0] else None
                    for name, v in d.items()} for layer, d in row["layers"].items()}
    return out


def write_self_term(runs: dict[int, tuple[str, str | None]], out: str, command: str = "") -> dict:
    """Write `self_term_numbers(runs)` with the command that measured them to `out`."""
    data = {"command": command, "batches": self_term_numbers(runs)}
    _dump(data, out)
    return data


def write_study_numbers(study_id: str, db: str | None, out: str, *, before: str | None = None, command: str = "",
                        wall_s: float | None = None) -> dict:
    """Write a stored profile study's `docs_numbers` (with the floors' ratios from its records,
    the measured wall time and, from `before`, a JSON list of its verdicts under the previous
    instruments) to `out`."""
    from ..store import read_dynamics, read_study

    study = read_study(study_id, db)
    if study is None or not study.get("summary"):
        raise ValueError(f"study {study_id!r}: no stored summary in {db}")
    data = {"study_id": study_id, "command": command, "seeds": study["config"]["seeds"],
            **docs_numbers(study["summary"])}
    ratios = floor_ratios(read_dynamics(study_id, path=db), int(study["config"].get("late_maps", 3)))
    if ratios:
        data["floor_over_one_interval_floor"] = ratios
    if wall_s is not None:
        data["timing"]["wall_s_measured"] = _r(wall_s)
    if before:
        with open(before) as fh:
            data["verdicts_before"] = verdict_rows(json.load(fh))
    _dump(data, out)
    return data


def _dump(data: dict, out: str) -> None:
    with open(out, "w") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
        fh.write("\n")
