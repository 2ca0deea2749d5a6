"""A profile study's verdicts: the primary ones named in advance, the rest as a family.

Primary (docs/dynamics.md names them before the numbers), per attention layer:

- routing law, alignment: the row-centred score change points along alpha A more than its
  shuffle null (cosine excess > 0);
- value law, alignment: the value change points along -dL/dv more than its shuffle null;
- frame first: t90(precision, entropy MAE) - t90(frame) > 0, against the jitter floor;
- the maps freeze: at the last checkpoint before the late ones, less than 10% of the maps'
  systematic distance to the late map is left (the t90's tolerance; the jitter taken out);
- (bijection with repeated keys) the advantage points at the relevant key beyond the label
  route: its relevant-key share minus the permuted-label control's share on the same queries
  > 0, in the checks before attention found the key (relevance.py `relevance_summary`).

Also primary, with no test: the routing law as proportionality, Delta s = eta alpha A (Paper II,
section 4), which the measured cosine (a few hundredths) and kappa decide on their own.

Secondary, as one family: the other law statistics' excesses, the lead under the KL and on the
learning-rate budget, the cross-lagged feeds, the relevance sign test and first-tenth excess,
the per-head leads.
"""

from __future__ import annotations

from ..verdicts import adjust, fixed, fmt, sign_verdict, test


def _layers(d: dict) -> list:
    return sorted(d, key=lambda k: int(k))


def _order_verdict(family: str, claim: str, lead: dict, replicas: bool) -> dict:
    """Which settles first, as one statistic fixed in advance: the sign test over the seeds where
    at least one of the two settled (a censored seed counting by its known sign), whatever the
    data; the lead t90(precision) - t90(frame) where both settled, with its t-interval, is
    reported beside it, never switched in (issue 44: a test chosen by the data is not the
    family's named test)."""
    floor = "jitter floor from replicas" if replicas else "no replicas (floor 0)"
    never = (f"frame never settled in {lead['frame_never_seeds']}, precision in {lead['precision_never_seeds']} "
             f"of {lead['seeds']} seeds")
    d = sign_verdict(family, f"{claim}: seeds where the frame settled first (censored leads by sign)",
                     lead["frame_first_seeds"], lead["precision_first_seeds"], lead["sign_test_p"], f"1/2; {floor}")
    d["number"] += f"; lead where both settled {fmt(lead['lead_steps'], '{:+.0f}')} (t, reported only); {never}"
    return d


def profile_verdicts(summary: dict) -> list[dict]:
    """Every verdict of a profile summary (summary.py), adjusted (verdicts.adjust)."""
    out: list[dict] = []
    law, frames = summary.get("law") or {}, summary.get("frames") or {}
    rel, cross, heads = summary.get("relevance") or {}, summary.get("crosslag") or {}, summary.get("heads") or {}
    for layer in _layers(law):
        v = law[layer]
        if "cosine" in v:
            out.append(test("primary", f"layer {layer}: routing law, the score change aligned with alpha A beyond "
                                       f"its shuffle null (cosine excess)", v["cosine"]["excess"],
                            f"shuffle null {v['cosine']['null']:.3f}", f="{:+.4f}"))
        if "value_cosine" in v:
            out.append(test("primary", f"layer {layer}: value law, Delta v aligned with -dL/dv beyond its shuffle "
                                       f"null (cosine excess)", v["value_cosine"]["excess"],
                            f"shuffle null {v['value_cosine']['null']:.3f}", f="{:+.4f}"))
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
        out.append(_order_verdict("primary", f"layer {layer}: the frame settles before the precision (entropy MAE)",
                                  f["lead"], f.get("replicas")))
        out.append(test("primary", f"layer {layer}: the maps freeze (the share of their systematic distance to the "
                                   f"late map still to go at step {f['remaining_at']}, below {f['freeze_left']:g})",
                        f["remaining"], f"{f['freeze_left']:g} (the t90's tolerance); frame settled in "
                                        f"{f['frozen_seeds']} of {len(f['per_seed'])} seeds",
                        side=-1, null=f["freeze_left"], f="{:.3f}"))
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
    for layer in _layers(frames):
        f = frames[layer]
        out.append(_order_verdict("secondary", f"layer {layer}: the frame settles before the precision (KL)",
                                  f["lead_kl"], f.get("replicas")))
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
