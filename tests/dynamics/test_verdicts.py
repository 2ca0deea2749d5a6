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
    assert verdicts[0]["verdict"] == "cannot tell"
    assert verdicts[1]["verdict"] == "held" and verdicts[1]["p_adj"] == pytest.approx(0.0078)
    with pytest.raises(ValueError, match="family"):
        verdict("tertiary", "x", _interval(1, 0.01), "0")
