"""Belief-state processes (docs/science.md#belief-state-processes): next-token prediction on a
FIXED edge-emitting HMM, whose exact predictive comes from the observer's belief state.

Shai et al. 2024, "Transformers represent belief state geometry in their residual stream"
(arXiv 2405.15943), train transformers on sequences of such processes and find the belief
states (the "mixed-state presentation") linearly in the residual stream. Every sequence comes
from the same process; what is inferred in context is the hidden state, never the process. The
hidden state starts from the stationary distribution and position t predicts x_{t+1} from
x_0..x_t with p(x | eta_t) = eta_t T^(x) 1, eta_t = eta_{t-1} T^(x_t) / (eta_{t-1} T^(x_t) 1)
(`bayesbench.oracle.belief_filter`). One module for the concept: the four published processes
and a user's own (`process`) share the sampler, the oracle and the checks; they differ only in
their matrices T^(x)[i, j] = p(token x, next state j | state i):

- `mess3` (Marzen and Crutchfield 2017, "Nearly maximally predictive features and their
  dimensions", arXiv 1702.08565): 3 states, 3 tokens,
  T^(k)[i, j] = (alpha if j = k else (1 - alpha)/2) * (1 - 2x if i = j else x)
  (`mess3_matrices`). Every token can lead to every state, so the hidden state is never a
  function of the recent tokens; its belief set is a fractal in the 2-simplex. Shai et al.'s
  parameters: x = 0.05, alpha = 0.85.
- `rrxor` (random-random-XOR; Crutchfield and Feldman 2003, "Regularities unseen, randomness
  observed", Chaos 13): two fair random bits, then their XOR, repeated. Its
  5-state epsilon-machine (S, 0, 1, T, F): the token never says where in the 3-cycle the
  process is; only a history can (the observer synchronises, or not, over several tokens).
- `even` (the even process; Crutchfield and Feldman 2003): blocks of 1s of even length between
  0s; 2 states, not Markov of any finite order.
- `golden_mean` (no two 0s in a row): 2 states; Markov of order 1 (the state IS the last token,
  by its definition: the contrast case).
- `process`: your own matrices (`--task-args 'matrices=[[[...]]]'`), refused unless their sum
  over tokens is row-stochastic, with a unique stationary distribution.

Latents: `states` [B, L] (the hidden state after each token) and `beliefs` [B, L, S] (the exact
belief after tokens 0..t: the belief-geometry probe's target, `bayesbench belief-probe`).
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass

import torch
from torch import Tensor

from ..checks import SettingError, int_at_least, number_in
from ..oracle.belief import belief_filter, check_process, path_sum_predictive, stationary_distribution
from ._random import categorical
from .base import Batch, Task, batch_device, check_batch_size, check_fits
from .next_symbol import next_symbol_batch
from .registry import register_task


def mess3_matrices(x: float, alpha: float) -> Tensor:
    """Mess3's labelled transition matrices [3, 3, 3] (Marzen and Crutchfield 2017): with
    beta = (1 - alpha)/2 and y = 1 - 2x, T^(k)[i, j] = (alpha if j = k else beta) * (y if i = j
    else x): the hidden state moves (x to each other state, y stays) and the token names the new
    state with weight alpha, another with beta each. Rows of sum_k T^(k) sum to
    (alpha + 2 beta)(y + 2x) = 1."""
    beta, y = (1.0 - alpha) / 2.0, 1.0 - 2.0 * x
    t = torch.empty((3, 3, 3), dtype=torch.float64)
    for k in range(3):
        for i in range(3):
            for j in range(3):
                t[k, i, j] = (alpha if j == k else beta) * (y if i == j else x)
    return t


def rrxor_matrices() -> Tensor:
    """RRXOR's epsilon-machine [2, 5, 5], states (S, 0, 1, T, F): S emits a fair bit b1 and goes
    to b1; state b1 emits a fair bit b2 and goes to T if b1 XOR b2 = 1, else F; T emits 1 and F
    emits 0, both back to S."""
    S, Z, O, T, F = range(5)
    t = torch.zeros((2, 5, 5), dtype=torch.float64)
    t[0, S, Z] = t[1, S, O] = 0.5
    t[0, Z, F] = t[1, Z, T] = 0.5
    t[0, O, T] = t[1, O, F] = 0.5
    t[1, T, S] = t[0, F, S] = 1.0
    return t


def even_matrices(p: float) -> Tensor:
    """The even process [2, 2, 2], states (A, B): A emits 0 and stays (p) or emits 1 and goes to
    B (1 - p); B emits 1 and goes back to A: every block of 1s has even length."""
    t = torch.zeros((2, 2, 2), dtype=torch.float64)
    t[0, 0, 0], t[1, 0, 1], t[1, 1, 0] = p, 1.0 - p, 1.0
    return t


def golden_mean_matrices(p: float) -> Tensor:
    """The golden-mean process [2, 2, 2], states (A, B): A emits 1 and stays (p) or emits 0 and
    goes to B (1 - p); B emits 1 and goes back to A: no two 0s in a row (B iff the last token was 0)."""
    t = torch.zeros((2, 2, 2), dtype=torch.float64)
    t[1, 0, 0], t[0, 0, 1], t[1, 1, 0] = p, 1.0 - p, 1.0
    return t


def check_irreducible(t: Tensor, name: str) -> None:
    """A unique stationary distribution (the system [T' - I; 1'] of full rank), else a
    SettingError naming `name`: the belief starts there, so it must be defined."""
    S = t.shape[1]
    a = torch.cat([t.sum(0).T - torch.eye(S, dtype=torch.float64), torch.ones((1, S), dtype=torch.float64)])
    if int(torch.linalg.matrix_rank(a)) < S:
        raise SettingError(f"{name} must have a unique stationary distribution (sum_x T[x] irreducible): the "
                           f"observer's belief starts there", (name,))


@dataclass(frozen=True)
class BeliefProcessTask(Task):
    """Next-token prediction on a fixed HMM of L tokens; subclasses give `process_matrices()`."""

    L: int = 16

    def __post_init__(self) -> None:
        int_at_least("L", self.L, 2, "one prediction needs two tokens")
        self.check_size()

    @abstractmethod
    def process_matrices(self) -> Tensor:
        """The labelled transition matrices T^(x) [X, S, S] (float64, checked)."""

    @property
    def states(self) -> int:
        return self.process_matrices().shape[1]

    @property
    def vocab_size(self) -> int:
        return self.process_matrices().shape[0]

    @property
    def num_classes(self) -> int:
        return self.vocab_size

    @property
    def seq_len(self) -> int:
        return self.L

    def sequence_bytes(self, dtype: torch.dtype = torch.float32) -> int:
        """Posterior [L, X], beliefs [L, S] in float64 and states [L], and the oracle's per-position T^(x) [L, S, S]."""
        S = self.states
        return super().sequence_bytes(dtype) + self.L * (S * 8 + 8 + S * S * 8)

    def stationary(self) -> Tensor:
        """The stationary distribution of the hidden state (float64 [S]), where every sequence starts."""
        return stationary_distribution(self.process_matrices())

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        B, L = check_batch_size(batch_size), self.L
        dev = batch_device(generator, device)
        check_fits(self, B, dev, dtype)
        t = self.process_matrices().to(dev)
        X, S, _ = t.shape
        step = t.permute(1, 0, 2).reshape(S, X * S)  # row i: p(token x, next state j | i) at x * S + j
        s = categorical(self.stationary().to(dev).expand(B, S), generator)
        tokens = torch.empty((B, L), dtype=torch.long, device=dev)
        states = torch.empty((B, L), dtype=torch.long, device=dev)
        for i in range(L):  # loop over time, vectorised over the batch
            edge = categorical(step[s], generator)
            tokens[:, i], s = edge // S, edge % S
            states[:, i] = s
        beliefs, predictive = belief_filter(t, tokens, check=False)  # drawn from the process itself
        return next_symbol_batch(tokens, predictive.to(dtype), {"states": states, "beliefs": beliefs.to(dtype)})

    def brute_force_posterior(self, batch: Batch) -> Tensor:
        """The predictive as a ratio of path sums (`oracle.belief.path_sum_predictive`): every
        hidden path summed by matrix products, no belief normalised on the way (tasks/check.py)."""
        out = path_sum_predictive(self.process_matrices(), batch.tokens.cpu()).to(batch.tokens.device)
        out[:, -1] = 0.0
        return out


