"""Metrics in bits (docs/science.md, "Metrics"): entropy, two entropy errors and KL(p || q), per
position and averaged with a 95% confidence interval.

Conventions: p is the exact posterior, q the model's predictive; both are [..., C] probability
vectors. 0 log 0 = 0. `mask` marks the supervised positions that are scored; everything else is
ignored. Three averages, always named:

- `entropy_mae`: mean over every scored (sequence, position) pair of |H(q) - H(p)|. The
  interval treats sequences as the independent units (positions within a sequence are
  correlated) with a ratio estimator, so sequences with different numbers of scored positions
  are handled exactly.
- `entropy_mae_positional`: mean over scored positions t of |mean_n H(q_{n,t}) - mean_n H(p_{n,t})|,
  the error of the per-position mean entropies. This is what the authors' evaluation code
  computes for the bijection table of Paper I ("The Bayesian Geometry of Transformer
  Attention", arXiv 2512.22471, Table 1). By the triangle inequality it is never larger than
  `entropy_mae` when every scored position is scored in the same sequences. Interval: the
  jackknife over sequences.
- `kl`: mean over scored pairs of KL(p || q) (the authors' HMM error, which their code labels
  "MAE"); interval as `entropy_mae`.

These are the built-in final metrics of the metric table (`bayesbench.metric_table`): `score`
computes every final metric of the table from its per-(sequence, position) values, averaged
as its `over_sequences` says (`summarize` or `positional_mean`), so a metric registered there
is scored, stored and shown with no edit here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ..metric_table import METRICS, Metric, applies, final_metrics, kl_terms_bits
from ..stats import t_quantile  # the one home of the t quantile (scipy.special: no scipy.stats import)
from ..store.records import Summary  # the type a metric's mean and interval are stored as

if TYPE_CHECKING:
    from ..tasks.base import Batch, Task

LOG2 = math.log(2.0)


def entropy_bits(p: Tensor) -> Tensor:
    """Shannon entropy of probability vectors over the last dim, in bits."""
    p = p.double() if p.dtype != torch.float64 else p
    return -torch.special.xlogy(p, p).sum(-1) / LOG2


def entropy_bits_from_log_probs(log_q: Tensor) -> Tensor:
    """Entropy in bits of exp(log_q), e.g. a model's log_softmax output. A -inf entry is a class
    of probability 0 and adds 0 (0 log 0 = 0), not NaN."""
    log_q = log_q.double()
    terms = torch.where(log_q == -math.inf, torch.zeros((), dtype=log_q.dtype, device=log_q.device),
                        log_q.exp() * log_q)
    return -terms.sum(-1) / LOG2


def entropy_bits_from_logits(logits: Tensor) -> Tensor:
    """Entropy in bits of softmax(logits), computed stably from log-probabilities."""
    return entropy_bits_from_log_probs(torch.log_softmax(logits.double(), -1))


def kl_bits(p: Tensor, q: Tensor | None = None, *, log_q: Tensor | None = None) -> Tensor:
    """KL(p || q) in bits over the last dim. Give q (probabilities) or log_q (e.g. log_softmax).

    Terms with p = 0 contribute 0; q = 0 where p > 0 gives +inf (an honest infinite penalty).
    """
    if (q is None) == (log_q is None):
        raise ValueError("kl_bits needs exactly one of q or log_q")
    p = p.double()
    if log_q is None:
        assert q is not None  # exactly one was given (checked above)
        log_q = torch.log(q.double())
    return kl_terms_bits(p, log_q.double())  # the table's one definition, in float64


def _check_mask(values: Tensor, mask: Tensor | None) -> Tensor:
    if values.dim() != 2:
        raise ValueError(f"values must have shape [N, L] (sequence, position), got {list(values.shape)}")
    if mask is None:
        return torch.ones_like(values, dtype=torch.bool)
    if mask.shape != values.shape:
        raise ValueError(f"mask must have the shape of values {list(values.shape)}, got {list(mask.shape)}")
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor, got {mask.dtype}")
    return mask


NONFINITE = ("raise", "nan")


def summarize(values: Tensor, mask: Tensor | None = None, level: float = 0.95, *,
              nonfinite: str = "raise", lower: float | None = None) -> Summary:
    """Mean of `values` [N, L] over positions where `mask` is True, with a `level` interval.

    The interval is a t-interval on the ratio estimator sum_n S_n / sum_n M_n (S_n the sum and
    M_n the count of scored values in sequence n), with the delta-method standard error.
    `nonfinite` says what a NaN or inf at a scored position means: "raise" (NaN raises, inf
    gives an infinite mean), or "nan" (a diverged model: the Summary's numbers are all NaN, so
    it has no score but its sibling ensemble members keep theirs). `lower`: the least value the
    quantity can take (0 for the entropy error and KL); the interval is clipped to it.
    """
    if nonfinite not in NONFINITE:
        raise ValueError(f"nonfinite must be one of {NONFINITE}, got {nonfinite!r}")
    mask = _check_mask(values, mask)
    if nonfinite == "nan" and not bool(torch.isfinite(values[mask]).all()):
        return Summary(math.nan, math.nan, math.nan, int(mask.any(1).sum()), int(mask.sum()))
    v = torch.where(mask, values.double(), torch.zeros((), dtype=torch.float64, device=values.device))
    if bool(torch.isnan(v).any()):
        raise ValueError("values contain NaN at scored positions; refusing to average them")
    sums = v.sum(1)
    counts = mask.sum(1).double()
    keep = counts > 0
    sums, counts = sums[keep], counts[keep]
    n = int(keep.sum())
    total = float(counts.sum())
    if n == 0:
        raise ValueError("mask selects no position: nothing to average")
    mean = float(sums.sum() / total)
    if n < 2 or not math.isfinite(mean):
        return Summary(mean, float("nan") if n < 2 else mean, float("nan") if n < 2 else mean, n, int(total))
    mbar = total / n
    resid = sums - mean * counts
    se = math.sqrt(float((resid**2).sum()) / (n * (n - 1))) / mbar
    half = t_quantile(n - 1, level) * se
    low = mean - half if lower is None else max(lower, mean - half)
    return Summary(mean, low, mean + half, n, int(total))


def per_position(values: Tensor, mask: Tensor | None = None) -> Tensor:
    """Mean over sequences at each position, NaN where no sequence is scored: shape [L]."""
    mask = _check_mask(values, mask)
    v = torch.where(mask, values.double(), torch.zeros((), dtype=torch.float64, device=values.device))
    counts = mask.sum(0).double()
    return torch.where(counts > 0, v.sum(0) / counts.clamp(min=1), torch.full_like(counts, float("nan")))


def positional_mae(h_q: Tensor, h_p: Tensor, mask: Tensor | None = None, level: float = 0.95, *,
                   nonfinite: str = "raise") -> Summary:
    """mean_t |mean_n h_q[n, t] - mean_n h_p[n, t]| over positions t scored in any sequence,
    with a jackknife `level` interval over sequences.

    h_q, h_p: [N, L] entropies (bits) of the model and of the posterior. Each position's means
    run over the sequences scored there. The jackknife recomputes the statistic with each
    sequence left out (vectorised: [N, L] work), se^2 = (n-1)/n sum (theta_(-n) - mean)^2, and
    uses a t-interval with n-1 degrees of freedom. The statistic is an absolute value of a mean,
    so it is biased upwards by noise when the true per-position difference is near 0; the
    interval describes its sampling spread, not that bias.
    """
    if h_q.shape != h_p.shape:
        raise ValueError(f"h_q and h_p must have the same shape, got {list(h_q.shape)} and {list(h_p.shape)}")
    return positional_mean(h_q.double() - h_p.double(), mask, level, nonfinite=nonfinite, lower=0.0)


def positional_mean(d: Tensor, mask: Tensor | None = None, level: float = 0.95, *, nonfinite: str = "raise",
                    lower: float | None = None) -> Summary:
    """mean_t |mean_n d[n, t]| over positions t scored in any sequence, with the jackknife
    `level` interval over sequences of `positional_mae` (which calls it with d = h_q - h_p):
    the average of a metric whose `over_sequences` is "positions". `lower` as in `summarize`."""
    if nonfinite not in NONFINITE:
        raise ValueError(f"nonfinite must be one of {NONFINITE}, got {nonfinite!r}")
    mask = _check_mask(d, mask)
    keep = mask.any(1)
    n, n_pos = int(keep.sum()), int(mask.sum())
    if n == 0:
        raise ValueError("mask selects no position: nothing to average")
    d = d.double()
    if nonfinite == "nan" and not bool(torch.isfinite(d[mask]).all()):
        return Summary(math.nan, math.nan, math.nan, n, n_pos)
    if bool(torch.isnan(d[mask]).any()):
        raise ValueError("values contain NaN at scored positions; refusing to average them")
    m = mask[keep].double()
    d = torch.where(mask[keep], d[keep], torch.zeros((), dtype=torch.float64, device=d.device))
    total, count = d.sum(0), m.sum(0)  # [L]
    scored = count > 0
    mean = float((total[scored] / count[scored]).abs().mean())
    if n < 2 or not math.isfinite(mean):
        return Summary(mean, float("nan") if n < 2 else mean, float("nan") if n < 2 else mean, n, n_pos)
    loo_count = count - m  # [n, L]: counts with sequence i left out
    loo_ok = loo_count > 0
    loo_diff = torch.where(loo_ok, (total - d) / loo_count.clamp(min=1), torch.zeros_like(d)).abs()
    loo = loo_diff.sum(1) / loo_ok.sum(1).clamp(min=1)  # [n] statistic without sequence i
    se = math.sqrt(float((n - 1) / n * ((loo - loo.mean()) ** 2).sum()))
    half = t_quantile(n - 1, level) * se
    return Summary(mean, mean - half if lower is None else max(lower, mean - half), mean + half, n, n_pos)


def average(metric: Metric, values: Tensor, mask: Tensor, *, nonfinite: str = "raise") -> Summary:
    """One metric's values [N, L] per (sequence, position) as one number with its interval, over
    the positions `mask` selects: as its `over_sequences` says, clipped at its `lower`."""
    if metric.over_sequences == "pairs":
        return summarize(values, mask, nonfinite=nonfinite, lower=metric.lower)
    return positional_mean(values, mask, nonfinite=nonfinite, lower=metric.lower)


@dataclass(frozen=True)
class Values:
    """What every metric's function takes (`metric_table.Metric.values`), float64, computed
    once per scoring: p [N, L, C], its sum p log p and entropy (bits) [N, L], the model's
    log-predictive [N, L, C] and its entropy (bits) [N, L]."""

    p: Tensor
    plogp: Tensor
    h_p: Tensor
    log_q: Tensor
    h_q: Tensor

    @classmethod
    def of(cls, p: Tensor, log_q: Tensor) -> Values:
        p, log_q = p.double(), log_q.double()
        plogp = torch.special.xlogy(p, p).sum(-1)
        return cls(p, plogp, entropy_bits(p), log_q, entropy_bits_from_log_probs(log_q))

    def of_metric(self, metric: Metric) -> Tensor:
        """`metric`'s values [N, L] per (sequence, position)."""
        return metric.values(self.p, self.plogp, self.h_p, self.log_q, self.h_q)


