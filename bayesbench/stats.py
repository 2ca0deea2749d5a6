"""Statistics over independent units (seeds): intervals that cover, tests, multiplicity, first reach.

The one home of these in the package (the leaderboard, `compare`, the learning-curve statistics
and the dynamics studies all call them). Bottom layer: plain Python, numpy and scipy only,
imported inside the functions that need them; nothing here imports torch, scipy.stats at module
level or the rest of bayesbench (the leaderboard reads a store without either).

Intervals take one value per independent unit (a per-seed mean first, never the steps or checks
within a seed, which are correlated) and return a dict

    {"mean", "ci_low", "ci_high", "n", "method", "p"}

`mean` is the point estimate on the original scale (for a transformed interval, the
back-transformed mean of the transformed values: the geometric mean on the log scale); `p` is
the two-sided p-value of the test of `null` on the interval's scale (NaN when no null is given).
With fewer than 2 finite values the bounds are NaN (an interval needs two units), never a
made-up width.

- `t_interval`: Student-t interval of the mean, for unbounded quantities (an excess over a
  null, a lead in steps, a difference).
- `log_interval` (alias `ratio_interval`): positive quantities (ratios, steps, errors): the
  t-interval of the mean log, mapped back by exp; it covers the geometric mean.
- `logit_interval`: quantities bounded in [low, high] (shares, entropy ratios, |cos|): the
  t-interval of the mean logit, mapped back; it stays inside the range.
- `fisher_z_interval`: correlations: the t-interval of the mean atanh(r), mapped back by tanh.
- `bca_interval`: a bias-corrected and accelerated bootstrap (`scipy.stats.bootstrap`) for a
  statistic that is not a mean of per-unit values (a speed-up whose threshold pools the units).

Coverage (tests/test_stats.py simulates it): the t-interval covers the mean of normal data at
95% for any n; the log (logit) interval covers the geometric mean (logit-mean) of lognormal
(logit-normal) data at 95%; a percentile bootstrap of the mean covers only about 78% at n = 4
and 90% at n = 8, and is not offered.

Tests and multiplicity: `t_test_p`, `sign_test`, `holm`, `benjamini_hochberg`. Shuffle nulls:
`within_group_permutation`, `within_group_correlation`. First reach of a curve: `first_reaching`
(the first step at which the curve is at or past a threshold) and `stays_from` (the first step
from which it stays there to its end), with `interpolated_reach` for a crossing between two
measured steps. Values along a curve measured at log-spaced steps: `value_at` (linear in
log(step) between points) and `log_auc` (the curve's mean over log(step)).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

LEVEL = 0.95
SCALES = ("identity", "log", "logit", "fisher-z")
# a bounded value exactly at a bound is moved this share of the range inside before its logit
BOUND_EPS = 1e-3


def finite(values: Iterable) -> list[float]:
    """The finite values of `values` as floats (None, NaN and inf dropped)."""
    out = []
    for v in values:
        if v is None:
            continue
        x = float(v)
        if math.isfinite(x):
            out.append(x)
    return out


def t_quantile(df: int, level: float = LEVEL) -> float:
    """The two-sided `level` quantile of Student's t with `df` degrees of freedom (scipy.special,
    not scipy.stats: the leaderboard avoids the latter's import time)."""
    from scipy.special import stdtrit

    return float(stdtrit(df, 0.5 + level / 2))


def t_test_p(t: float, df: int) -> float:
    """Two-sided p-value of a t statistic with `df` degrees of freedom."""
    from scipy.special import stdtr

    if not math.isfinite(t):
        return 0.0 if math.isinf(t) else math.nan
    return float(2 * stdtr(df, -abs(t)))


def _result(mean: float, lo: float, hi: float, n: int, method: str, p: float = math.nan) -> dict:
    return {"mean": mean, "ci_low": lo, "ci_high": hi, "n": n, "method": method, "p": p}


def _mean_sd(v: list[float]) -> tuple[float, float]:
    n = len(v)
    mean = sum(v) / n
    return mean, math.sqrt(sum((x - mean) ** 2 for x in v) / (n - 1))


def t_interval(values: Iterable, level: float = LEVEL, null: float | None = None) -> dict:
    """Mean with its Student-t interval; `p` tests mean = `null` (NaN bounds for fewer than 2 values)."""
    v = finite(values)
    n = len(v)
    if n == 0:
        return _result(math.nan, math.nan, math.nan, 0, "t")
    if n < 2:
        return _result(v[0], math.nan, math.nan, 1, "t")
    mean, sd = _mean_sd(v)
    se = sd / math.sqrt(n)
    half = t_quantile(n - 1, level) * se
    p = math.nan
    if null is not None:
        p = t_test_p((mean - null) / se, n - 1) if se > 0 else (1.0 if mean == null else 0.0)
    return _result(mean, mean - half, mean + half, n, "t", p)