@register_task("mess3")
@dataclass(frozen=True)
class Mess3Task(BeliefProcessTask):
    """Mess3 (3 states, 3 tokens) with Shai et al.'s parameters x = 0.05, alpha = 0.85."""

    x: float = 0.05
    alpha: float = 0.85

    name = "mess3"

    def __post_init__(self) -> None:
        number_in("x", self.x, 0, 0.5, low_open=True, high_open=True,
                  what="the weight of each other state in a transition; 1 - 2x stays")
        number_in("alpha", self.alpha, 0, 1, low_open=True, high_open=True,
                  what="the weight of the token naming the next state")
        super().__post_init__()

    def process_matrices(self) -> Tensor:
        return mess3_matrices(self.x, self.alpha)


@register_task("rrxor")
@dataclass(frozen=True)
class RRXORTask(BeliefProcessTask):
    """Random-random-XOR: two fair bits then their XOR (5 hidden states, 2 tokens)."""

    name = "rrxor"

    def process_matrices(self) -> Tensor:
        return rrxor_matrices()


@register_task("even")
@dataclass(frozen=True)
class EvenTask(BeliefProcessTask):
    """The even process (2 states, 2 tokens): 1s come in blocks of even length."""

    p: float = 0.5

    name = "even"

    def __post_init__(self) -> None:
        number_in("p", self.p, 0, 1, low_open=True, high_open=True, what="the probability of a 0 from state A")
        super().__post_init__()

    def process_matrices(self) -> Tensor:
        return even_matrices(self.p)


@register_task("golden_mean")
@dataclass(frozen=True)
class GoldenMeanTask(BeliefProcessTask):
    """The golden-mean process (2 states, 2 tokens): no two 0s in a row."""

    p: float = 0.5

    name = "golden_mean"

    def __post_init__(self) -> None:
        number_in("p", self.p, 0, 1, low_open=True, high_open=True, what="the probability of a 1 from state A")
        super().__post_init__()

    def process_matrices(self) -> Tensor:
        return golden_mean_matrices(self.p)


@register_task("process")
@dataclass(frozen=True)
class ProcessTask(BeliefProcessTask):
    """Your own process: `matrices[x][i][j]` = p(token x, next state j | state i), nested lists
    (default: the even process at p = 1/2), checked by `oracle.belief.check_process` and
    `check_irreducible` when the task is built."""

    matrices: tuple = (((0.5, 0.0), (0.0, 0.0)), ((0.0, 0.5), (1.0, 0.0)))

    name = "process"

    def __post_init__(self) -> None:
        t = check_process(self.matrices, "matrices")
        check_irreducible(t, "matrices")
        # stored as nested tuples (a frozen, hashable config; a JSON list from the store is the same process)
        object.__setattr__(self, "matrices", tuple(tuple(tuple(float(v) for v in row) for row in m)
                                                   for m in t.tolist()))
        super().__post_init__()

    def process_matrices(self) -> Tensor:
        return torch.tensor(self.matrices, dtype=torch.float64)
