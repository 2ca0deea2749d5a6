"""Computed baselines ("floors") for every evaluation set, scored with the same metrics as
the models (docs/science.md, "Floors").

On a continuous tunnel (issue 41) the floors are the tunnel's own reference predictors
(`continuous_floor_scores`): the prior predictive, which ignores the context, and named
references such as least squares and a ridge with a wrong prior (linreg).

- `uniform`: the predictor that outputs 1/C for every class at every scored position. It knows
  nothing; on the papers' settings it lands where their capacity-matched MLPs do (Paper I, "The
  Bayesian Geometry of Transformer Attention", arXiv 2512.22471, Table 1: MLP 1.85 bits on the
  bijection, 0.40 on the HMM).
- `marginal`: the best predictor that ignores the context. Among predictors that see only the
  position t, mean KL(p || q) is minimised by q_t = E[p_t], the mean posterior at t. It is
  estimated from an independent sample of the same task (its own seed), so it is not fitted to
  the evaluation set. On a label-symmetric tunnel (the bijection, hmm, markov, sticky: its prior
  is unchanged by relabelling the classes) it is uniform up to sampling noise. Not every tunnel
  is: on `crp` a label names a table in order of opening (the first customer is always label 0,
  and the last label holds the overflow), so the marginal is far from uniform and is the floor
  that counts; so it is on the belief-state processes whose symbols are not exchangeable (`even`,
  `golden_mean`: a 1 is rarer than a 0) and on `hmm_mixture` (a fixed, finite set of HMMs).

A model above these rows has learned nothing from the context that a constant could not give.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..models.heads import is_continuous
from ..tasks import Batch, Task
from .continuous import ContinuousValues, continuous_scores
from .metrics import Summary, final_cases, score

FLOORS = ("uniform", "marginal")
MARGINAL_SEQUENCES = 4096


def uniform_log_q(batch: Batch) -> Tensor:
    """log(1/C) at every position of the batch, [N, L, C] float64."""
    C = batch.posterior.shape[-1]
    return torch.full(batch.posterior.shape, -torch.log(torch.tensor(float(C), dtype=torch.float64)).item(),
                      dtype=torch.float64)


def marginal_log_q(batch: Batch, reference: Batch) -> Tensor:
    """log of the mean posterior per position of `reference`, broadcast to `batch`'s shape.

    Positions never scored in `reference` get the uniform distribution (they are not scored in
    `batch` either when both come from the same task).
    """
    if reference.posterior.shape[1:] != batch.posterior.shape[1:]:
        raise ValueError(f"reference batch must have the evaluation batch's [L, C] "
                         f"{list(batch.posterior.shape[1:])}, got {list(reference.posterior.shape[1:])}")
    p, m = reference.posterior.double(), reference.mask
    counts = m.sum(0).double()  # [L]
    mean = (p * m.unsqueeze(-1)).sum(0) / counts.clamp(min=1).unsqueeze(-1)  # [L, C]
    C = p.shape[-1]
    mean = torch.where((counts > 0).unsqueeze(-1), mean, torch.full_like(mean, 1.0 / C))
    return torch.log(mean).unsqueeze(0).expand(batch.posterior.shape)


def floor_scores(batch: Batch, reference: Batch, *, task: Task | None = None) -> dict[str, dict[str, Summary]]:
    """{"uniform": {metric: Summary}, "marginal": {...}}: every final metric of the table (in its
    order; those that apply to `task`, the batch's, as for the models) of each floor on the batch's
    scored positions (the marginal estimated from `reference`)."""

    if task is not None and is_continuous(task.head):
        return continuous_floor_scores(batch, task)
    p, mask = batch.posterior.double(), batch.mask
    cases = final_cases(task, batch)
    out = {}
    for name, log_q in (("uniform", uniform_log_q(batch)), ("marginal", marginal_log_q(batch, reference))):
        out[name] = score(p, mask, log_q=log_q, task=None if task is None else task.name, cases=cases).metrics
    return out


def continuous_floor_scores(batch: Batch, task: Task) -> dict[str, dict[str, Summary]]:
    """{name: {metric: Summary}} of a continuous tunnel's reference predictors
    (`ContinuousTask.floor_predictives`: the prior predictive "prior" first, then e.g. least squares
    and a ridge with a wrong prior for linreg) on the batch's supervised positions."""
    refs = getattr(task, "floor_predictives")(batch)
    p, mask, dim = batch.posterior.double(), batch.mask, getattr(task, "error_dim", 1)
    return {name: continuous_scores(ContinuousValues.of(p, q, batch.targets, mask, dim), mask, task=task.name)
            for name, q in refs.items()}