def final_scores(values: Values, mask: Tensor, *, task: str | None = None,
                 cases: Mapping[str, Tensor] | None = None, nonfinite: str = "raise") -> dict[str, Summary]:
    """{name: Summary} of every final metric of the table (`metric_table.final_metrics`, in its
    order) that applies to `task` (None: any) and the `cases` masks given ({case: [N, L] mask
    within `mask`}: a metric restricted to a case is averaged over its positions); the others are
    left out."""
    cases = cases or {}
    out = {}
    for name in final_metrics():
        metric = METRICS[name]
        if applies(metric, task, cases):
            out[name] = average(metric, values.of_metric(metric), mask if metric.case is None else cases[metric.case],
                                nonfinite=nonfinite)
    return out


class BuiltInScores:
    """The built-in final metrics as attributes, read from `metrics` (every final metric of the
    table by name, `final_scores`): what `Score`, `evaluate.MemberScore` and `by_case.CaseScore`
    share, so code reads `score.kl` while a registered metric needs no field."""

    metrics: dict[str, Summary]

    @property
    def entropy_mae(self) -> Summary:
        """mean_{n,t} |H(q) - H(p)|"""
        return self.metrics["entropy_mae"]

    @property
    def kl(self) -> Summary:
        """mean_{n,t} KL(p || q)"""
        return self.metrics["kl"]

    @property
    def entropy_mae_positional(self) -> Summary:
        """mean_t |mean_n H(q) - mean_n H(p)|"""
        return self.metrics["entropy_mae_positional"]


