"""Verdicts as families: each claim a study tests, its number and control, adjusted for multiplicity.

A study names its *primary* verdicts before it measures (docs/dynamics.md, geometry.md,
em_vs_sgd.md say which); everything else it tests is *secondary*. Each family gets Holm's
step-down adjustment (bayesbench.stats.holm) of its p-values, so a verdict says "held" only when
its adjusted p is below 0.05 and the estimate lies on the claimed side of its control:

    held          adjusted p < 0.05, on the claimed side
    did not hold  adjusted p < 0.05, on the other side (or, for a claim with no test, what the
                  number shows, said in `control`)
    cannot tell   adjusted p >= 0.05 (or no interval: fewer than 2 seeds)
    not tested    the study did not measure it

A family's size does not depend on the data: a member with no p-value (a statistic the run could
not compute) enters Holm's adjustment as p = 1, so it still counts against the others, and reads
"cannot tell". The intervals printed beside the verdicts are each 95% on its own (unadjusted);
`verdict_table` says so in its header, and gives beside each the Holm-adjusted p.

A verdict is a dict: family, claim, number (the statistic with its interval), control (what it
is compared with), p, p_adj, adjustment (which family, how many tests), verdict.
"""

from __future__ import annotations

import math

from ..stats import holm

ALPHA = 0.05
FAMILIES = ("primary", "secondary")


def fmt(d: dict | None, f: str = "{:.3f}") -> str:
    """'mean [low, high]' of an interval dict ('n/a' for a NaN mean, no bounds without them)."""
    if d is None or not math.isfinite(d.get("mean", math.nan)):
        return "n/a"
    if not (math.isfinite(d.get("ci_low", math.nan)) and math.isfinite(d.get("ci_high", math.nan))):
        return f.format(d["mean"])
    return f"{f.format(d['mean'])} [{f.format(d['ci_low'])}, {f.format(d['ci_high'])}]"


def test(family: str, claim: str, interval: dict | None, control: str, *, side: int = 1, null: float = 0.0,
         f: str = "{:+.3f}", number: str | None = None) -> dict:
    """A verdict from an interval dict with its p-value (bayesbench.stats): the claim is that the
    estimate lies above `null` (side +1) or below it (side -1)."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    interval = interval or {}
    mean = interval.get("mean", math.nan)
    return {"family": family, "claim": claim, "number": number or fmt(interval, f), "control": control,
            "p": interval.get("p", math.nan), "side": side,
            "estimate_side": (1 if mean > null else -1 if mean < null else 0) if math.isfinite(mean) else 0,
            "n": interval.get("n", 0)}


def fixed(family: str, claim: str, number: str, control: str, verdict: str) -> dict:
    """A verdict with no test to adjust (e.g. 'not tested', or a claim its size already decides)."""
    return {"family": family, "claim": claim, "number": number, "control": control, "p": math.nan,
            "verdict": verdict, "fixed": True, "n": 0}


def sign_verdict(family: str, claim: str, wins: int, losses: int, p: float, control: str) -> dict:
    """A verdict from a sign test over seeds: `wins` seeds on the claimed side, `losses` on the other."""
    return {"family": family, "claim": claim, "number": f"{wins}/{wins + losses} seeds (sign test p = {p:.2g})",
            "control": control, "p": p, "side": 1, "estimate_side": 1 if wins > losses else -1 if losses > wins else 0,
            "n": wins + losses}


def adjust(verdicts: list[dict]) -> list[dict]:
    """Holm within each family; fills p_adj, adjustment and verdict (module docstring). Returns
    the same list."""
    for family in FAMILIES:
        members = [v for v in verdicts if v["family"] == family and not v.get("fixed")]
        # an untestable member counts as p = 1: the family's size is fixed before the data
        adjusted = holm([v["p"] if math.isfinite(v["p"]) else 1.0 for v in members])
        m = len(members)
        untestable = sum(1 for v in members if not math.isfinite(v["p"]))
        for v, p_adj in zip(members, adjusted):
            v["p_adj"] = p_adj
            v["adjustment"] = f"Holm over the {m} {family} tests" + (
                f" ({untestable} untestable, counted as p = 1)" if untestable else "")
            if not math.isfinite(v["p"]):
                v["verdict"] = "cannot tell"
            elif p_adj >= ALPHA or v["estimate_side"] == 0:
                v["verdict"] = "cannot tell"
            else:
                v["verdict"] = "held" if v["estimate_side"] == v["side"] else "did not hold"
    for v in verdicts:
        if v.get("fixed"):
            v.setdefault("p_adj", math.nan)
            v.setdefault("adjustment", "no test")
    return verdicts


def verdict_table(verdicts: list[dict], family: str) -> str:
    """A Markdown table of one family's verdicts."""
    rows = ["| claim | measured [95% CI over seeds, unadjusted] | control | p | p (Holm) | verdict |",
            "|---|---|---|---|---|---|"]
    for v in verdicts:
        if v["family"] != family:
            continue
        p = "-" if not math.isfinite(v.get("p", math.nan)) else f"{v['p']:.2g}"
        pa = "-" if not math.isfinite(v.get("p_adj", math.nan)) else f"{v['p_adj']:.2g}"
        rows.append(f"| {v['claim']} | {v['number']} | {v.get('control', '')} | {p} | {pa} | **{v['verdict']}** |")
    return "\n".join(rows)
