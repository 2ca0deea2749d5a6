"""HMM filtering oracle: brute force, hmmlearn, long sequences and every bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from bayesbench.oracle import hmm_filter
from bayesbench.tasks._random import dirichlet


def random_hmm(B, S, V, L, seed, dtype=torch.float64, concentration=1.0):
    g = torch.Generator().manual_seed(seed)
    trans = dirichlet(concentration, (B, S, S), g, dtype=dtype)
    emit = dirichlet(concentration, (B, S, V), g, dtype=dtype)
    init = dirichlet(concentration, (B, S), g, dtype=dtype)
    obs = torch.randint(0, V, (B, L), generator=g)
    return trans, emit, obs, init


def brute_force_filter(trans, emit, obs, init):
    """p(s_t | o_1..t) and log p(o_1..L) by summing over every hidden path."""
    S, L = trans.shape[0], obs.shape[0]
    post = np.zeros((L, S))
    for t in range(L):
        joint = np.zeros(S)
        for path in itertools.product(range(S), repeat=t + 1):
            p = init[path[0]] * emit[path[0], obs[0]]
            for k in range(1, t + 1):
                p *= trans[path[k - 1], path[k]] * emit[path[k], obs[k]]
            joint[path[-1]] += p
        post[t] = joint / joint.sum()
        if t == L - 1:
            loglik = np.log(joint.sum())
    return post, loglik


@pytest.mark.parametrize("S,V,L", [(2, 3, 5), (3, 2, 4), (4, 4, 3)])
def test_matches_brute_force_over_all_paths(S, V, L):
    trans, emit, obs, init = random_hmm(3, S, V, L, seed=S * 100 + L)
    post, loglik = hmm_filter(trans, emit, obs, init, return_loglik=True)
    for b in range(3):
        want, want_ll = brute_force_filter(trans[b].numpy(), emit[b].numpy(), obs[b].numpy(), init[b].numpy())
        np.testing.assert_allclose(post[b].numpy(), want, rtol=1e-12, atol=1e-14)
        assert loglik[b].item() == pytest.approx(want_ll, rel=1e-12)


def test_uniform_init_is_the_default():
    trans, emit, obs, _ = random_hmm(4, 3, 3, 6, seed=1)
    uniform = torch.full((4, 3), 1 / 3, dtype=torch.float64)
    torch.testing.assert_close(hmm_filter(trans, emit, obs), hmm_filter(trans, emit, obs, uniform))


def hmmlearn_filter(trans, emit, obs, init):
    from hmmlearn import _hmmc

    log_frame = np.log(emit[:, obs].T)  # [L, S]
    loglik, fwd = _hmmc.forward_log(init, trans, log_frame)
    post = np.exp(fwd - fwd.max(1, keepdims=True))
    return post / post.sum(1, keepdims=True), loglik


@pytest.mark.parametrize("dtype,rtol", [(torch.float64, 1e-9), (torch.float32, 2e-4)])
def test_matches_hmmlearn_forward_pass(dtype, rtol):
    pytest.importorskip("hmmlearn")
    trans, emit, obs, init = random_hmm(16, 5, 5, 60, seed=7)
    post, loglik = hmm_filter(trans.to(dtype), emit.to(dtype), obs, init.to(dtype), return_loglik=True)
    assert post.dtype == dtype
    for b in range(16):
        want, want_ll = hmmlearn_filter(trans[b].numpy(), emit[b].numpy(), obs[b].numpy(), init[b].numpy())
        np.testing.assert_allclose(post[b].double().numpy(), want, rtol=rtol, atol=rtol * 1e-2)
        assert loglik[b].item() == pytest.approx(want_ll, rel=rtol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_long_sequence_is_finite_and_correct(dtype):
    pytest.importorskip("hmmlearn")
    L = 20000
    trans, emit, obs, init = random_hmm(3, 5, 5, L, seed=11)
    post, loglik = hmm_filter(trans.to(dtype), emit.to(dtype), obs, init.to(dtype), return_loglik=True)
    assert torch.isfinite(post).all() and torch.isfinite(loglik).all()
    assert loglik.max() < -1000  # far below what a product of probabilities could represent
    tol = 1e-8 if dtype == torch.float64 else 1e-3
    for b in range(3):
        want, want_ll = hmmlearn_filter(trans[b].numpy(), emit[b].numpy(), obs[b].numpy(), init[b].numpy())
        np.testing.assert_allclose(post[b].double().numpy(), want, atol=tol)
        assert loglik[b].item() == pytest.approx(want_ll, rel=tol)


def test_label_permutation_permutes_the_posterior():
    trans, emit, obs, init = random_hmm(8, 5, 5, 20, seed=3)
    sigma = torch.tensor([2, 0, 4, 1, 3])
    inv = sigma.argsort()
    # T'[sigma(i), sigma(j)] = T[i, j]: state sigma(i) of the new HMM is state i of the old one.
    trans_p = trans[:, inv][:, :, inv]
    emit_p, init_p = emit[:, inv], init[:, inv]
    post = hmm_filter(trans, emit, obs, init)
    post_p = hmm_filter(trans_p, emit_p, obs, init_p)
    torch.testing.assert_close(post_p[..., sigma], post)


def test_zero_length_and_deterministic_emission():
    trans, emit, obs, init = random_hmm(2, 3, 3, 0, seed=5)
    assert hmm_filter(trans, emit, obs, init).shape == (2, 0, 3)
    # An emission that identifies the state gives a one-hot posterior.
    emit = torch.eye(3, dtype=torch.float64).expand(2, 3, 3).clone()
    obs = torch.tensor([[0, 1, 2], [2, 2, 1]])
    trans = torch.full((2, 3, 3), 1 / 3, dtype=torch.float64)
    post = hmm_filter(trans, emit, obs)
    torch.testing.assert_close(post, torch.nn.functional.one_hot(obs, 3).double())


# ---- bad input: ValueError naming the argument and the rule ----------------------------

def good():
    trans, emit, obs, init = random_hmm(2, 3, 4, 5, seed=9)
    return {"trans": trans, "emit": emit, "obs": obs, "init": init}


def bad_case(name):
    a = good()
    if name == "trans_not_rows":
        a["trans"] = a["trans"] * 1.1
        return a, r"every row of trans .* summing to 1 within 1e-06"
    if name == "emit_negative":
        a["emit"][1, 2, 0] = -0.1
        a["emit"][1, 2, 1] += 0.1
        return a, r"emit must be non-negative; found -0.1 at index \(1, 2, 0\)"
    if name == "trans_nan":
        a["trans"][0, 0, 0] = float("nan")
        return a, r"trans must be finite \(no NaN or inf\)"
    if name == "init_not_rows":
        a["init"] = a["init"] + 0.01
        return a, r"every row of init .* summing to 1"
    if name == "obs_out_of_range":
        a["obs"][1, 3] = 4
        return a, r"obs must lie in \[0, 3\]; found 4 at index \(1, 3\)"
    if name == "obs_negative":
        a["obs"][0, 0] = -1
        return a, r"obs must lie in \[0, 3\]; found -1"
    if name == "obs_float":
        a["obs"] = a["obs"].double()
        return a, r"obs must be an integer tensor"
    if name == "batch_mismatch":
        a["emit"] = a["emit"][:1]
        return a, r"emit must have shape \[2, 3, \*\]"
    if name == "state_mismatch":
        a["emit"] = torch.full((2, 2, 4), 0.25, dtype=torch.float64)
        return a, r"emit must have shape \[2, 3, \*\]"
    if name == "trans_not_square":
        a["trans"] = torch.full((2, 3, 2), 0.5, dtype=torch.float64)
        return a, r"trans must be square"
    if name == "obs_rank":
        a["obs"] = a["obs"][0]
        return a, r"obs must have shape \[2, \*\]"
    if name == "dtype_mismatch":
        a["emit"] = a["emit"].float()
        return a, r"emit must have the dtype of trans"
    if name == "int_matrices":
        a["trans"] = a["trans"].long()
        return a, r"trans must be float32 or float64"
    if name == "impossible":
        a["emit"][:, :, 3] = 0.0
        a["emit"] = a["emit"] / a["emit"].sum(-1, keepdim=True)
        a["obs"][:] = 0
        a["obs"][1, 2] = 3
        return a, r"obs is impossible under the HMM: batch element 1 has zero likelihood at step 2"
    if name == "impossible_by_transition":
        # state 0 emits only symbol 0, state 1 only symbol 1, and 0 never goes to 1.
        a["trans"] = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
                                  dtype=torch.float64).expand(2, 3, 3).clone()
        a["emit"] = torch.tensor([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0]],
                                 dtype=torch.float64).expand(2, 3, 4).clone()
        a["obs"] = torch.tensor([[0, 0, 0, 0, 0], [0, 0, 1, 1, 1]])
        return a, r"batch element 1 has zero likelihood at step 2"
    raise AssertionError(name)


BAD = ["trans_not_rows", "emit_negative", "trans_nan", "init_not_rows", "obs_out_of_range", "obs_negative",
       "obs_float", "batch_mismatch", "state_mismatch", "trans_not_square", "obs_rank", "dtype_mismatch",
       "int_matrices", "impossible", "impossible_by_transition"]


@pytest.mark.parametrize("name", BAD)
def test_bad_input_raises_a_clear_error(name):
    args, message = bad_case(name)
    with pytest.raises(ValueError, match=message):
        hmm_filter(args["trans"], args["emit"], args["obs"], args["init"], backend="reference")


def test_backend_names():
    a = good()
    with pytest.raises(ValueError, match="backend must be one of"):
        hmm_filter(a["trans"], a["emit"], a["obs"], backend="fast")
    ref = hmm_filter(a["trans"], a["emit"], a["obs"], a["init"], backend="reference")
    torch.testing.assert_close(hmm_filter(a["trans"], a["emit"], a["obs"], a["init"], backend="auto"), ref)


def test_float32_row_tolerance_is_looser_than_float64():
    a = good()
    trans = a["trans"].clone()
    trans[:, :, 0] += 5e-5
    trans[:, :, 1] -= 0  # rows now sum to 1 + 5e-5
    hmm_filter(trans.float(), a["emit"].float(), a["obs"])  # within 1e-4
    with pytest.raises(ValueError, match="within 1e-06"):
        hmm_filter(trans, a["emit"], a["obs"])
