"""Scores of a continuous predictive against the exact one, in bits (issue 41; docs/science.md,
"Continuous tunnels"), averaged as the metric table says. The per-position values the metric
table's `continuous` functions read (`ContinuousValues`) are computed in `oracle/gaussian_bits.py`,
a layer below, so the trainer's curves and the tunnel checks read them too.

Both predictives come in the layout of `models.heads` ([..., 3J]: weights, means, variances):
the exact one from the batch (`Batch.posterior`), the model's from its head. Per supervised
(sequence, position), in bits:

- `kl`: KL(Bayes || model). Closed form when both are Gaussians; otherwise E_Bayes[log2 p - log2 q]
  by the package's one deterministic mixture quadrature (`oracle.gaussian_bits._integrate`):
  composite Gauss-Legendre between breakpoints at every component's scale, Bayes's and the
  model's, so that each component, however narrow, is resolved. Its error is asserted below 1e-9
  bits against scipy's adaptive quadrature (tests/oracle/test_gaussian_bits.py) and within 4
  standard errors of 200,000-draw Monte Carlo on mixreg's predictives
  (tests/scoring/test_continuous.py), both printed.
- `h_bayes`, `h_model`: differential entropies (closed form for a Gaussian, the same quadrature
  for a mixture).
- `nll_bayes`, `nll_model`: -log2 density of the sampled y under each; their difference, the NLL
  regret, is an unbiased estimate of the KL (E_y[log p(y) - log q(y)] = KL(p || q)) that a user
  can compute from predictions alone.
- `excess_sq`: (mean of the model's predictive - the Bayes mean)^2 / d, the excess of Garg et
  al.'s normalised squared error (arXiv 2208.01066, Sec. 3) over Bayes.

Every quantity is computed at the supervised positions only (0 elsewhere), in chunks of
`CHUNK_ROWS` rows, in float64; a member whose predictive is not finite gets NaN throughout.
"""

from __future__ import annotations

from torch import Tensor

from ..oracle.gaussian_bits import ContinuousValues, entropy_bits

__all__ = ["ContinuousValues", "continuous_scores", "entropy_bits", "score_continuous"]


def continuous_scores(values: ContinuousValues, mask: Tensor, *, task: str | None = None,
                      nonfinite: str = "raise") -> dict:
    """{name: Summary} of every final metric of the table with a `continuous` function (in table
    order) that applies to `task`: the continuous counterpart of `metrics.final_scores`."""
    from ..metric_table import METRICS, applies, final_metrics
    from .metrics import average

    out = {}
    for name in final_metrics():
        metric = METRICS[name]
        if metric.continuous is not None and metric.case is None and applies(metric, task):
            out[name] = average(metric, metric.continuous(values), mask, nonfinite=nonfinite)
    return out


def score_continuous(bayes: Tensor, mask: Tensor, model: Tensor, y: Tensor, *, dim: int = 1,
                     task: str | None = None, nonfinite: str = "raise"):
    """A model's continuous predictive `model` [N, L, 3M] against the exact `bayes` [N, L, 3J] on
    the sampled `y` [N, L], at the positions of `mask`: a `metrics.Score` (its final metrics,
    its per-position curves), as `metrics.score` gives for a categorical predictive."""
    from .metrics import Score, per_position

    v = ContinuousValues.of(bayes, model, y, mask, dim)
    err = (v.h_model - v.h_bayes).abs()
    return Score(metrics=continuous_scores(v, mask, task=task, nonfinite=nonfinite), entropy_error=err,
                 entropy_mae_curve=per_position(err, mask), kl_curve=per_position(v.kl, mask),
                 model_entropy_curve=per_position(v.h_model, mask), bayes_entropy_curve=per_position(v.h_bayes, mask))
