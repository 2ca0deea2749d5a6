"""The belief-state oracle (oracle/belief.py) against independent computations: a literal
enumeration of hidden paths, and hmmlearn's forward pass on the equivalent state-emitting HMM."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from bayesbench.checks import SettingError
from bayesbench.oracle.belief import belief_filter, check_process, path_sum_predictive, stationary_distribution
from bayesbench.tasks.belief_process import even_matrices, golden_mean_matrices, mess3_matrices, rrxor_matrices

PROCESSES = {"mess3": mess3_matrices(0.05, 0.85), "rrxor": rrxor_matrices(), "even": even_matrices(0.5),
             "golden_mean": golden_mean_matrices(0.3),
             # one hidden state: an i.i.d. process (S = 1, the smallest shape)
             "iid": torch.tensor([[[0.2]], [[0.8]]], dtype=torch.float64)}


def enumerate_predictive(t: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """p(x_{t+1} | x_0..t) [B, L, X] by summing every hidden path s_0..s_{t+1} (S^(t+2) terms)."""
    X, S, _ = t.shape
    pi = stationary_distribution(t)

    def word(w: list[int]) -> float:
        total = 0.0
        for path in itertools.product(range(S), repeat=len(w) + 1):
            p = float(pi[path[0]])
            for k, x in enumerate(w):
                p *= float(t[x, path[k], path[k + 1]])
            total += p
        return total

    B, L = tokens.shape
    out = torch.empty((B, L, X), dtype=torch.float64)
    for b in range(B):
        seq = tokens[b].tolist()
        for i in range(L):
            base = word(seq[: i + 1])
            out[b, i] = torch.tensor([word(seq[: i + 1] + [x]) / base for x in range(X)], dtype=torch.float64)
    return out


def possible_words(t: torch.Tensor, L: int, n: int, seed: int = 0) -> torch.Tensor:
    """n words of length L the process can emit (drawn from it)."""
    g = torch.Generator().manual_seed(seed)
    X, S, _ = t.shape
    step = t.permute(1, 0, 2).reshape(S, X * S)
    s = torch.multinomial(stationary_distribution(t).expand(n, S), 1, generator=g).squeeze(1)
    out = torch.empty((n, L), dtype=torch.long)
    for i in range(L):
        e = torch.multinomial(step[s], 1, generator=g).squeeze(1)
        out[:, i], s = e // S, e % S
    return out


@pytest.mark.parametrize("name", sorted(PROCESSES))
@pytest.mark.parametrize("L", [1, 3])
def test_belief_filter_equals_the_enumeration_of_hidden_paths(name, L):
    t = PROCESSES[name]
    tokens = possible_words(t, L, 3)
    beliefs, pred = belief_filter(t, tokens)
    torch.testing.assert_close(pred, enumerate_predictive(t, tokens), atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(path_sum_predictive(t, tokens), pred, atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(beliefs.sum(-1), torch.ones(3, L, dtype=torch.float64))


def hmmlearn_predictive(t: torch.Tensor, tokens: torch.Tensor) -> np.ndarray:
    """The predictive from hmmlearn's forward pass (`score`: log p(word)) on the state-emitting
    HMM equivalent to the edge-emitting one: hidden pairs (s_t, s_{t+1}), emitting x_t with
    T^(x)[i, j] / T[i, j]; p(x | context) = exp(score(context + x) - score(context))."""
    from hmmlearn.hmm import CategoricalHMM

    t64 = t.numpy()
    X, S, _ = t64.shape
    total = t64.sum(0)
    pi = stationary_distribution(t).numpy()
    pairs = [(i, j) for i in range(S) for j in range(S) if total[i, j] > 0]
    P = len(pairs)
    start = np.array([pi[i] * total[i, j] for i, j in pairs])
    trans = np.array([[total[j, k] if j2 == j else 0.0 for j2, k in pairs] for _, j in pairs])
    emit = np.array([[t64[x, i, j] / total[i, j] for x in range(X)] for i, j in pairs])
    model = CategoricalHMM(n_components=P, n_features=X, init_params="", params="")
    model.startprob_, model.transmat_, model.emissionprob_ = start, trans, emit
    B, L = tokens.shape
    out = np.empty((B, L, X))
    for b in range(B):
        seq = tokens[b].tolist()
        for i in range(L):
            base = model.score(np.array(seq[: i + 1]).reshape(-1, 1))
            for x in range(X):
                w = np.array(seq[: i + 1] + [x]).reshape(-1, 1)
                out[b, i, x] = np.exp(model.score(w) - base) if _possible(t, seq[: i + 1] + [x]) else 0.0
    return out


def _possible(t: torch.Tensor, word: list[int]) -> bool:
    v = stationary_distribution(t)
    for x in word:
        v = v @ t[x]
    return bool(v.sum() > 0)


@pytest.mark.parametrize("name", ["mess3", "rrxor", "even", "golden_mean"])
def test_belief_filter_equals_hmmlearns_forward_pass(name):
    t = PROCESSES[name]
    tokens = possible_words(t, 5, 2, seed=1)
    _, pred = belief_filter(t, tokens)
    np.testing.assert_allclose(pred.numpy(), hmmlearn_predictive(t, tokens), atol=1e-9)


def test_stationary_distribution_is_stationary_and_known():
    for t in PROCESSES.values():
        pi = stationary_distribution(t)
        torch.testing.assert_close(pi @ t.sum(0), pi)
    torch.testing.assert_close(stationary_distribution(PROCESSES["mess3"]),
                               torch.full((3,), 1 / 3, dtype=torch.float64))
    torch.testing.assert_close(stationary_distribution(PROCESSES["rrxor"]),
                               torch.tensor([1 / 3, 1 / 6, 1 / 6, 1 / 6, 1 / 6], dtype=torch.float64))
    p = 0.3  # even process: pi_A = 1 / (2 - p)
    torch.testing.assert_close(stationary_distribution(even_matrices(p)),
                               torch.tensor([1 / (2 - p), (1 - p) / (2 - p)], dtype=torch.float64))


@pytest.mark.parametrize("bad,rule", [
    ([[[0.5, 0.0], [0.0, 0.5]], [[0.0, 0.6], [0.5, 0.0]]],
     "must sum over tokens to a stochastic matrix.*row 0 sums to 1.1"),
    ([[[-0.5, 0.0], [0.0, 0.5]], [[1.0, 0.5], [0.5, 0.0]]], "must hold finite non-negative probabilities, found -0.5"),
    ([[0.5, 0.5], [0.5, 0.5]], r"must have shape \[X, S, S\]"),
    ([[[1.0, 0.0], [0.0, 1.0]]], r"must have shape \[X, S, S\] with X >= 2 tokens"),
    ("mess3", "must be a nested list of numbers"),
])
def test_a_non_stochastic_process_is_refused_naming_the_setting_and_the_rule(bad, rule):
    with pytest.raises(SettingError, match=f"^matrices {rule}") as err:
        check_process(bad)
    assert err.value.fields == ("matrices",)


def test_an_impossible_sequence_is_refused_naming_it():
    golden = golden_mean_matrices(0.5)  # no two 0s in a row
    with pytest.raises(ValueError, match="sequence 1 has probability 0 under the process at position 2"):
        belief_filter(golden, torch.tensor([[1, 0, 1], [1, 0, 0]]))
    with pytest.raises(ValueError, match="tokens"):
        belief_filter(golden, torch.tensor([[0, 2]]))
