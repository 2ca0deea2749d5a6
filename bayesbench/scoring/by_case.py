"""The error split by case: which sub-task of a wind tunnel a model has learned.

A bijection sequence asks two different things of a model (docs/science.md#bijection-elimination;
Paper I, "The Bayesian Geometry of Transformer Attention", arXiv 2512.22471, Sec. 3.1):

- **repeated**: the key was seen at an earlier pair, so its value is known: the posterior is a
  point mass on that value (a retrieval, 0 bits);
- **new**: the key was not seen before: the posterior is uniform over the values not yet seen
  (an elimination, log2 of their number);
- **query**: the final retrieval query (a context key, so also a point mass), kept apart from
  the value positions because training and scoring treat it apart.

A model that has learned one sub-task and not the other is right on one case and wrong on the
other; the overall metrics mix the two in proportion to how often each occurs. Finer splits the
structure suggests, by name: `new:free=K` (a new key with K values still unseen; K = V is the
first pair, K = 1 an elimination down to a point mass) and `repeated:lag=D` (a repeated key
whose last earlier occurrence is D pairs back).

The plateaus of a small transformer on the bijection are of another kind, which the structure
also suggests: a model that uses only the first m pairs of its context (and ignores every later
pair) is Bayes-optimal for that truncated context. `prefix_posterior` is that predictor's exact
posterior and `pairs_used` finds the m whose predictor is closest to the model in KL: a model on
a plateau is (nearly) one of them (docs/reproducing.md, "The quick bijection's plateaus").

`case_masks(task, batch)` gives the [N, T] masks (within `batch.mask`), computed from the task's
latents (the keys), not from the posterior; `case_scores` scores a model's log-probabilities on
each case with the final metrics of `metrics.score` (those over every position,
`metric_table.scored_per_case`) and their intervals; `case_metrics` flattens
them into the names a learning curve stores ("kl:repeated", "entropy_mae:new", ...);
`case_means` computes the per-case means on the device for E members at once, with no host read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
from torch import Tensor

from ..metric_table import kl_terms_bits, scored_per_case
from ..tasks import Batch, Task
from ..tasks.bijection import BijectionTask
from ..tasks.case_masks import CASES, DETAILS  # noqa: F401 (the case names, re-exported beside their scores)
from .metrics import LOG2, BuiltInScores, Summary, Values, final_scores, kl_bits, summarize

#: The metrics scored per case when this module was imported (`case_metrics` reads the table
#: itself, `scored_per_case`, so a metric registered later is scored per case too).
CASE_METRICS = scored_per_case()


def case_masks(task: Task, batch: Batch, detail: tuple[str, ...] = ()) -> dict[str, Tensor]:
    """{case name: [N, T] bool mask}, each within `batch.mask`, from the task's latents
    (`Task.case_masks`; the bijection's are `tasks/case_masks.py`'s); cases no position falls in are
    left out. `detail` adds the finer splits of DETAILS ("free", "lag").

    Only the bijection has cases; a ValueError for any other task."""
    if not task.CASES:
        raise ValueError(f"cases are defined for the bijection task only, got task {task.name!r}")
    return task.case_masks(batch, detail)


@dataclass(frozen=True)
class CaseScore(BuiltInScores):
    """One case's errors (bits) with 95% intervals over sequences, and its mean entropies: the
    model's against Bayes' tells whether it is too confident or too uncertain there."""

    n_positions: int
    n_sequences: int
    metrics: dict[str, Summary]  # {final metric over every position: Summary} (`metrics.final_scores`)
    model_entropy: float  # mean H(model) over the case's positions
    bayes_entropy: float  # mean H(Bayes) over the case's positions


def _check_log_q(batch: Batch, log_q: Tensor) -> None:
    if log_q.shape != batch.posterior.shape:
        raise ValueError(f"log_q must have the posterior's shape {list(batch.posterior.shape)} (one member), "
                         f"got {list(log_q.shape)}")


def case_scores(task: Task, batch: Batch, log_q: Tensor, detail: tuple[str, ...] = ()) -> dict[str, CaseScore]:
    """Score one member's log-probabilities log_q [N, T, C] on each case of `case_masks`."""
    _check_log_q(batch, log_q)
    values = Values.of(batch.posterior, log_q)
    h_q, h_p = values.h_q, values.h_p
    out = {}
    for name, m in case_masks(task, batch, detail).items():
        out[name] = CaseScore(
            n_positions=int(m.sum()), n_sequences=int(m.any(1).sum()),
            metrics=final_scores(values, m, task=task.name, nonfinite="nan"),
            model_entropy=float(h_q[m].mean()), bayes_entropy=float(h_p[m].mean()))
    return out


