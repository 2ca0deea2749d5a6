"""Mean over seeds with a 95% t-interval (the seeds are the unit of replication)."""

from __future__ import annotations

import math

import torch


def mean_ci(x: torch.Tensor, level: float = 0.95) -> dict:
    """{"mean", "ci_low", "ci_high", "n"}: Student-t interval of the mean of x (NaN bounds for n < 2)."""
    from scipy.stats import t

    x = x.double().flatten()
    n = x.numel()
    mean = float(x.mean())
    if n < 2:
        return {"mean": mean, "ci_low": float("nan"), "ci_high": float("nan"), "n": n}
    half = float(t.ppf(0.5 + level / 2, n - 1)) * float(x.std()) / math.sqrt(n)
    return {"mean": mean, "ci_low": mean - half, "ci_high": mean + half, "n": n}
