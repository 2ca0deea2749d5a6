"""The belief-revision oracles (oracle/revision.py): the soft-evidence predictives and beliefs
against hmmlearn's forward pass, and bad inputs. Against the authors' own generators and against
enumeration: tests/tasks/test_revision.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bayesbench.oracle.revision import antecedent_predictive, evidence_predictive
from bayesbench.tasks import get_task


def hmmlearn_beliefs(evidence: np.ndarray, emission: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(predictive of each e_j given e_<j [K, N], belief after all K [N]) from hmmlearn's forward
    pass (its compiled `forward_log`, as tests/oracle/test_hmm.py uses it): an HMM whose state
    never moves (transition matrix I) is the static referent; the predictive of v is the ratio
    of the likelihoods of e_<j v and e_<j."""
    from hmmlearn import _hmmc

    N = emission.shape[0]
    init, trans = np.full(N, 1.0 / N), np.eye(N)

    def loglik(obs: np.ndarray) -> float:
        return _hmmc.forward_log(init, trans, np.log(emission[:, obs].T))[0] if len(obs) else 0.0

    pred = [[math.exp(loglik(np.append(evidence[:j], v)) - loglik(evidence[:j])) for v in range(N)]
            for j in range(len(evidence))]
    fwd = _hmmc.forward_log(init, trans, np.log(emission[:, evidence].T))[1][-1]
    belief = np.exp(fwd - fwd.max())
    return np.array(pred), belief / belief.sum()


def test_soft_evidence_predictives_equal_hmmlearn():
    task = get_task("revision_hard", n_candidates=5, n_evidence=4, alpha=0.5, emission_seed=3)
    batch = task.sample(6, torch.Generator().manual_seed(0), dtype=torch.float64)
    E = task.emission.numpy()
    pos = task.scored_positions()
    for i in range(6):
        pred, belief = hmmlearn_beliefs(batch.latents["evidence"][i].numpy(), E)
        got = batch.posterior[i, pos].numpy()
        np.testing.assert_allclose(got[:-1], pred, atol=1e-10)
        np.testing.assert_allclose(got[-1], belief, atol=1e-10)


def test_bad_oracle_inputs_are_refused():
    with pytest.raises(ValueError, match="emission must be square"):
        evidence_predictive(torch.zeros((1, 2), dtype=torch.long), torch.full((2, 3), 1 / 3))
    with pytest.raises(ValueError, match="every row of emission"):
        evidence_predictive(torch.zeros((1, 2), dtype=torch.long), torch.full((2, 2), 0.4))
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 3\]"):
        antecedent_predictive(torch.tensor([[0, 4]]), torch.tensor([0]), 4)


def test_awkward_shapes():
    """No evidence: the belief is the uniform prior; two candidates; float32 out of float64 work."""
    E = torch.tensor([[0.9, 0.1], [0.3, 0.7]], dtype=torch.float64)
    none = evidence_predictive(torch.zeros((3, 0), dtype=torch.long), E, dtype=torch.float64)
    assert none.shape == (3, 1, 2) and torch.equal(none, torch.full((3, 1, 2), 0.5, dtype=torch.float64))
    one = evidence_predictive(torch.tensor([[1]]), E, dtype=torch.float32)
    assert one.dtype == torch.float32
    torch.testing.assert_close(one[0, 0], torch.tensor([0.6, 0.4]))  # the prior predictive: E's mean row
    torch.testing.assert_close(one[0, 1], torch.tensor([0.1 / 0.8, 0.7 / 0.8]))
    pred = antecedent_predictive(torch.tensor([[1, 0]]), torch.tensor([0]), 2, dtype=torch.float64)
    want = torch.tensor([[[0.5, 0.5], [1.0, 0.0], [0.5, 0.5], [1.0, 0.0]]], dtype=torch.float64)
    assert torch.equal(pred, want)
