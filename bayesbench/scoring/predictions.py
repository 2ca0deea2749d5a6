"""Predictions made elsewhere, scored like a model here (`bayesbench score --predictions`, docs/data.md).

`GivenPredictions` stands where a trained ensemble stands in `evaluate.evaluate` and
`rows.score_run`: one member whose log-probabilities on each evaluation set were read from a
file (a JAX, lm-evaluation-harness or any other framework's model). `evaluate.predict` hands
back the given log-probabilities of the set it is asked about instead of running a forward
pass, so a file is scored by the same code as a model trained here (the same metrics,
intervals over sequences, floors and curves) and becomes the same kind of stored row.

The set is recognised by its content (tokens and header equal to the ones given), never by
position in a call sequence: asking for a set the file does not cover is an error, not a
silent mismatch. The HMM's label-permutation check needs predictions on relabelled
sequences, which a file does not hold: `evaluate` leaves it off for given predictions.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..tasks import Batch


class GivenPredictions:
    """One ensemble member made of log-probabilities given per evaluation set.

    sets: (batch, log_q) pairs, log_q [N, L, C] float64 log-probabilities on `batch` (the
    evaluation set as `evaluate.eval_set` draws it). params: the model's parameter count as its
    owner states it (0: not given). The attributes `evaluate` and `rows.score_run` read of a
    model: `ensemble`, `seeds`, `num_params()`, `param_breakdown()`."""

    ensemble = 1
    cfg = None  # no bayesbench model configuration
    holds_model = False  # no layers behind the predictions: no state to count (`models.state.no_model_record`)

    def __init__(self, sets: list[tuple[Batch, Tensor]], *, seed: int = 0, params: int = 0) -> None:
        for batch, log_q in sets:
            want = tuple(batch.posterior.shape)
            if batch.targets.is_floating_point() and batch.targets.dim() == 2:  # a continuous tunnel (issue 41)
                if tuple(log_q.shape[:2]) != want[:2] or log_q.dim() != 3 or log_q.shape[-1] % 3:
                    raise ValueError(f"given predictive densities must have the set's [N, L] {list(want[:2])} and "
                                     f"3M entries (weights, means, variances), got {list(log_q.shape)}")
            elif tuple(log_q.shape) != want:
                raise ValueError(f"given predictions must have the set's shape {list(want)}, got {list(log_q.shape)}")
        self.sets = [(batch, log_q.double()) for batch, log_q in sets]
        self.seeds = [int(seed)]
        self.params = int(params)

    def log_probs(self, batch: Batch) -> Tensor:
        """[1, N, L, C] float64: the given log-probabilities of `batch` (matched by tokens and header)."""
        for given, log_q in self.sets:
            if _same_sequences(given, batch):
                return log_q.unsqueeze(0)
        raise ValueError(f"no given predictions for this evaluation set ({batch.batch_size} sequences of length "
                         f"{batch.seq_len}): the predictions cover {len(self.sets)} other set(s)")

    def num_params(self) -> int:
        return self.params

    def param_breakdown(self) -> dict[str, int]:
        return {}


def _same_sequences(a: Batch, b: Batch) -> bool:
    if a.tokens.shape != b.tokens.shape or not torch.equal(a.tokens, b.tokens):
        return False
    if (a.header is None) != (b.header is None):
        return False
    return a.header is None or b.header is None or torch.equal(a.header, b.header)