@dataclass(frozen=True)
class Score(BuiltInScores):
    """A model's errors against the exact posterior (docs/science.md, "Metrics"): every final
    metric of the table averaged (`metrics`, the truth; `entropy_mae`, `kl` and
    `entropy_mae_positional` read it), and the per-position curves of the built-in ones."""

    metrics: dict[str, Summary]  # {final metric: Summary}, table order (`final_scores`)
    entropy_error: Tensor  # [N, L] |H(q) - H(p)| bits, for paired comparisons of two models
    entropy_mae_curve: Tensor  # [L] bits
    kl_curve: Tensor  # [L] bits
    model_entropy_curve: Tensor  # [L] bits
    bayes_entropy_curve: Tensor  # [L] bits


#: |logsumexp(log_q) - 0| allowed for a row of log-probabilities (float64 rows; others get
#: the oracle's ROW_SUM_ATOL for their precision).
LOG_SUM_ATOL = 1e-6


def _check_posterior(p: Tensor, mask: Tensor) -> None:
    """p must be a probability distribution at every scored position (it is the exact posterior;
    the oracle's own outputs always are): anything else gives entropies and KLs that mean nothing."""
    from ..oracle.validate import require_distribution_rows

    if mask.shape != p.shape[:-1] or mask.dtype != torch.bool:
        return  # summarize names the mask's problem
    rows = p[mask]
    require_distribution_rows("p (the exact posterior) at the scored positions",
                              rows if rows.dtype in (torch.float32, torch.float64) else rows.double())


