"""Do the routing and value updates feed each other? A cross-lagged analysis with a null.

Paper II (arXiv 2512.22473) reads attention training as EM: the routing (E-step) and the values
(M-step) update in turn, each move preparing the other's. Measured at the law checks, per
(seed, layer, head), on the sizes of the two updates of each checked step: R_t = log ||Delta s^c||
(`law_ds_norm`) and V_t = log ||Delta v|| (`value_dv_norm`), each divided by the step's learning
rate first (an update is proportional to it, and a cosine or step schedule moves both sizes
together in a way no smooth trend follows). Both still fall as training goes on, a common trend
that would correlate anything with anything, so every statistic controls for a cubic trend in
time (differencing would not do: it makes a one-way feed look like a feed back as well):

    value_to_routing   partial correlation of V_t with R_(t+1) given R_t and 1, t, t^2, t^3 (a
                       Granger-style lag): a value update larger than usual is followed by a
                       larger routing update than R's own past and the trend predict
    routing_to_value   partial correlation of R_t with V_(t+1) given V_t and the trend

The null of each is the same statistic with one series shifted in time against the other by
every circular offset k with 2 <= k <= n - 2 (each series keeps its own autocorrelation; only
their alignment in time is broken), averaged. Per seed the heads' correlations are averaged on
the Fisher z scale; the excess z - z_null gets a t-interval over seeds and a t-test against 0,
and is reported mapped back by tanh.
"""

from __future__ import annotations

import math
from collections import defaultdict

from ...stats import t_interval

MIN_CHECKS = 10  # fewer checked steps per seed leave too few degrees of freedom for a lagged partial correlation
DIRECTIONS = ("value_to_routing", "routing_to_value")


def partial_corr(x: list[float], y: list[float], *controls: list[float]) -> float:
    """Pearson correlation of x and y after the least-squares fit on an intercept and the
    `controls` is taken out of each (NaN when either residual has no variation)."""
    import numpy as np

    z = np.column_stack([np.ones(len(x)), *[np.asarray(c, dtype=float) for c in controls]])

    def resid(a: list[float]):
        v = np.asarray(a, dtype=float)
        return v - z @ np.linalg.lstsq(z, v, rcond=None)[0]

    rx, ry = resid(x), resid(y)
    sx, sy = float(np.sqrt(rx @ rx)), float(np.sqrt(ry @ ry))
    if sx <= 1e-12 * (1 + float(np.abs(x).max())) or sy <= 1e-12 * (1 + float(np.abs(y).max())):
        return math.nan
    return float(rx @ ry / (sx * sy))


def lagged(cause: list[float], effect: list[float]) -> float:
    """Partial correlation of `cause` at t with `effect` at t + 1, given `effect` at t and a cubic
    trend in t."""
    n = len(cause) - 1
    t = [2 * k / n - 1 for k in range(n)]
    return partial_corr(cause[:-1], effect[1:], effect[:-1], t, [v * v for v in t], [v ** 3 for v in t])


def _z(r: float) -> float:
    return math.atanh(max(-1 + 1e-12, min(1 - 1e-12, r))) if math.isfinite(r) else math.nan


def lagged_with_null(cause: list[float], effect: list[float]) -> tuple[float, float]:
    """(z of the lagged partial correlation, mean z over the time-shift null)."""
    n = len(cause)
    real = _z(lagged(cause, effect))
    nulls = [_z(lagged(cause[k:] + cause[:k], effect)) for k in range(2, n - 1)]
    nulls = [v for v in nulls if math.isfinite(v)]
    return real, (sum(nulls) / len(nulls) if nulls else math.nan)


def crosslag_summary(records, lr_at=None) -> dict:
    """Per layer and direction: the mean over seeds of the lagged partial correlation and of its
    null (tanh of the mean z), and the excess z - z_null with its interval and test over seeds.
    `lr_at(step)`: the learning rate each size is divided by (None: not divided). Empty when the
    study has no value-law records."""
    series: dict = defaultdict(lambda: defaultdict(dict))  # (layer, seed, head) -> name -> step -> value
    for r in records:
        if r.name in ("law_ds_norm", "value_dv_norm") and r.value is not None and r.value > 0:
            lr = lr_at(r.step) if lr_at is not None else 1.0
            if lr > 0:
                series[(r.layer, r.seed, r.head)][r.name][r.step] = math.log(r.value / lr)
    out: dict = {}
    for layer in sorted({k[0] for k in series}):
        per_seed: dict = defaultdict(lambda: defaultdict(list))
        for (lay, seed, _head), s in series.items():
            if lay != layer:
                continue
            steps = sorted(set(s.get("law_ds_norm", {})) & set(s.get("value_dv_norm", {})))
            if len(steps) < MIN_CHECKS:
                continue
            R = [s["law_ds_norm"][t] for t in steps]
            V = [s["value_dv_norm"][t] for t in steps]
            for direction, (cause, effect) in zip(DIRECTIONS, ((V, R), (R, V))):
                per_seed[seed][direction].append(lagged_with_null(cause, effect))
        row: dict[str, object] = {"seeds": len(per_seed)}
        for direction in DIRECTIONS:
            real, null = [], []
            for by_dir in per_seed.values():
                pairs = [p for p in by_dir[direction] if math.isfinite(p[0]) and math.isfinite(p[1])]
                if pairs:
                    real.append(sum(p[0] for p in pairs) / len(pairs))
                    null.append(sum(p[1] for p in pairs) / len(pairs))
            excess = t_interval([a - b for a, b in zip(real, null)], null=0.0)
            row[direction] = {"value": math.tanh(sum(real) / len(real)) if real else math.nan,
                              "null": math.tanh(sum(null) / len(null)) if null else math.nan,
                              "excess_z": excess,
                              "excess": {**excess, **{k: math.tanh(excess[k]) if math.isfinite(excess[k]) else math.nan
                                                      for k in ("mean", "ci_low", "ci_high")}, "method": "t on z"}}
        out[layer] = row
    return out
