"""A profile study's verdicts: the primary ones named in advance, the rest as a family.

Primary (docs/dynamics.md names them before the numbers), per attention layer:

- routing law, alignment on held-out sequences: on a fixed batch the step never saw, the
  row-centred score change points along alpha A more than its shuffle null (cosine excess > 0);
  the in-batch excess is printed beside it as the self-influence reference (to first order a step
  aligns with its own batch's gradients, issue 44);
- value law, alignment on held-out sequences: the value change points along -dL/dv more than its
  shuffle null, the in-batch number beside it;
- frame first, on one scale: t90(predictive distributions of the probe batch) - t90(maps of the
  same batch) > 0, both against the floor from replicas run through the late window; a study
  without that floor reads "cannot tell" (the one-interval floor assumes independent jitter);
- the maps freeze: seeds with less than 10% of the maps' systematic distance to the late map
  left at the last checkpoint before the late ones, against the rest (sign test; unreadable
  seeds count against);
- the freeze is a dissociation, not the learning rate going to zero: the entropy MAE still
  gained after the frame's t90 > 0;
- (bijection with repeated keys) the advantage points at the relevant key beyond the label
  route: its relevant-key share minus the permuted-label control's share on the same queries
  > 0, in the checks before attention found the key (relevance.py `relevance_summary`).

Also primary, with no test: the routing law as proportionality, Delta s = eta alpha A (Paper II,
section 4), which the measured cosine (a few hundredths) and kappa decide on their own.

No p-value comes from a sample without spread: a t-interval whose seeds all sit at one value
gives "every seed at X" and no test (`_guarded`).

Secondary, as one family: the self-influence (in-batch minus held-out excess), the other law
statistics' excesses, the lead under the entropy MAE and the KL and on the learning-rate budget,
the cross-lagged feeds, the relevance sign test and first-tenth excess, the per-head leads.
"""

from __future__ import annotations

import math

from ..verdicts import adjust, fixed, fmt, sign_verdict
from ..verdicts import test as _plain_test


def _layers(d: dict) -> list:
    return sorted(d, key=lambda k: int(k))


def test(family: str, claim: str, interval: dict | None, control: str, **kw) -> dict:
    """`verdicts.test`, `_guarded`: no p-value from a sample without spread."""
    return _guarded(_plain_test(family, claim, interval, control, **kw), interval)


def _guarded(verdict: dict, interval: dict | None) -> dict:
    """A verdict whose interval has at least 2 seeds and no width (every seed at one value, e.g.
    a share at its bound) gets no p-value: its number says so and it reads "cannot tell"."""
    d = interval or {}
    lo, hi, n = d.get("ci_low", math.nan), d.get("ci_high", math.nan), d.get("n", 0)
    if n >= 2 and math.isfinite(lo) and lo == hi:
        verdict["number"] = f"every seed at {d['mean']:.4g} (no spread: no p-value)"
        verdict["p"] = math.nan
    return verdict


def _order_verdict(family: str, claim: str, lead: dict, replicas: bool | str) -> dict:
    """Which settles first, as one statistic fixed in advance: the sign test over the seeds where
    at least one of the two settled (a censored seed counting by its known sign), whatever the
    data; the lead t90(precision) - t90(frame) where both settled, with its t-interval, is
    reported beside it, never switched in (issue 44: a test chosen by the data is not the
    family's named test)."""
    floor = (f"floor from replicas ({replicas})" if isinstance(replicas, str) and replicas != "none"
             else "jitter floor from replicas" if replicas is True else "no replicas (floor 0)")
    never = (f"frame never settled in {lead['frame_never_seeds']}, precision in {lead['precision_never_seeds']} "
             f"of {lead['seeds']} seeds")
    d = sign_verdict(family, f"{claim}: seeds where the frame settled first (censored leads by sign)",
                     lead["frame_first_seeds"], lead["precision_first_seeds"], lead["sign_test_p"], f"1/2; {floor}")
    d["number"] += f"; lead where both settled {fmt(lead['lead_steps'], '{:+.0f}')} (t, reported only); {never}"
    return d