def _forward(scale: str, low: float, high: float):
    if scale == "identity":
        return lambda x: x
    if scale == "log":
        return lambda x: math.log(x) if x > 0 else math.nan
    if scale == "logit":
        eps = BOUND_EPS * (high - low)

        def logit(x: float) -> float:
            if not low <= x <= high:
                return math.nan
            u = (min(max(x, low + eps), high - eps) - low) / (high - low)
            return math.log(u / (1 - u))
        return logit
    if scale == "fisher-z":
        return lambda x: math.atanh(min(max(x, -1 + 1e-12), 1 - 1e-12)) if -1 <= x <= 1 else math.nan
    raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")


def _backward(scale: str, low: float, high: float):
    if scale == "identity":
        return lambda z: z
    if scale == "log":
        return math.exp
    if scale == "logit":
        return lambda z: low + (high - low) / (1 + math.exp(-z))
    return math.tanh


def transformed_t_interval(values: Iterable, scale: str, level: float = LEVEL, *, low: float = 0.0,
                           high: float = 1.0, null: float | None = None) -> dict:
    """The t-interval of the mean of f(values), mapped back by f^-1 (so it stays in f's range):
    f = log (positive values; a non-positive one is dropped), logit on [low, high] (a value at a
    bound moved BOUND_EPS of the range inside; one outside dropped) or Fisher z (atanh). `p`
    tests mean f = f(null)."""
    if scale == "logit" and not high > low:
        raise ValueError(f"logit needs low < high, got [{low}, {high}]")
    f, g = _forward(scale, low, high), _backward(scale, low, high)
    z = t_interval([f(x) for x in finite(values)], level, None if null is None else f(null))
    method = {"identity": "t", "log": "log-t", "logit": "logit-t", "fisher-z": "fisher-z"}[scale]

    def back(x: float) -> float:
        return g(x) if math.isfinite(x) else math.nan

    return _result(back(z["mean"]), back(z["ci_low"]), back(z["ci_high"]), z["n"], method, z["p"])


def log_interval(values: Iterable, level: float = LEVEL, null: float | None = None) -> dict:
    """Positive values: geometric mean with the exp of the t-interval of the mean log."""
    return transformed_t_interval(values, "log", level, null=null)


ratio_interval = log_interval  # a ratio over units is a positive quantity: its interval is the log-t one


def logit_interval(values: Iterable, level: float = LEVEL, *, low: float = 0.0, high: float = 1.0,
                   null: float | None = None) -> dict:
    """Values bounded in [low, high]: the logit-t interval, inside (low, high)."""
    return transformed_t_interval(values, "logit", level, low=low, high=high, null=null)


def fisher_z_interval(values: Iterable, level: float = LEVEL, null: float | None = None) -> dict:
    """Correlations: tanh of the mean atanh(r) with the mapped-back t-interval, inside (-1, 1)."""
    return transformed_t_interval(values, "fisher-z", level, null=null)


def bca_interval(data: Sequence, statistic, level: float = LEVEL, resamples: int = 9999, seed: int = 0) -> dict:
    """A BCa bootstrap interval of `statistic(units)` over the units of `data` (resampled with
    replacement as whole units; `statistic` takes an index array into the units and returns a
    number), via `scipy.stats.bootstrap`. The mean is the statistic on all units. NaN bounds for
    fewer than 2 units, or when every resample gives the same value (BCa is undefined there)."""
    import numpy as np
    from scipy.stats import bootstrap

    n = len(data)
    idx = np.arange(n)
    est = float(statistic(idx))
    if n < 2:
        return _result(est, math.nan, math.nan, n, "bca")

    def stat(i, axis=-1):
        i = np.asarray(i).astype(int)
        if i.ndim == 1:
            return statistic(i)
        return np.apply_along_axis(statistic, axis, i)

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = bootstrap((idx,), stat, confidence_level=level, n_resamples=resamples, method="BCa",
                        random_state=np.random.default_rng(seed), vectorized=True)
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return _result(est, lo, hi, n, "bca")


# -------------------------------------------------------------------- tests and multiplicity

