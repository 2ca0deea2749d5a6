"""The mixture-of-HMMs oracle (oracle/hmm_mixture.py) and its tunnel (tasks/hmm_mixture.py):
the fast path (component filters by the forward op, log-space weights) against the product-space
reference on awkward shapes, and both against hmmlearn's forward pass per component, weighted by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bayesbench import ops
from bayesbench.oracle import hmm_filter
from bayesbench.oracle.hmm_mixture import hmm_mixture_predictive, hmm_mixture_reference
from bayesbench.tasks import get_task
from bayesbench.tasks._random import dirichlet

BACKENDS = ["reference"] + (["native"] if ops.available("hmm_filter") else [])


def components(M: int, S: int, V: int, seed: int = 0, concentration: float = 1.0):
    g = torch.Generator().manual_seed(seed)
    return (dirichlet(concentration, (M, S, S), g, dtype=torch.float64),
            dirichlet(concentration, (M, S, V), g, dtype=torch.float64),
            dirichlet(concentration, (M, S), g, dtype=torch.float64),
            dirichlet(1.0, (M,), g, dtype=torch.float64))


SHAPES = [(1, 1, 2, 3, 1), (1, 3, 2, 2, 5), (3, 2, 4, 5, 7), (5, 4, 3, 1, 9), (2, 1, 5, 4, 6)]  # M, S, V, B, L


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("M,S,V,B,L", SHAPES, ids=[f"M{m}S{s}V{v}B{b}L{n}" for m, s, v, b, n in SHAPES])
def test_fast_path_equals_the_product_space_reference(backend, M, S, V, B, L):
    trans, emit, init, prior = components(M, S, V)
    obs = torch.randint(0, V, (B, L), generator=torch.Generator().manual_seed(1))
    fast = hmm_mixture_predictive(trans, emit, init, prior, obs, backend=backend)
    ref = hmm_mixture_reference(trans, emit, init, prior, obs)
    for a, b in zip(fast, ref):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(fast[0].sum(-1), torch.ones(B, L, dtype=torch.float64))


def test_one_component_is_the_single_hmm():
    trans, emit, init, prior = components(1, 3, 4, seed=2)
    obs = torch.randint(0, 4, (6, 8), generator=torch.Generator().manual_seed(3))
    pred, weights, beliefs = hmm_mixture_predictive(trans, emit, init, prior, obs)
    post = hmm_filter(trans.expand(6, 3, 3), emit.expand(6, 3, 4), obs, init.expand(6, 3))
    torch.testing.assert_close(pred, post @ trans[0] @ emit[0])
    torch.testing.assert_close(beliefs[:, :, 0], post)
    assert (weights == 1).all()


def test_mixture_equals_hmmlearns_forward_pass_per_component_weighted_by_hand():
    """p(o_{t+1} | o_0..t) = sum_z w_z exp(score_z(o_0..t+1)) / sum_z w_z exp(score_z(o_0..t)),
    each score_z hmmlearn's forward log-likelihood of component z (CategoricalHMM)."""
    from hmmlearn.hmm import CategoricalHMM

    M, S, V, B, L = 3, 2, 3, 1, 4
    trans, emit, init, prior = components(M, S, V, seed=4)
    obs = torch.randint(0, V, (B, L), generator=torch.Generator().manual_seed(5))
    pred, weights, _ = hmm_mixture_predictive(trans, emit, init, prior, obs)
    models = []
    for z in range(M):
        m = CategoricalHMM(n_components=S, n_features=V, init_params="", params="")
        m.startprob_, m.transmat_, m.emissionprob_ = init[z].numpy(), trans[z].numpy(), emit[z].numpy()
        models.append(m)
    w = prior.numpy()
    for b in range(B):
        seq = obs[b].tolist()
        for i in range(L):
            ctx = np.exp([m.score(np.array(seq[: i + 1]).reshape(-1, 1)) for m in models])
            np.testing.assert_allclose(weights[b, i].numpy(), w * ctx / (w * ctx).sum(), atol=1e-10)
            for x in range(V):
                ext = np.exp([m.score(np.array(seq[: i + 1] + [x]).reshape(-1, 1)) for m in models])
                np.testing.assert_allclose(float(pred[b, i, x]), (w * ext).sum() / (w * ctx).sum(), atol=1e-10)


def test_a_component_that_cannot_emit_the_sequence_gets_weight_zero():
    trans, emit, init, prior = components(2, 2, 3, seed=6)
    emit = emit.clone()
    emit[1, :, 2] = 0.0  # component 1 never emits symbol 2
    emit[1] = emit[1] / emit[1].sum(-1, keepdim=True)
    obs = torch.tensor([[0, 2, 1, 1]])
    pred, weights, _ = hmm_mixture_predictive(trans, emit, init, prior, obs)
    assert torch.isfinite(pred).all() and (weights[0, 1:, 1] == 0).all()
    torch.testing.assert_close(pred, hmm_mixture_reference(trans, emit, init, prior, obs)[0])


def test_bad_inputs_are_refused_naming_the_argument():
    trans, emit, init, prior = components(2, 2, 3)
    obs = torch.zeros((1, 3), dtype=torch.long)
    with pytest.raises(ValueError, match="prior"):
        hmm_mixture_predictive(trans, emit, init, prior * 2, obs)
    with pytest.raises(ValueError, match=r"obs must lie in \[0, 2\]"):
        hmm_mixture_predictive(trans, emit, init, prior, obs + 3)
    with pytest.raises(ValueError, match="emit must have shape"):
        hmm_mixture_predictive(trans, emit[:1], init, prior, obs)


def test_the_tunnel_fixes_its_hmms_by_seed_and_its_posterior_finds_the_component():
    task = get_task("hmm_mixture", L=40)
    a, b = task.components(), get_task("hmm_mixture", L=40).components()
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], get_task("hmm_mixture", mixture_seed=1).components()[0])
    batch = task.sample(400, torch.Generator().manual_seed(0), dtype=torch.float64)
    w = batch.latents["weights"]
    hit = w.gather(-1, batch.latents["component"].view(-1, 1, 1).expand(-1, 40, 1)).squeeze(-1)
    assert hit[:, -1].mean() > hit[:, 0].mean() + 0.2  # the context identifies the concept
    torch.testing.assert_close(batch.latents["beliefs"].reshape(400, 40, 4, 3).sum(-1), w)


@pytest.mark.parametrize("config,message", [
    ({"M": 0}, "M must be a positive integer"), ({"V": 1}, "V must be an integer >= 2"),
    ({"mixture_seed": -1}, "mixture_seed must be an integer >= 0"),
    ({"concentration": 0.0}, "concentration must be a positive finite number")])
def test_bad_settings_are_refused(config, message):
    from bayesbench.checks import SettingError

    with pytest.raises(SettingError, match=message):
        get_task("hmm_mixture", **config)