def _law_verdict(layer, name: str, words: str, inb: dict, held: dict) -> dict:
    """The held-out excess as the primary statistic, the in-batch one beside it (self-influence
    reference); a study without the held-out check tests the in-batch excess, said in the claim."""
    if name in held:
        h = held[name]
        d = test("primary", f"layer {layer}: {words} on held-out sequences beyond the shuffle null (cosine excess)",
                 h["excess"], f"shuffle null {h['null']:.3f} on the held-out sequences", f="{:+.4f}")
        if name in inb:
            d["number"] += f"; in-batch {fmt(inb[name]['excess'], '{:+.4f}')} (self-influence reference)"
        return d
    return test("primary", f"layer {layer}: {words} in-batch (with the step's self-term) beyond the shuffle null "
                           f"(cosine excess)", inb[name]["excess"], f"shuffle null {inb[name]['null']:.3f}",
                f="{:+.4f}")


def _freeze_verdict(layer, f: dict) -> dict:
    """The freeze as per-seed counts below the threshold with a sign test (summary.freeze_counts)."""
    c = f["freeze"]
    mean = ("every seed at " + f"{c['mean']['mean']:.3g}" if c["at_bound"]
            else fmt(c["mean"], "{:.3f}") + " (arithmetic, clipped to [0, 1])")
    d = sign_verdict("primary", f"layer {layer}: the maps freeze (seeds with under {c['threshold']:g} of their "
                                f"systematic distance to the late map left at step {f['remaining_at']})",
                     c["below"], c["above"] + c["unreadable"], c["sign_test_p"],
                     f"1/2 (sign test); frame settled in {f['frozen_seeds']} of {len(f['per_seed'])} seeds")
    d["number"] += f"; share left {mean}; {c['unreadable']} unreadable (counted against)"
    return d