def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact binomial (sign) test of `wins` against `losses` at p = 1/2 (ties left out
    by the caller); 1.0 with nothing to test."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error), in the input order. NaN p-values
    stay NaN and do not count towards the family's size."""
    idx = [i for i, p in enumerate(pvalues) if p is not None and math.isfinite(p)]
    m = len(idx)
    out = [math.nan] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: pvalues[i])):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def benjamini_hochberg(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (false discovery rate), in the input order; NaN stays NaN."""
    idx = [i for i, p in enumerate(pvalues) if p is not None and math.isfinite(p)]
    m = len(idx)
    out = [math.nan] * len(pvalues)
    running = 1.0
    for rank, i in reversed(list(enumerate(sorted(idx, key=lambda i: pvalues[i]), start=1))):
        running = min(running, m * pvalues[i] / rank)
        out[i] = min(1.0, running)
    return out


# -------------------------------------------------------------------- shuffle nulls

def within_group_permutation(values: Sequence, groups: Sequence, seed: int = 0) -> list:
    """`values` permuted among the items of each group only (a null that keeps what the groups
    carry, e.g. position, and breaks everything else)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    v = np.asarray(values)
    g = np.asarray(groups)
    out = v.copy()
    for key in np.unique(g):
        where = np.flatnonzero(g == key)
        out[where] = v[rng.permutation(where)]
    return out.tolist()


def within_group_correlation(x: Sequence[float], y: Sequence[float], groups: Sequence, *, ranks: bool = True) -> float:
    """The correlation of x and y within groups: Pearson's r of their residuals after each
    group's mean is removed (the partial correlation given the group as a categorical variable;
    on ranks first with `ranks`, Spearman-style). NaN when either has no variation within groups."""
    import numpy as np

    xs, ys, g = np.asarray(x, dtype=float), np.asarray(y, dtype=float), np.asarray(groups)
    if ranks:
        xs, ys = _ranks(xs), _ranks(ys)
    rx, ry = xs.copy(), ys.copy()
    for key in np.unique(g):
        m = g == key
        rx[m] -= xs[m].mean()
        ry[m] -= ys[m].mean()
    sx, sy = math.sqrt(float((rx * rx).sum())), math.sqrt(float((ry * ry).sum()))
    scale = max(float(np.abs(xs).max(initial=0)), 1.0) * max(float(np.abs(ys).max(initial=0)), 1.0)
    if sx * sy <= 1e-12 * scale * len(xs):
        return math.nan
    return float((rx * ry).sum() / (sx * sy))


def _ranks(a):
    """Average ranks (ties share the mean of their ranks), as Spearman's correlation uses them."""
    import numpy as np

    order = np.argsort(a, kind="mergesort")
    ranks = np.empty(len(a), dtype=float)
    sorted_a = a[order]
    i = 0
    while i < len(a):
        j = i
        while j + 1 < len(a) and sorted_a[j + 1] == sorted_a[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2
        i = j + 1
    return ranks


# -------------------------------------------------------------------- first reach of a curve

def _at(v: float, threshold: float, rising: bool) -> bool:
    return v >= threshold if rising else v <= threshold  # NaN is never at it


def first_reaching(steps: Sequence, values: Sequence[float], threshold: float, *, rising: bool = False):
    """The first step whose value is at or below `threshold` (at or above with `rising`), or
    None: a curve that dips there once has reached it, whatever it does next. NaN never reaches."""
    for s, v in zip(steps, values):
        if _at(v, threshold, rising):
            return s
    return None


def stays_from(steps: Sequence, values: Sequence[float], threshold: float, *, rising: bool = False):
    """The first step from which every later value is at or below `threshold` (at or above with
    `rising`), or None (the last value is not there, or is NaN): a noisy curve that dips and
    comes back has not reached it."""
    first = None
    for s, v in zip(reversed(steps), reversed(values)):
        if not _at(v, threshold, rising):
            break
        first = s
    return first


def interpolated_reach(x: Sequence[float], values: Sequence[float], threshold: float, at) -> float | None:
    """Where the curve crosses `threshold` between the point before `at` (an element of x, as
    `first_reaching` or `stays_from` returned it) and `at`, linearly interpolated; `at` itself
    when it is the first point or the crossing is not bracketed; None for None."""
    if at is None:
        return None
    k = list(x).index(at)
    if k == 0:
        return float(x[0])
    v0, v1 = values[k - 1], values[k]
    if not (math.isfinite(v0) and math.isfinite(v1)) or v1 == v0:
        return float(x[k])
    w = (threshold - v0) / (v1 - v0)
    if not 0.0 <= w <= 1.0:
        return float(x[k])
    return float(x[k - 1] + w * (x[k] - x[k - 1]))


def value_at(steps: Sequence[int], values: Sequence[float], s: float) -> float:
    """The curve's value at step s (steps[0] <= s <= steps[-1]), linear in log(step) between points."""
    for i in range(1, len(steps)):
        if s <= steps[i]:
            a, b = math.log(steps[i - 1]), math.log(steps[i])
            w = 0.0 if b == a else (math.log(s) - a) / (b - a)
            return values[i - 1] + w * (values[i] - values[i - 1])
    return values[-1]


def log_auc(steps: Sequence[int], values: Sequence[float], lo: int, hi: int) -> float:
    """Mean of the curve over log(step) on [lo, hi] (trapezoids in log step; NaN if a value is,
    or if [lo, hi] is empty or not inside the measured steps): a score that rewards getting
    there early, not only the value at the last step."""
    if not steps or lo < steps[0] or hi > steps[-1] or hi <= lo:
        return math.nan
    xs = [lo] + [s for s in steps if lo < s < hi] + [hi]
    ys = [value_at(steps, values, s) for s in xs]
    area = sum((math.log(b) - math.log(a)) * (u + v) / 2 for a, b, u, v in zip(xs, xs[1:], ys, ys[1:]))
    return area / (math.log(hi) - math.log(lo))


def running_mean(values: Sequence[float], window: int) -> list[float]:
    """Centred running mean over `window` points (fewer at the ends), NaNs left out (NaN where
    a window has no finite value)."""
    out = []
    for k in range(len(values)):
        lo, hi = max(0, k - window // 2), min(len(values), k + window // 2 + 1)
        v = finite(values[lo:hi])
        out.append(sum(v) / len(v) if v else math.nan)
    return out
