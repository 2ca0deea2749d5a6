"""Modular-recurrence mixture (docs/science.md#modular-recurrence-mixture): the authors' "pi
experiment" (public code `vishalmisra/bayesian-wind-tunnel`, experiments/construction_boundary/
recurrence_bwt.py: their "construction boundary" experiments, which their README lists beside
Papers I-III, not in Paper III, "Geometric Scaling of Bayesian Inference in LLMs", arXiv 2512.23752).

Each sequence is, with probability pi, a modular linear recurrence x_{t+1} = a x_t + b (mod p)
with (a, b, x_0) uniform, and otherwise L i.i.d. uniform symbols. Position t predicts x_{t+1}
from x_0..x_t with the exact predictive

    P(x_{t+1} = v | x_0..x_t) = w_t q_t(v) + (1 - w_t) / p,   w_t = pi BF_t / (pi BF_t + 1 - pi),

BF_t the Bayes factor of the recurrence against the uniform sequence after t + 1 symbols (1 up
to three symbols, then p, p^2, ... while every transition fits; p^(t-1) for a constant prefix; 0
once falsified) and q_t the recurrence's prediction (`oracle/recurrence.py` writes both out).

Tokens (`tokens`):
- "integer" (the authors' default): the symbols themselves, tokens 0..p-1; L tokens, positions
  0..L-2 scored.
- "opaque" (the authors' `--opaque`): a fresh random relabelling r of Z_p per sequence, given in
  a header [ORD, r(0), ..., r(p-1), SEP] (tokens 0..p-1 for the r values, ORD = 2p, SEP = 2p + 1),
  then the symbols as tokens p + r(x_t). The header reveals r, so the exact predictive is the
  integer one carried through r; classes are the opaque symbols r(x) (the class k is token p + k).
  As the authors do, the prediction of x_0 (at SEP) is not scored: positions H..H+L-2 are, H = p + 2.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..checks import int_at_least, one_of
from ..oracle.recurrence import recurrence_brute_force, recurrence_predictive, require_prime, require_weight
from ._random import permutations
from .base import IGNORE_INDEX, Batch, Task, batch_device, check_batch_size, check_fits
from .registry import register_task

TOKENS = ("integer", "opaque")


@register_task("recurrence")
@dataclass(frozen=True)
class RecurrenceTask(Task):
    """Recurrence x_{t+1} = a x_t + b mod p (probability pi) or i.i.d. uniform symbols; L symbols."""

    p: int = 17
    L: int = 16
    pi: float = 0.5
    tokens: str = "integer"

    name = "recurrence"

    def __post_init__(self) -> None:
        require_prime("p", self.p)
        int_at_least("L", self.L, 2, "one prediction needs two symbols")
        require_weight("pi", self.pi)
        one_of("tokens", self.tokens, TOKENS)
        self.check_size()

    @property
    def opaque(self) -> bool:
        return self.tokens == "opaque"

    @property
    def prefix_len(self) -> int:
        """Tokens before x_0: the opaque header [ORD, r(0..p-1), SEP], or none."""
        return self.p + 2 if self.opaque else 0

    @property
    def vocab_size(self) -> int:
        return 2 * self.p + 2 if self.opaque else self.p

    @property
    def num_classes(self) -> int:
        return self.p

    @property
    def seq_len(self) -> int:
        return self.prefix_len + self.L

    def sequence_bytes(self, dtype: torch.dtype = torch.float32) -> int:
        """Posterior [T, p] plus the oracle's float64 predictive and the relabelling."""
        return super().sequence_bytes(dtype) + (self.L * self.p + self.p) * 8

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        B, p, L = check_batch_size(batch_size), self.p, self.L
        dev = batch_device(generator, device)
        check_fits(self, B, dev, dtype)
        program = torch.rand((B,), generator=generator, device=dev, dtype=torch.float64) < self.pi
        a = torch.randint(0, p, (B,), generator=generator, device=dev)
        b = torch.randint(0, p, (B,), generator=generator, device=dev)
        noise = torch.randint(0, p, (B, L), generator=generator, device=dev)
        x = noise.clone()
        for t in range(1, L):  # loop over time, vectorised over the batch
            x[:, t] = torch.where(program, (a * x[:, t - 1] + b) % p, noise[:, t])
        pred = recurrence_predictive(x, p, self.pi, dtype=torch.float64, check=False)  # [B, L, p]
        latents = {"program": program, "a": a, "b": b, "symbols": x}
        H = self.prefix_len
        if self.opaque:
            relabel = permutations(B, p, generator, dev)  # r: symbol -> opaque class
            pred = torch.empty_like(pred).scatter_(2, relabel.unsqueeze(1).expand(B, L, p), pred)
            classes = relabel.gather(1, x)
            header = torch.cat([torch.full((B, 1), 2 * p, device=dev, dtype=torch.long), relabel,
                                torch.full((B, 1), 2 * p + 1, device=dev, dtype=torch.long)], 1)
            tokens = torch.cat([header, classes + p], 1)
            latents["relabel"] = relabel
        else:
            classes, tokens = x, x
        return self._batch(tokens, classes, pred.to(dtype), H, latents)

    def _batch(self, tokens: Tensor, classes: Tensor, pred: Tensor, H: int, latents: dict) -> Batch:
        """Positions H..H+L-2 predict the class of the next symbol with `pred` [B, L, p]."""
        B, T = tokens.shape
        L = self.L
        mask = torch.zeros((B, T), dtype=torch.bool, device=tokens.device)
        mask[:, H:H + L - 1] = True
        targets = torch.full((B, T), IGNORE_INDEX, dtype=torch.long, device=tokens.device)
        targets[:, H:H + L - 1] = classes[:, 1:]
        posterior = torch.zeros((B, T, self.p), dtype=pred.dtype, device=tokens.device)
        posterior[:, H:H + L - 1] = pred[:, :-1]
        return Batch(tokens, mask, targets, posterior, latents)

    def brute_force_posterior(self, batch: Batch) -> Tensor:
        """The posterior [B, T, p] from the tokens alone, by the sum over all p^2 programs
        (`oracle.recurrence.recurrence_brute_force`): the opaque header is read back to undo r."""
        p, H, L = self.p, self.prefix_len, self.L
        tokens = batch.tokens.cpu()
        B = tokens.shape[0]
        if self.opaque:
            relabel = tokens[:, 1:p + 1]
            symbols = relabel.argsort(1).gather(1, tokens[:, H:] - p)  # r^-1 of each opaque symbol
        else:
            relabel, symbols = torch.arange(p).expand(B, p), tokens
        pred = recurrence_brute_force(symbols, p, self.pi)
        pred = torch.empty_like(pred).scatter_(2, relabel.unsqueeze(1).expand(B, L, p), pred)
        out = torch.zeros((B, tokens.shape[1], p), dtype=torch.float64)
        out[:, H:H + L - 1] = pred[:, :-1]
        return out.to(batch.tokens.device)
