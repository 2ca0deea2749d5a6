"""Exact posteriors of the two belief-revision tunnels (docs/science.md#belief-revision; the
authors' public code `vishalmisra/bayesian-wind-tunnel`, src/data/belief_revision.py and
belief_revision_hard.py; no script of that repository uses them and no paper of the series
reports on them).

Delayed disambiguation (`antecedent_predictive`). N distinct entity ids are drawn without
replacement from n, then the antecedent Z ~ Uniform{0..N-1}; a cue later names id_Z. The
predictive of the i-th introduced id given the ones before is uniform over the n - i ids not
introduced yet; the predictive of the cue's id (the belief before revision) is 1/N on each
introduced id; after the cue, the answer's predictive (the belief after revision) is a point mass
on the cued id.

Soft evidence (`evidence_predictive`). Z ~ Uniform{0..N-1} and K evidence symbols e_j ~ E[Z, :]
i.i.d. given Z, E a fixed N x N emission matrix. After e_1..e_j the belief is

    P(Z = z | e_1..e_j) = prod_i E[z, e_i] / sum_z' prod_i E[z', e_i],

the predictive of e_{j+1} is sum_z P(z | e_1..e_j) E[z, :], and the answer's predictive (after
all K) is the belief itself.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .validate import require_distribution_rows, require_float_dtype, require_integer, require_range, require_shape


def antecedent_predictive(ids: Tensor, cue: Tensor, n: int, *, dtype: torch.dtype = torch.float32) -> Tensor:
    """Predictives [B, N + 2, n] of the delayed-disambiguation task: rows 0..N-1 the i-th
    introduced id, row N the cue's id, row N + 1 the answer.

    ids: [B, N] long, the introduced ids (distinct, in 0..n-1); cue: [B] long, the cued id (one of
    each row's ids)."""
    require_integer("ids", ids)
    require_shape("ids", ids, (None, None), "batch B, candidate N")
    require_range("ids", ids, 0, n)
    require_float_dtype("dtype", dtype)
    B, N = ids.shape
    dev = ids.device
    seen = torch.zeros((B, N + 1, n), dtype=torch.float64, device=dev)  # ids introduced before row i
    seen[:, 1:] = torch.nn.functional.one_hot(ids, n).double().cumsum(1)
    intro = (1.0 - seen[:, :N]) / (n - torch.arange(N, device=dev, dtype=torch.float64)).view(1, N, 1)
    before = seen[:, N] / N  # the prior over the antecedent, on the introduced ids
    after = torch.nn.functional.one_hot(cue.long(), n).double()
    return torch.cat([intro, before.unsqueeze(1), after.unsqueeze(1)], 1).to(dtype)


def evidence_predictive(evidence: Tensor, emission: Tensor, *, dtype: torch.dtype = torch.float32) -> Tensor:
    """Predictives [B, K + 1, N] of the soft-evidence task: row j < K is the predictive of e_{j+1}
    given e_1..e_j, row K the belief P(Z | e_1..e_K).

    evidence: [B, K] long symbols in 0..N-1; emission: [N, N] rows (P(e | Z = z)), any float."""
    require_integer("evidence", evidence)
    require_shape("evidence", evidence, (None, None), "batch B, evidence K")
    require_shape("emission", emission, (None, None), "candidate z, evidence symbol e")
    N = emission.shape[0]
    if emission.shape[1] != N:
        raise ValueError(f"emission must be square [N, N], got {list(emission.shape)}")
    require_range("evidence", evidence, 0, N)
    require_distribution_rows("emission", emission.double())
    require_float_dtype("dtype", dtype)
    return evidence_predictive_reference(evidence, emission.double()).to(dtype)


def evidence_predictive_reference(evidence: Tensor, emission: Tensor) -> Tensor:
    """float64, no validation: log-likelihoods summed, normalised by softmax (no underflow)."""
    B, K = evidence.shape
    log_e = torch.log(emission.to(evidence.device, torch.float64))  # [N(z), N(e)]
    lik = log_e.t()[evidence.long()]  # [B, K, N(z)]: log E[z, e_j]
    log_belief = torch.cat([torch.zeros((B, 1, emission.shape[0]), dtype=torch.float64, device=evidence.device),
                            lik.cumsum(1)], 1)  # [B, K + 1, N]: uniform prior, then each e_j
    belief = torch.softmax(log_belief, -1)
    predictive = belief[:, :K] @ emission.to(evidence.device, torch.float64)  # [B, K, N(e)]
    return torch.cat([predictive, belief[:, K:]], 1)