def _check_logits(mask: Tensor, logits: Tensor, nonfinite: str) -> None:
    """Logits may hold -inf (a class of probability 0) but not NaN or +inf, and not -inf in every
    class of a row (no distribution); `nonfinite="nan"` lets a diverged model's rows through."""
    if mask.shape != logits.shape[:-1] or mask.dtype != torch.bool or nonfinite == "nan":
        return
    rows = logits[mask]
    if bool(torch.isnan(rows).any()) or bool((rows == math.inf).any()):
        raise ValueError("logits must be finite or -inf (a class of probability 0) at every scored position; found "
                         "NaN or +inf: pass nonfinite='nan' to score a diverged model as NaN")
    if rows.numel() and bool((rows == -math.inf).all(-1).any()):
        raise ValueError("logits must give some class a finite value in every scored row; found a row of -inf only")


def _check_predictive(mask: Tensor, q: Tensor | None, log_q: Tensor | None, nonfinite: str) -> None:
    """q must be a probability distribution (finite, non-negative, summing to 1) and log_q its
    logarithm at every scored position; rows with a NaN/inf are the `nonfinite` rule's business
    when it is "nan" (a diverged member scores NaN), an error otherwise."""
    from ..oracle.validate import ROW_SUM_ATOL, require_distribution_rows

    given = q if q is not None else log_q
    assert given is not None  # `score` passes one of the two
    if mask.shape != given.shape[:-1] or mask.dtype != torch.bool:
        return  # summarize names the mask's problem
    name = "q (the model's predictive)" if q is not None else "log_q (the model's log-predictive)"
    rows = given[mask]
    finite = torch.isfinite(rows).all(-1) if q is not None else ~torch.isnan(rows).any(-1)
    if nonfinite == "nan":
        rows = rows[finite]
    elif not bool(finite.all()):
        raise ValueError(f"{name} must be finite at every scored position (no NaN{' or inf' if q is not None else ''});"
                         " pass nonfinite='nan' to score a diverged model as NaN")
    if q is not None:
        if rows.dtype not in ROW_SUM_ATOL:
            rows = rows.double()
        require_distribution_rows(f"{name} at the scored positions", rows)
        return
    if bool((rows == math.inf).any()):
        raise ValueError(f"{name} must be <= 0 (log-probabilities); found +inf at a scored position")
    atol = LOG_SUM_ATOL if rows.dtype == torch.float64 else ROW_SUM_ATOL.get(rows.dtype, ROW_SUM_ATOL[torch.float32])
    total = torch.logsumexp(rows.double(), -1)
    off = (total.abs() > atol)
    if bool(off.any()):
        raise ValueError(f"{name} must hold log-probabilities at the scored positions: exp(log_q) sums to "
                         f"{float(total[off][0].exp()):.8g} in a row (allowed: logsumexp within {atol:g} of 0)")


