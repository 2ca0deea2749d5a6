"""The metric table: every metric of the suite once, with what each part of the suite needs of it.

A metric is one `Metric` entry of `METRICS` (docs/science.md, "Metrics"): its name, what it is
in words, its short label, its function, how it is averaged over the evaluation's sequences and
over seeds, the tasks it applies to, its lower bound, and whether it is a final score (stored
per evaluation, ranked by the leaderboard) or a learning-curve metric only. Everything that
lists metrics is generated from this table:

- the results store's metric columns (`store.database`: `<name>_bits`, `_ci_low`, `_ci_high`
  of every stored final metric; `stored_columns`);
- the leaderboard's rankings, descriptions and short labels (`report.rows`: `METRICS`,
  `SHORT`, `CURVE_METRIC_NAMES`);
- the learning curves' metrics and their order (`training.curves.curve_metrics`, the names
  `training.config` checks `--until-metric` against);
- the per-case scores (`scoring.by_case.CASE_METRICS`);
- the command line's `--until-metric`, `--curve-metric` and `--metric` choices (`cli/`);
- each metric's definition version in every job key (`metric_versions`).

- the final scores themselves: `scoring.metrics.score` computes each final metric from its
  `values` and `over_sequences` into `Score.metrics`, and the evaluation (`scoring.evaluate`),
  the floors, the per-case scores, the scored record (`store.records.EvalResult.scores`, in
  `record_metrics` order), the store's row and the leaderboard's JSON read that dict.

Adding a metric, final or not, is one `register(Metric(...))` here (or in your own module, before
the run) and its test: tests/test_metric_table.py shows a made-up curve metric reaching the
curves, the command line and the leaderboard, tests/scoring/test_new_metric.py a made-up final
metric reaching the stored rows and the JSON of `bayesbench run` and `bayesbench.run`.

The table imports nothing of bayesbench and no torch (the command line builds its parser from
it without loading torch); its functions take tensors and use only their methods.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Collection, Iterator

LOG2 = math.log(2.0)

#: How a metric's per-(sequence, position) values become one number on an evaluation set:
#: "pairs": the mean over every scored (sequence, position) pair (interval: a ratio estimator
#: over sequences, `scoring.metrics.summarize`); "positions": the mean over scored positions of
#: |the mean over sequences| (interval: the jackknife over sequences, `scoring.metrics.positional_mae`).
OVER_SEQUENCES = ("pairs", "positions")


@dataclass(frozen=True)
class Metric:
    """One metric of the suite (see the module docstring for who reads which field)."""

    name: str  # as stored, ranked and typed on the command line ("kl", "kl:repeated")
    description: str  # what the number is, in words: the leaderboard's notes
    short: str  # its label in tables and figures ("KL")
    #: (p, plogp, h_p, log_q, h_q) -> [..., N, L] values per (sequence, position), averaged as
    #: `over_sequences` says: p the exact posterior [N, L, C], plogp its sum p log p and h_p its
    #: entropy in bits [N, L], log_q the model's log-predictive [..., N, L, C] and h_q its entropy
    values: Callable[[Any, Any, Any, Any, Any], Any]
    over_sequences: str = "pairs"  # one of OVER_SEQUENCES
    #: over seeds, every metric is pooled the same way: the mean over a row's seeds with a
    #: t-interval over seeds, a diverged member left out (`report.rows`)
    over_seeds: str = "mean, t-interval over seeds"
    tasks: tuple[str, ...] | None = None  # the tasks it applies to (None: every task)
    case: str | None = None  # only the positions of this case of `Task.case_masks` ("repeated")
    lower: float | None = 0.0  # the least value it can take (its intervals are clipped there); None: unbounded
    final: bool = True  # a final score (stored, ranked); False: a learning-curve metric only
    version: int = 1  # raised whenever a change alters its numbers: part of every job key
    #: its values on a task with a continuous head (issue 41): a function of one
    #: `scoring.continuous.ContinuousValues` (KL, differential entropies, NLLs of the sampled y,
    #: excess squared error, each [..., N, L] in bits) -> [..., N, L]; None: it does not apply there
    continuous: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        if self.over_sequences not in OVER_SEQUENCES:
            raise ValueError(f"over_sequences must be one of {OVER_SEQUENCES}, got {self.over_sequences!r}")
        if not self.name or any(c.isspace() for c in self.name):
            raise ValueError(f"a metric's name must be a word without spaces, got {self.name!r}")


def _entropy_error(p, plogp, h_p, log_q, h_q):
    return (h_q - h_p).abs()


def _entropy_difference(p, plogp, h_p, log_q, h_q):
    return h_q - h_p


def kl_terms_bits(p, log_q):
    """KL(p || q) in bits over the last dim: the one definition of KL in the suite (the `kl`
    metrics here, `scoring.metrics.kl_bits`, `scoring.by_case.case_means`). Summed per class,
    sum_c [p_c log p_c - p_c log q_c], with 0 log 0 = 0 and the terms where p_c = 0 left out (so
    a zero-probability class of q where p > 0 gives +inf, an honest infinite penalty). p and
    log_q broadcast ([N, L, C] against [E, N, L, C]); no cast: the caller picks the dtype."""
    return (p.xlogy(p) - (p * log_q).where(p > 0, 0.0)).sum(-1) / LOG2


def _kl(p, plogp, h_p, log_q, h_q):
    return kl_terms_bits(p, log_q)


METRICS: dict[str, Metric] = {}


def register(metric: Metric) -> Metric:
    """Add `metric` to the table (a name already there is an error: one entry per metric)."""
    if metric.name in METRICS:
        raise ValueError(f"metric {metric.name!r} is already in the table")
    METRICS[metric.name] = metric
    return metric


def unregister(name: str) -> None:
    """Take a metric out of the table again (a test's made-up metric)."""
    METRICS.pop(name, None)


@contextmanager
def registered(metric: Metric) -> Iterator[Metric]:
    """`register(metric)` for the body of a `with` only, undone however it ends (a test's
    throwaway metric, which must not leak into the next test)."""
    register(metric)
    try:
        yield metric
    finally:
        unregister(metric.name)


@contextmanager
def registered_metrics() -> Iterator[None]:
    """The table as it is now, restored when the body ends however it ends: every metric a module
    imported in the body registers is taken out again (a test's throwaway extension module)."""
    before = dict(METRICS)
    try:
        yield
    finally:
        METRICS.clear()
        METRICS.update(before)


def _continuous_entropy_error(v):
    return (v.h_model - v.h_bayes).abs()


def _continuous_entropy_difference(v):
    return v.h_model - v.h_bayes


def _continuous_kl(v):
    return v.kl


def _nll_regret(v):
    return v.nll_model - v.nll_bayes


def _excess_sq(v):
    return v.excess_sq


def _not_categorical(p, plogp, h_p, log_q, h_q):
    """A continuous-only metric on a categorical predictive: no value (NaN)."""
    return h_q * math.nan


#: The continuous tunnels (`tasks.continuous.CONTINUOUS_TUNNELS`), named here since the table imports no tunnel.
CONTINUOUS_TUNNELS = ("linreg", "mixreg", "kalman")

# On a continuous tunnel the three built-in final metrics keep their meaning with densities:
# KL(Bayes || model) between predictive densities and |h(model) - h(Bayes)| of differential
# entropies, in bits (scoring.continuous); they are the stored, ranked scores of those tunnels.
register(Metric("entropy_mae", "entropy MAE per (sequence, position): mean |H(model) - H(Bayes)|", "entropy MAE",
                _entropy_error, continuous=_continuous_entropy_error))
register(Metric("entropy_mae_positional", "entropy MAE of per-position means: mean over positions of "
                "|mean H(model) - mean H(Bayes)| (the authors' bijection metric, Paper I Table 1)",
                "positional entropy MAE", _entropy_difference, over_sequences="positions",
                continuous=_continuous_entropy_difference))
register(Metric("kl", "KL(Bayes || model), mean over (sequence, position) (the authors' HMM metric)", "KL", _kl,
                continuous=_continuous_kl))
register(Metric("kl:repeated", "KL(Bayes || model) at the bijection's repeated keys, where the posterior is a point "
                "mass (a retrieval)", "KL at repeated keys", _kl, tasks=("bijection",), case="repeated",
                final=False))
register(Metric("kl:new", "KL(Bayes || model) at the bijection's new keys, where it is uniform over the values not "
                "yet seen (an elimination)", "KL at new keys", _kl, tasks=("bijection",), case="new", final=False))
# Continuous-only learning-curve metrics (issue 41). Curve metrics, not final scores: a final
# metric adds a (null) key to every stored row of the discrete tunnels, which stay byte-identical.
register(Metric("nll_regret", "NLL regret over Bayes on the sampled y: mean -log2 q(y) + log2 p(y), an unbiased "
                "estimate of KL(Bayes || model) from predictions alone (continuous tunnels)", "NLL regret",
                _not_categorical, tasks=CONTINUOUS_TUNNELS, lower=None, final=False, continuous=_nll_regret))
register(Metric("excess_sq", "Garg et al.'s normalised squared error in excess of Bayes: (mean of the model's "
                "predictive - the Bayes mean)^2 / d (arXiv 2208.01066; not bits)", "excess sq. error / d",
                _not_categorical, tasks=CONTINUOUS_TUNNELS, final=False, continuous=_excess_sq))


def final_metrics() -> tuple[str, ...]:
    """The final scores, in table order: stored per evaluation and ranked by the leaderboard."""
    return tuple(name for name, m in METRICS.items() if m.final)


def applies(metric: Metric, task: str | None, cases: Collection[str] = ()) -> bool:
    """Whether `metric` has positions on a set of `task` (None: any task) whose case masks are
    `cases`: its tasks include the task, and its case, if it has one, is among them."""
    return (metric.tasks is None or task is None or task in metric.tasks) and (metric.case is None
                                                                               or metric.case in cases)


def curve_metrics() -> tuple[str, ...]:
    """Every metric a learning curve records, in table order (a curve point's row order)."""
    return tuple(METRICS)


def scored_per_case() -> tuple[str, ...]:
    """The final metrics scored per case of a task (`scoring.by_case`): those over every position."""
    return tuple(name for name, m in METRICS.items() if m.final and m.case is None)


def curve_cases() -> tuple[str, ...]:
    """The cases of `Task.case_masks` some curve metric is restricted to ("repeated", "new")."""
    return tuple(dict.fromkeys(m.case for m in METRICS.values() if m.case is not None))


#: The built-in final metrics' stored columns, in schema order (`store.database`): the column
#: names a results store keeps whatever the table later holds, so every store reads the same.
STORED = ("entropy_mae", "kl", "entropy_mae_positional")


def record_metrics() -> tuple[str, ...]:
    """The final metrics in the order a scored record holds them (`store.records.EvalResult`, the
    store's columns and row JSON, the leaderboard's JSON and CSV): the built-in STORED first, as
    every store has them, then the others in table order."""
    return (*STORED, *(m for m in final_metrics() if m not in STORED))


def stored_columns() -> list[str]:
    """The results store's metric columns: mean and interval of each stored final metric."""
    return [f"{name}_{part}" for name in record_metrics() for part in ("bits", "ci_low", "ci_high")]


def metric_versions() -> dict[str, int]:
    """{name: definition version} of the final metrics: part of every job key and stored row
    (`bayesbench.versions`)."""
    return {name: METRICS[name].version for name in final_metrics()}


#: a score within this fraction of its set's uniform floor, or above it, is "at floor": nothing usable was
#: learned from the context (the leaderboard's mark, a tuning search's "at floor at every rate")
AT_FLOOR = 0.01
