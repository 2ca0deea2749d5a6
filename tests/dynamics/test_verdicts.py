"""Verdicts as families (bayesbench/dynamics/verdicts.py): Holm within each family decides
"held / did not hold / cannot tell", never the raw p-value (issue 32: the verdicts that rested on
p = 0.016-0.037 beside a hundred other intervals)."""

from __future__ import annotations

import math

import pytest

from bayesbench.dynamics.verdicts import adjust, fixed, sign_verdict
from bayesbench.dynamics.verdicts import test as verdict  # not "test": pytest would collect it


def _interval(mean: float, p: float, n: int = 8) -> dict:
    return {"mean": mean, "ci_low": mean - 1, "ci_high": mean + 1, "n": n, "p": p}


def test_holm_within_each_family_decides_the_verdict():
    verdicts = adjust([
        verdict("primary", "a", _interval(+0.5, 0.001), "0"),            # 0.001 x 3 = 0.003: held
        verdict("primary", "b", _interval(-0.5, 0.02), "0"),             # 0.02 x 2 = 0.04: did not hold (other side)
        verdict("primary", "c", _interval(+0.5, 0.03), "0"),             # 0.03 x 1 = 0.03: held
        verdict("secondary", "d", _interval(+0.2, 0.016), "0"),          # alone 0.016, x 4 = 0.064: cannot tell
        verdict("secondary", "e", _interval(+0.2, 0.3), "0"),
        verdict("secondary", "f", _interval(+0.2, 0.5), "0"),
        verdict("secondary", "g", _interval(-0.2, 0.037), "0", side=-1),  # x 3 = 0.111: cannot tell
        fixed("primary", "h", "0.05", "no test", "not tested"),
    ])
    by = {v["claim"]: v for v in verdicts}
    assert [by[c]["verdict"] for c in "abcdefgh"] == ["held", "did not hold", "held", "cannot tell", "cannot tell",
                                                      "cannot tell", "cannot tell", "not tested"]
    assert by["a"]["p_adj"] == pytest.approx(0.003) and by["b"]["p_adj"] == pytest.approx(0.04)
    assert by["d"]["p_adj"] == pytest.approx(0.064) and by["g"]["p_adj"] == pytest.approx(0.111)
    assert by["a"]["adjustment"] == "Holm over the 3 primary tests"
    assert by["d"]["adjustment"] == "Holm over the 4 secondary tests"
    assert math.isnan(by["h"]["p_adj"]) and by["h"]["adjustment"] == "no test"


def test_a_verdict_without_a_p_value_cannot_tell_and_the_sign_test_counts_seeds():
    verdicts = adjust([verdict("primary", "no interval", {"mean": 0.3, "n": 1, "p": math.nan}, "0"),
                       sign_verdict("primary", "order", wins=8, losses=0, p=0.0078, control="sign test")])
    assert verdicts[0]["verdict"] == "cannot tell" and verdicts[0]["p_adj"] == 1.0
    # the untestable member still counts (as p = 1): 2 x 0.0078
    assert verdicts[1]["verdict"] == "held" and verdicts[1]["p_adj"] == pytest.approx(0.0156)
    assert verdicts[1]["adjustment"] == "Holm over the 2 primary tests (1 untestable, counted as p = 1)"
    with pytest.raises(ValueError, match="family"):
        verdict("tertiary", "x", _interval(1, 0.01), "0")


def test_a_familys_size_does_not_depend_on_the_data():
    """Issue 44: `adjust` dropped NaN p-values, so a member the data left untestable made the
    family smaller and the others' adjusted p smaller. Now the same named family gives the same
    adjustment whether or not a member could be tested."""
    def family(p_b: float) -> list[dict]:
        return adjust([verdict("primary", "a", _interval(+0.5, 0.02), "0"),
                       verdict("primary", "b", _interval(+0.5, p_b), "0"),
                       verdict("primary", "c", _interval(+0.5, 0.9), "0")])

    tested, untestable = family(1.0), family(math.nan)
    assert [v["p_adj"] for v in tested] == [v["p_adj"] for v in untestable] == [pytest.approx(0.06), 1.0, 1.0]
    assert [v["verdict"] for v in untestable] == ["cannot tell"] * 3  # 0.02 alone would have been "held"
    assert untestable[0]["adjustment"].startswith("Holm over the 3 primary tests")


def test_the_table_says_its_intervals_are_unadjusted():
    from bayesbench.dynamics.verdicts import verdict_table

    table = verdict_table(adjust([verdict("primary", "a", _interval(+0.5, 0.001), "0")]), "primary")
    assert "unadjusted" in table.splitlines()[0] and "p (Holm)" in table.splitlines()[0]


def test_the_order_test_is_the_sign_test_whatever_the_data():
    """The primary order test of a profile (frame before precision) is the sign test over seeds
    both when every seed settled and when some did not: never switched by the data."""
    from bayesbench.dynamics.profile.verdicts import _order_verdict

    lead = {"frame_never_seeds": 0, "precision_never_seeds": 0, "seeds": 8, "frame_first_seeds": 7,
            "precision_first_seeds": 1, "sign_test_p": 0.07, "lead_steps": _interval(+40.0, 0.001)}
    all_settled = _order_verdict("primary", "x", lead, True)
    censored = _order_verdict("primary", "x", dict(lead, frame_never_seeds=3), True)
    for d in (all_settled, censored):
        assert d["p"] == 0.07 and "sign test" in d["number"] and "(t, reported only)" in d["number"]
