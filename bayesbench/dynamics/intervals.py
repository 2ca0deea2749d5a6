"""95% intervals over seeds that respect what a quantity can be.

The seeds are the unit of replication: every function here takes one value per seed (a per-seed
mean over checks, steps or heads first, never the checks themselves, which are correlated
within a seed).

- `t_interval`: Student-t interval of the mean, for unbounded quantities (an excess over a null,
  a lead in steps, a log ratio).
- `bootstrap_interval`: percentile bootstrap of the mean over seeds; the interval lies inside
  [min, max] of the values, so a quantity bounded in [a, b] keeps an interval in [a, b] (an
  entropy ratio, a share, a rate).
- `fisher_z_interval`: a correlation's interval: t-interval of the mean of atanh(r) over seeds,
  mapped back by tanh, so it stays in (-1, 1).
- `ratio_interval`: a ratio's geometric mean over seeds with the t-interval of the mean log ratio.

Each returns {"mean", "ci_low", "ci_high", "n", "method"}; with fewer than 2 finite values the
bounds are NaN (an interval needs two seeds), never a made-up width.
"""

from __future__ import annotations

import math
from typing import Iterable

import torch

LEVEL = 0.95


def _finite(values: Iterable[float]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def _result(mean: float, lo: float, hi: float, n: int, method: str) -> dict:
    return {"mean": mean, "ci_low": lo, "ci_high": hi, "n": n, "method": method}


def _t_quantile(n: int, level: float) -> float:
    from scipy.stats import t

    return float(t.ppf(0.5 + level / 2, n - 1))


def t_interval(values: Iterable[float], level: float = LEVEL) -> dict:
    """Mean over seeds with its Student-t interval (NaN bounds for fewer than 2 values)."""
    v = _finite(values)
    n = len(v)
    if n == 0:
        return _result(math.nan, math.nan, math.nan, 0, "t")
    mean = sum(v) / n
    if n < 2:
        return _result(mean, math.nan, math.nan, n, "t")
    sd = math.sqrt(sum((x - mean) ** 2 for x in v) / (n - 1))
    half = _t_quantile(n, level) * sd / math.sqrt(n)
    return _result(mean, mean - half, mean + half, n, "t")


def bootstrap_interval(values: Iterable[float], level: float = LEVEL, resamples: int = 10_000,
                       seed: int = 0) -> dict:
    """Mean over seeds with a percentile-bootstrap interval (resampling seeds with replacement).

    Every resampled mean is a mean of observed values, so the interval never leaves the range
    of the values: bounded quantities keep bounded intervals."""
    v = _finite(values)
    n = len(v)
    if n == 0:
        return _result(math.nan, math.nan, math.nan, 0, "bootstrap")
    x = torch.tensor(v, dtype=torch.float64)
    mean = float(x.mean())
    if n < 2:
        return _result(mean, math.nan, math.nan, n, "bootstrap")
    gen = torch.Generator().manual_seed(seed)
    means = x[torch.randint(0, n, (resamples, n), generator=gen)].mean(1)
    q = torch.tensor([0.5 - level / 2, 0.5 + level / 2], dtype=torch.float64)
    lo, hi = torch.quantile(means, q).tolist()
    return _result(mean, max(lo, min(v)), min(hi, max(v)), n, "bootstrap")


def _map(f, x: float) -> float:
    return f(x) if math.isfinite(x) else math.nan


def fisher_z_interval(values: Iterable[float], level: float = LEVEL) -> dict:
    """Correlations over seeds: tanh of the mean of atanh(r), with the t-interval of that mean
    mapped back by tanh (inside (-1, 1)). |r| = 1 is clamped to 1 - 1e-12 first."""
    v = [max(-1 + 1e-12, min(1 - 1e-12, r)) for r in _finite(values)]
    z = t_interval([math.atanh(r) for r in v], level)
    if z["n"] == 0:
        return _result(math.nan, math.nan, math.nan, 0, "fisher-z")
    return _result(_map(math.tanh, z["mean"]), _map(math.tanh, z["ci_low"]), _map(math.tanh, z["ci_high"]), z["n"],
                   "fisher-z")


def ratio_interval(ratios: Iterable[float], level: float = LEVEL) -> dict:
    """Positive ratios over seeds: geometric mean and exp of the t-interval of the mean log."""
    v = [r for r in _finite(ratios) if r > 0]
    z = t_interval([math.log(r) for r in v], level)
    if z["n"] == 0:
        return _result(math.nan, math.nan, math.nan, 0, "log-t")
    return _result(_map(math.exp, z["mean"]), _map(math.exp, z["ci_low"]), _map(math.exp, z["ci_high"]), z["n"],
                   "log-t")


def fmt(d: dict, f: str = "{:.3f}") -> str:
    """'mean [low, high]' of an interval dict ('n/a' for a NaN mean, no bounds for n < 2)."""
    if d is None or not math.isfinite(d.get("mean", math.nan)):
        return "n/a"
    if not (math.isfinite(d["ci_low"]) and math.isfinite(d["ci_high"])):
        return f.format(d["mean"])
    return f"{f.format(d['mean'])} [{f.format(d['ci_low'])}, {f.format(d['ci_high'])}]"