def profile_verdicts(summary: dict) -> list[dict]:
    """Every verdict of a profile summary (summary.py), adjusted (verdicts.adjust)."""
    out: list[dict] = []
    law, frames = summary.get("law") or {}, summary.get("frames") or {}
    rel, cross, heads = summary.get("relevance") or {}, summary.get("crosslag") or {}, summary.get("heads") or {}
    held_law = summary.get("law_heldout") or {}
    for layer in _layers(law):
        v, h = law[layer], held_law.get(layer) or held_law.get(str(layer)) or {}
        if "cosine" in v:
            out.append(_law_verdict(layer, "cosine", "routing law, the score change aligned with alpha A", v, h))
        if "value_cosine" in v:
            out.append(_law_verdict(layer, "value_cosine", "value law, Delta v aligned with -dL/dv", v, h))
    if law:
        cos = [law[k]["cosine"]["value"] for k in law if "cosine" in law[k]]
        kap = [law[k]["kappa"]["value"] for k in law if "kappa" in law[k]]
        if cos:
            out.append(fixed("primary", "routing law as proportionality, Delta s = eta alpha A (cosine 1, kappa 1)",
                             f"cosine {min(cos):.3f}-{max(cos):.3f}, kappa {min(kap):.3g}-{max(kap):.3g}",
                             "the free-score limit (cosine 1, kappa 1)",
                             "did not hold" if max(cos) < 0.5 else "cannot tell"))
    for layer in _layers(frames):
        f = frames[layer]
        claim = f"layer {layer}: the frame settles before the precision (maps and predictive distributions " \
                f"of the probe batch, one scale)"
        if f.get("lead_one_scale") and f.get("floor") == "through the late window":
            out.append(_order_verdict("primary", claim, f["lead_one_scale"], f["floor"]))
        else:
            old = f["lead"]
            out.append(fixed("primary", claim, f"entropy MAE against the one-interval floor: "
                                               f"{fmt(old['lead_steps'], '{:+.0f}')}, precision first in "
                                               f"{old['precision_first_seeds']} of {old['seeds']} seeds",
                             "not measured: the one-interval floor assumes jitter independent between checkpoints "
                             "(run with --replicas-to-end)", "cannot tell"))
        if "freeze" in f:
            out.append(_freeze_verdict(layer, f))
            dis = f["dissociation"]
            out.append(test("primary", f"layer {layer}: the calibration still improves after the frame settles "
                                       f"(entropy MAE gained after the frame's t90, bits)", dis["gained_after"],
                            f"0; frame settled in {dis['settled_seeds']} of {dis['seeds']} seeds; learning-rate "
                            f"budget left at its t90 {fmt(dis['budget_left'], '{:.3f}')}", f="{:+.4f}"))
    for layer in _layers(rel):  # one member per layer whatever the data: untestable counts as p = 1
        r = rel[layer]
        out.append(test("primary", f"layer {layer}: the advantage points at the relevant key beyond the label "
                                   f"route (relevant share - permuted-label share on the same queries, checks "
                                   f"before attention found the key, head chosen on the other half)",
                        r.get("excess_before_alpha") if r.get("control") else None,
                        f"the same-query permuted-label control's share; {r.get('untestable_seeds', r['seeds'])} of "
                        f"{r['seeds']} seeds with no check in the window"))
    # secondary
    labels = {"sign_alpha": "sign agreement (alpha)", "sign_abs": "sign agreement (|alpha A|)",
              "query_test": "query test", "kappa": "kappa", "own_cosine": "own W_Q/W_K part, cosine",
              "rest_cosine": "rest of the update, cosine", "value_kappa": "value kappa"}
    for layer in _layers(law):
        for key, label in labels.items():
            if key in law[layer]:
                d = law[layer][key]
                out.append(test("secondary", f"layer {layer}: {label} beyond its shuffle null", d["excess"],
                                f"shuffle null {d['null']:.4g}", f="{:+.3g}" if "kappa" in key else "{:+.4f}"))
    selfinf = summary.get("self_influence") or {}
    for layer in _layers(selfinf):
        for key, words in (("cosine", "routing"), ("value_cosine", "value")):
            if key in selfinf[layer]:
                out.append(test("secondary", f"layer {layer}: self-influence of the {words} law (in-batch minus "
                                             f"held-out cosine excess)", selfinf[layer][key]["self_term"], "0",
                                f="{:+.4f}"))
    for layer in _layers(frames):
        f = frames[layer]
        floor = f.get("floor", f.get("replicas"))
        out.append(_order_verdict("secondary", f"layer {layer}: the frame settles before the precision (entropy MAE)",
                                  f["lead"], floor))
        out.append(_order_verdict("secondary", f"layer {layer}: the frame settles before the precision (KL)",
                                  f["lead_kl"], floor))
        out.append(test("secondary", f"layer {layer}: frame first on the learning-rate budget (entropy MAE)",
                        f["lead"]["lead_budget"], "0"))
        if f.get("last_movement_vs_chance"):
            out.append(test("secondary", f"layer {layer}: the maps still move more than chance at the end (movement / "
                                         f"jitter over the last 3 intervals > 1)", f["last_movement_vs_chance"], "1",
                            null=1.0, f="{:.2f}"))
    for layer in _layers(cross):
        for direction, words in (("value_to_routing", "a value update feeds the next routing update"),
                                 ("routing_to_value", "a routing update feeds the next value update")):
            d = cross[layer].get(direction)
            if d:
                out.append(test("secondary", f"layer {layer}: {words} (lagged partial correlation)", d["excess"],
                                f"time-shift null {d['null']:+.3f}"))
    for layer in _layers(rel):
        r = rel[layer]
        out.append(sign_verdict("secondary", f"layer {layer}: the advantage's relevant share reaches 0.5 before "
                                             f"attention's", r["adv_first_seeds"], r["alpha_first_seeds"],
                                r["sign_test_p"], "1/2 (sign test over seeds; censored leads count by sign)"))
        if r.get("control"):
            out.append(test("secondary", f"layer {layer}: relevant share beyond the label route, first tenth",
                            r["excess_over_control_first"], "the permuted-label control's share"))
    for name, d in (heads.get("leads") or {}).items():
        out.append(test("secondary", f"heads: {name} (steps)", d, "0", f="{:+.0f}"))
    return adjust(out)