def score(p: Tensor, mask: Tensor, *, q: Tensor | None = None, logits: Tensor | None = None,
          log_q: Tensor | None = None, nonfinite: str = "raise", task: str | None = None,
          cases: Mapping[str, Tensor] | None = None) -> Score:
    """Score a model's predictive (probabilities q, logits or log-probabilities log_q, all
    [N, L, C]) against posteriors p with every final metric of the table; `nonfinite` as in
    `summarize`; `task` and `cases` (its case masks) as in `final_scores`.

    q must be a distribution at every scored position (finite, non-negative, each row summing
    to 1 within the oracle's tolerance `oracle.validate.ROW_SUM_ATOL`), and log_q its logarithm
    (logsumexp 0): anything else would give a silently wrong entropy and a negative KL.
    Unscored positions are not checked (p itself is all zeros there)."""
    given = [x for x in (q, logits, log_q) if x is not None]
    if len(given) != 1:
        raise ValueError("score needs exactly one of q, logits or log_q")
    for name, x in (("p", p), ("mask", mask), ("q" if q is not None else "logits" if logits is not None else "log_q",
                                               given[0])):
        if not isinstance(x, Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not p.dtype.is_floating_point or not given[0].dtype.is_floating_point:
        raise ValueError(f"p and the model's predictive must be floating-point tensors, got {p.dtype} and "
                         f"{given[0].dtype}")
    if given[0].shape != p.shape:
        raise ValueError(f"the model's predictive must have the shape of p {list(p.shape)}, got {list(given[0].shape)}")
    if nonfinite not in NONFINITE:
        raise ValueError(f"nonfinite must be one of {NONFINITE}, got {nonfinite!r}")
    _check_posterior(p, mask)
    if logits is None:
        _check_predictive(mask, q, log_q, nonfinite)
    else:
        _check_logits(mask, logits, nonfinite)
    if q is not None:
        log_q = torch.log(q.double())
    elif logits is not None:
        log_q = torch.log_softmax(logits.double(), -1)
    assert log_q is not None  # one of the three was given (checked above)
    values = Values.of(p, log_q)
    if q is not None:  # q's own entropy (its zero classes exactly 0), not one through log q
        values = dataclasses.replace(values, h_q=entropy_bits(q))
    h_q, h_p = values.h_q, values.h_p
    err = values.of_metric(METRICS["entropy_mae"])
    kl = values.of_metric(METRICS["kl"])
    return Score(
        metrics=final_scores(values, mask, task=task, cases=cases, nonfinite=nonfinite),
        entropy_error=err,
        entropy_mae_curve=per_position(err, mask),
        kl_curve=per_position(kl, mask),
        model_entropy_curve=per_position(h_q, mask),
        bayes_entropy_curve=per_position(h_p, mask),
    )


def final_cases(task: Task | None, batch: Batch) -> dict[str, Tensor]:
    """The case masks of `batch` some final metric of the table is restricted to (none: no
    task given, a task without cases, or no final metric restricted to a case)."""
    wanted = {METRICS[name].case for name in final_metrics()} - {None}
    if task is None or not task.CASES or not wanted:
        return {}
    return {c: m for c, m in task.case_masks(batch).items() if c in wanted}
