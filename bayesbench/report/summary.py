"""Helpers of the summaries the docs quote (docs/data/*.json, written by the scripts of
`scripts/`: continuous_answer.py, discrete_answer.py, zoo_answer.py): the interval over seeds of a
quantity that cannot be negative, floats kept to 8 significant digits so a summary stays small (the
tables show at most 4 decimals; tests/test_docs_dynamics_numbers.py caps a data file at 200 kB), and
Spearman's rho over summarised points with its permutation p-value."""

from __future__ import annotations

import math

from .rows import seed_interval


def seed_ci(values: list[float], nonnegative: bool = True) -> list[float]:
    """[low, high] of the 95% t-interval of the mean over seeds, the low end clipped at 0 where
    the quantity cannot be negative (NaN with fewer than two finite values)."""
    lo, hi = seed_interval(values)
    return [max(lo, 0.0) if nonnegative and math.isfinite(lo) else lo, hi]


def rounded(x):
    """`x` with every float to 8 significant digits, through lists and dicts."""
    if isinstance(x, float):
        return float(f"{x:.8g}")
    if isinstance(x, list):
        return [rounded(v) for v in x]
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    return x


def spearman(x: list[float], y: list[float]) -> float:
    """Spearman's rank correlation of `x` and `y` (ties get mean ranks)."""
    from ..stats import within_group_correlation

    return within_group_correlation(x, y, [0] * len(x), ranks=True)  # one group: Spearman's rho


def permutation_p(x: list[float], y: list[float], resamples: int = 9999, seed: int = 0) -> float:
    """Two-sided permutation p-value of Spearman's rho (y shuffled against x)."""
    import random

    rho = spearman(x, y)
    rng = random.Random(seed)
    hits = 0
    yy = list(y)
    for _ in range(resamples):
        rng.shuffle(yy)
        hits += abs(spearman(x, yy)) >= abs(rho) - 1e-12
    return (hits + 1) / (resamples + 1)