def case_metrics(task: Task, batch: Batch, log_q: Tensor, detail: tuple[str, ...] = ()) -> dict[str, float]:
    """{"<metric>:<case>": mean} for the final metrics over every position (`scored_per_case`),
    e.g. {"kl:repeated": 0.01, ...}, plus "positions:<case>" (how many positions the case has on
    this evaluation set)."""
    out: dict[str, float] = {}
    for name, s in case_scores(task, batch, log_q, detail).items():
        for metric in scored_per_case():
            if metric in s.metrics:  # a metric of other tasks has no score here
                out[f"{metric}:{name}"] = s.metrics[metric].mean
        out[f"positions:{name}"] = float(s.n_positions)
    return out


def case_means(masks: dict[str, Tensor], posterior: Tensor, log_q: Tensor) -> dict[str, Tensor]:
    """Per-case means on the device, for E members at once and without a host read:
    {"entropy_mae:<case>": [E], "kl:<case>": [E]} from log_q [E, N, T, C] and the posterior
    [N, T, C] (masks from `case_masks`, on log_q's device). Equal to `case_scores`' means."""
    if log_q.dim() != 4 or log_q.shape[1:] != posterior.shape:
        raise ValueError(f"log_q must have shape [E, *{list(posterior.shape)}], got {list(log_q.shape)}")
    p = posterior.to(log_q.dtype)
    h_p = -torch.special.xlogy(p, p).sum(-1) / LOG2
    h_q = -(log_q.exp() * log_q).sum(-1) / LOG2  # [E, N, T]
    kl = kl_terms_bits(p, log_q)  # [E, N, T], in log_q's dtype
    err = (h_q - h_p).abs()
    out = {}
    for name, m in masks.items():
        w = m.to(log_q.dtype)
        n = w.sum()
        out[f"entropy_mae:{name}"] = (err * w).sum((1, 2)) / n
        out[f"kl:{name}"] = (kl * w).sum((1, 2)) / n
    return out


def prefix_posterior(keys: Tensor, values: Tensor, V: int, m: int) -> Tensor:
    """The exact posterior at every pair of a predictor that sees only the first m pairs:
    at pair t, pi(keys[t]) given the pairs j < min(t, m) (m >= t is the full Bayes posterior).

    keys, values: [N, K] (values are pi(keys), class indices 0..V-1); returns [N, K, V] float64.
    m = 0 is the uniform predictor, m >= K - 1 the Bayes posterior of every pair."""
    if isinstance(m, bool) or not isinstance(m, int) or m < 0:
        raise ValueError(f"m must be an integer >= 0 (pairs used), got {m!r}")
    N, K = keys.shape
    pos = torch.arange(K, device=keys.device)
    visible = pos.view(1, K) < torch.clamp(pos, max=m).view(K, 1)  # [t, j]: pair j seen at pair t
    match = (keys.unsqueeze(2) == keys.unsqueeze(1)) & visible  # [N, t, j]
    known = match.any(2)
    onehot = torch.nn.functional.one_hot(values.long(), V).double()  # [N, j, V]
    known_value = (match.double() @ onehot).clamp(max=1.0)  # [N, t, V]: 1 on the paired value
    seen = (visible.double().unsqueeze(0) @ onehot) > 0  # [N, t, V]: values revealed before t
    free = (~seen).double()
    uniform = free / free.sum(-1, keepdim=True)
    return torch.where(known.unsqueeze(-1), known_value, uniform)


@dataclass(frozen=True)
class PairsUsed:
    """Which truncated-context predictor a model is closest to: kl[m] = KL(prefix-m posterior ||
    model) in bits over the scored positions (m = 0: uniform; the largest m, L with the query
    scored and L - 1 without, is Bayes itself); `best` the m with the smallest."""

    kl: dict[int, Summary]
    best: int


def pairs_used(task: Task, batch: Batch, log_q: Tensor) -> PairsUsed:
    """KL from each truncated-context predictor (`prefix_posterior`, m = 0..L) to one member's
    log-probabilities log_q [N, T, C], over the scored value positions and query."""
    _check_log_q(batch, log_q)
    masks = case_masks(task, batch)
    bijection = cast(BijectionTask, task)  # the one task with cases (`case_masks` refuses the others)
    L = bijection.L
    assert L is not None  # the variant's default fills it at construction
    keys, values = batch.latents["keys"], batch.latents["values"]
    pos = torch.arange(0, 2 * L, 2, device=keys.device)
    if bijection.query:
        pos = torch.cat([pos, torch.tensor([2 * L], device=keys.device)])
    scored = torch.zeros_like(batch.mask)
    for case in masks.values():
        scored |= case
    lq, mask = log_q[:, pos].double(), scored[:, pos]
    kl = {}
    for m in range(L + 1 if "query" in masks else L):  # at the values alone, m = L - 1 already sees every pair
        kl[m] = summarize(kl_bits(prefix_posterior(keys, values, bijection.V, m), log_q=lq), mask, nonfinite="nan")
    best = min(kl, key=lambda m: kl[m].mean if kl[m].mean == kl[m].mean else float("inf"))
    return PairsUsed(kl, best)
