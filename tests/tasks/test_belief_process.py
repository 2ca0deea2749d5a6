"""The belief-state processes (tasks/belief_process.py) as Shai et al. define them
("Transformers represent belief state geometry in their residual stream", arXiv 2405.15943):
their published matrices, their stationary facts, and that the hidden state is not observable
from the recent tokens where the definition says so (a harness that leaks it measures an artefact)."""

from __future__ import annotations

import itertools

import pytest
import torch

from bayesbench.checks import SettingError
from bayesbench.oracle.belief import stationary_distribution
from bayesbench.tasks import get_task
from bayesbench.tasks.belief_process import golden_mean_matrices, mess3_matrices, rrxor_matrices


def word_beliefs(t: torch.Tensor, k: int) -> list[tuple[tuple[int, ...], float, torch.Tensor]]:
    """Every word of length k with its probability and the belief after it (from stationarity)."""
    pi = stationary_distribution(t)
    out = []
    for w in itertools.product(range(t.shape[0]), repeat=k):
        v = pi
        for x in w:
            v = v @ t[x]
        p = float(v.sum())
        if p > 0:
            out.append((w, p, v / p))
    return out


def test_mess3_has_its_published_matrices():
    """Marzen and Crutchfield's Mess3 at Shai et al.'s x = 0.05, alpha = 0.85, entries by hand."""
    t = get_task("mess3").process_matrices()
    a, b, x, y = 0.85, 0.075, 0.05, 0.9
    torch.testing.assert_close(t[0], torch.tensor([[a * y, b * x, b * x], [a * x, b * y, b * x], [a * x, b * x, b * y]],
                                                  dtype=torch.float64))
    torch.testing.assert_close(t[2], torch.tensor([[b * y, b * x, a * x], [b * x, b * y, a * x], [b * x, b * x, a * y]],
                                                  dtype=torch.float64))
    for name in ("mess3", "rrxor", "even", "golden_mean", "process"):
        total = get_task(name).process_matrices().sum(0)
        torch.testing.assert_close(total.sum(-1), torch.ones(total.shape[0], dtype=torch.float64))
        assert (total >= 0).all()


def test_mess3_belief_set_is_the_fractal_of_its_stationary_start():
    """Every word of length k leads to its own belief (3^k points, no two merge: the set is a
    fractal, never a finite set), every belief strictly inside the simplex (no word reveals the
    state), and the beliefs average to the stationary distribution (the belief is a martingale)."""
    t = mess3_matrices(0.05, 0.85)
    for k in (1, 3, 5):
        words = word_beliefs(t, k)
        points = torch.stack([v for _, _, v in words])
        assert len({tuple(round(float(c), 12) for c in p) for p in points}) == 3 ** k
        assert points.min() > 1e-3 and points.max() < 1 - 1e-3
        mean = sum(p * v for _, p, v in words)
        torch.testing.assert_close(mean, torch.full((3,), 1 / 3, dtype=torch.float64))


def test_rrxor_has_36_belief_states_and_no_token_reveals_its_state():
    """RRXOR's mixed-state presentation has 36 distinct beliefs (the start included), all reached
    within 8 tokens; no single token, and no pair, says which state emitted it."""
    t = rrxor_matrices()
    seen = {tuple(stationary_distribution(t).tolist())}
    for k in range(1, 9):
        seen |= {tuple(round(float(c), 12) for c in v) for _, _, v in word_beliefs(t, k)}
    assert len(seen) == 36
    for k in (1, 2):
        assert all(float(v.max()) < 1.0 for _, _, v in word_beliefs(t, k))


def test_the_hidden_state_is_not_a_function_of_the_last_tokens():
    """The artefact the issue names: a process whose token names its next state makes the
    belief one-hot after one token (the 'geometry' is then a lookup table). Mess3, RRXOR and the
    even process: two histories ending in the same last k tokens give different beliefs; the
    golden-mean process IS order-1 Markov by definition (the state after a 0 is B), and a leaked
    Mess3 (token = next state) is caught by the same test."""
    def state_follows_the_last_tokens(t: torch.Tensor, k: int, n: int = 6) -> bool:
        by_suffix: dict = {}
        for w, _, v in word_beliefs(t, n):
            by_suffix.setdefault(w[-k:], []).append(v)
        return all(torch.allclose(vs[0], v) for vs in by_suffix.values() for v in vs)

    for name in ("mess3", "rrxor", "even"):
        t = get_task(name).process_matrices()
        for k in (1, 2, 3):
            assert not state_follows_the_last_tokens(t, k), (name, k)
    assert state_follows_the_last_tokens(golden_mean_matrices(0.5), 1)
    leaked = mess3_matrices(0.05, 0.85).clone()
    for k in range(3):  # the token names the next state: p(x = k, s' = j | i) = 0 unless j = k
        keep = torch.zeros(3, 3, dtype=torch.float64)
        keep[:, k] = 1.0
        leaked[k] = leaked[k] * keep
    leaked = leaked / leaked.sum(0).sum(-1, keepdim=True)
    assert state_follows_the_last_tokens(leaked, 1)


def test_the_sampler_draws_the_hidden_path_the_beliefs_track():
    task = get_task("mess3", L=12)
    batch = task.sample(4000, torch.Generator().manual_seed(0), dtype=torch.float64)
    beliefs, states = batch.latents["beliefs"], batch.latents["states"]
    # calibration of the belief itself: E[onehot(state) - belief] = 0 at every position
    resid = torch.nn.functional.one_hot(states, 3).double() - beliefs
    z = resid.mean(0) / (resid.std(0) / 4000 ** 0.5)
    assert z.abs().max() < 5
    assert (states[:, 0:1] != states).any()  # the hidden state moves


def test_your_own_process_is_checked_and_round_trips_through_its_config():
    from bayesbench.tasks.registry import task_from_config

    mess = mess3_matrices(0.05, 0.85).tolist()
    task = get_task("process", matrices=mess, L=5)
    assert task.vocab_size == 3 and task.states == 3
    again = task_from_config(__import__("json").loads(__import__("json").dumps(task.config())))
    assert again == task
    torch.testing.assert_close(again.process_matrices(), mess3_matrices(0.05, 0.85))
    bad = [[[0.5, 0.0], [0.0, 0.5]], [[0.0, 0.6], [0.5, 0.0]]]
    with pytest.raises(SettingError, match=r"^matrices must sum over tokens to a stochastic matrix \(each row of "
                                           r"sum_x T\[x\] sums to 1\): row 0 sums to 1.1") as err:
        get_task("process", matrices=bad)
    assert err.value.fields == ("matrices",)
    reducible = [[[1.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 1.0]]]
    with pytest.raises(SettingError, match="^matrices must have a unique stationary distribution"):
        get_task("process", matrices=reducible)


@pytest.mark.parametrize("name,config,message", [
    ("mess3", {"x": 0.5}, r"x must be a number in \(0, 0.5\)"),
    ("mess3", {"alpha": 1.0}, r"alpha must be a number in \(0, 1\)"),
    ("even", {"p": 0}, r"p must be a number in \(0, 1\)"),
    ("rrxor", {"L": 1}, "L must be an integer >= 2"),
])
def test_bad_settings_are_refused(name, config, message):
    with pytest.raises(SettingError, match=message):
        get_task(name, **config)
