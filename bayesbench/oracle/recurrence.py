"""Exact posterior of the modular-recurrence mixture (docs/science.md#modular-recurrence-mixture;
the authors' "pi experiment", public code `vishalmisra/bayesian-wind-tunnel`,
experiments/construction_boundary/recurrence_bwt.py: their "construction boundary" experiments,
which their README lists beside Papers I-III, not in Paper III, arXiv 2512.23752).

A sequence x_0, x_1, ... over Z_p (p prime) comes from one of two hypotheses:

- H_P (probability pi): (a, b) ~ Uniform(Z_p^2), x_0 ~ Uniform(Z_p), x_{t+1} = a x_t + b (mod p);
- H_R (probability 1 - pi): every x_t ~ Uniform(Z_p), independently.

With k = t + 1 symbols x_0..x_t seen, let n_k be the number of pairs (a, b) that reproduce every
transition seen. Then P(x_0..x_t | H_P) = n_k / p^3 and P(x_0..x_t | H_R) = p^-k, so the Bayes
factor is BF_k = n_k p^(k-3), and

    n_1 = p^2,  n_2 = p,  and for k >= 3:
        n_k = 1  if x_0 != x_1 and every transition fits a = (x_2 - x_1)(x_1 - x_0)^-1, b = x_1 - a x_0,
        n_k = p  if x_0 = x_1 = ... = x_t (a fixed point: every a fits, with b = x_0 (1 - a)),
        n_k = 0  otherwise (H_P is falsified).

The class posterior is w_k = pi BF_k / (pi BF_k + 1 - pi) (0 once n_k = 0), and the predictive of
x_{t+1} is

    P(x_{t+1} = v | x_0..x_t) = w_k q_k(v) + (1 - w_k) / p,

with q_k the predictive under H_P: uniform for k = 1, and for k = 2 uniform when x_0 != x_1 (as
a ranges over Z_p so does x_2 = a (x_1 - x_0) + x_1) and a point mass on x_1 when x_0 = x_1; for
k >= 3 a point mass on a x_t + b (on x_0 at a fixed point).

`recurrence_predictive` is that closed form, vectorised in float64; `recurrence_brute_force` is
the independent check: the mixture written as a sum over all p^2 programs (a, b), with no use of
the closed form, in log space.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..checks import SettingError, int_at_least, number_in
from .validate import check_sequence_inputs, require_float_dtype


def is_prime(n: int) -> bool:
    """Trial division (p stays small: it is the alphabet)."""
    if n < 2:
        return False
    return all(n % d for d in range(2, math.isqrt(n) + 1))


def require_prime(name: str, p: object) -> int:
    """`p` as an int if it is a prime, else a SettingError naming `name` and the rule (the
    closed form needs Z_p to be a field: x_1 - x_0 must have an inverse)."""
    value = int_at_least(name, p, 2, "the modulus")
    if not is_prime(value):
        raise SettingError(f"{name} must be a prime (the recurrence's modulus: the Bayes factor needs Z_p to be a "
                           f"field), got {value}", (name,))
    return value


def require_weight(name: str, pi: object) -> float:
    """A mixture weight in [0, 1]."""
    return float(number_in(name, pi, 0.0, 1.0, what="the prior probability of a recurrence"))


def _logit_weight(pi: float, log_bf: Tensor) -> Tensor:
    """w = pi BF / (pi BF + 1 - pi) from log BF (-inf where H_P is falsified: w = 0)."""
    if pi == 0.0:
        return torch.zeros_like(log_bf)
    alive = torch.isfinite(log_bf)
    if pi == 1.0:
        return alive.to(log_bf.dtype)
    logit = math.log(pi) - math.log1p(-pi) + torch.where(alive, log_bf, torch.zeros_like(log_bf))
    return torch.where(alive, torch.sigmoid(logit), torch.zeros_like(log_bf))


def recurrence_state(seq: Tensor, p: int) -> tuple[Tensor, Tensor, Tensor]:
    """For every prefix x_0..x_t of seq [B, L] (values in Z_p): (log BF [B, L] float64, -inf where
    H_P is falsified; the H_P point-mass prediction of x_{t+1} [B, L] long; whether H_P predicts a
    point mass there [B, L] bool). Closed form of the module docstring."""
    B, L = seq.shape
    dev = seq.device
    x = seq.long()
    t = torch.arange(L, device=dev)
    log_p = math.log(p)
    # log n_k: 2 log p at t = 0, log p at t = 1; from t = 2 by the case (set below).
    log_count = torch.zeros((B, L), dtype=torch.float64, device=dev)
    log_count[:, 0] = 2 * log_p
    point = torch.zeros((B, L), dtype=torch.bool, device=dev)
    target = x.clone()
    if L >= 2:
        log_count[:, 1] = log_p
        fixed = x[:, 1] == x[:, 0]
        point[:, 1] = fixed  # x_0 = x_1: every consistent (a, b) keeps x_2 = x_1
    if L >= 3:
        inverse = torch.tensor([pow(i, p - 2, p) if i else 0 for i in range(p)], dtype=torch.long, device=dev)
        d0, d1 = (x[:, 1] - x[:, 0]) % p, (x[:, 2] - x[:, 1]) % p
        a = torch.where(fixed, torch.zeros_like(d0), d1 * inverse[d0] % p)
        b = torch.where(fixed, x[:, 0], (x[:, 1] - a * x[:, 0]) % p)
        # transition s -> s+1 fits (a, b); in the fixed-point case every later symbol must be x_0
        nxt = (a.unsqueeze(1) * x + b.unsqueeze(1)) % p  # [B, L]: the program's x_{s+1} from x_s
        fits = nxt[:, :-1] == x[:, 1:]  # [B, L-1]; transitions 0 and 1 fit by construction unless fixed
        fits_upto = torch.cat([torch.ones((B, 1), dtype=torch.bool, device=dev), fits.long().cumprod(1).bool()], 1)
        alive = fits_upto[:, 2:]  # prefixes with k >= 3 (t >= 2): all t transitions fit
        per_case = fixed.to(torch.float64) * log_p  # log n_k: log p at a fixed point, else log 1
        log_count[:, 2:] = torch.where(alive, per_case.unsqueeze(1),
                                       torch.tensor(-math.inf, dtype=torch.float64, device=dev))
        point[:, 2:] = alive
        target[:, 2:] = nxt[:, 2:]
    if L >= 2:
        target[:, 1] = x[:, 1]
    log_bf = log_count + (t - 2).to(torch.float64) * log_p
    return log_bf, target, point


def recurrence_class_posterior(seq: Tensor, p: int, pi: float) -> Tensor:
    """P(H_P | x_0..x_t) [B, L] float64 for seq [B, L]."""
    check_sequence_inputs("seq", seq, require_prime("p", p))
    log_bf, _, _ = recurrence_state(seq, p)
    return _logit_weight(require_weight("pi", pi), log_bf)


def recurrence_predictive(seq: Tensor, p: int, pi: float, *, dtype: torch.dtype = torch.float32,
                          check: bool = True) -> Tensor:
    """Predictive [B, L, p] of x_{t+1} given x_0..x_t at every position t of seq [B, L] (closed form).
    check=False skips the symbol-range check of `seq` (a host read): for the task's own sampler."""
    p = require_prime("p", p)
    pi = require_weight("pi", pi)
    if check:
        check_sequence_inputs("seq", seq, p)
    require_float_dtype("dtype", dtype)
    return recurrence_predictive_reference(seq, p, pi).to(dtype)


def recurrence_predictive_reference(seq: Tensor, p: int, pi: float) -> Tensor:
    """The closed form in float64 (no validation)."""
    log_bf, target, point = recurrence_state(seq, p)
    w = torch.where(point, _logit_weight(pi, log_bf), torch.zeros_like(log_bf))  # no point mass: uniform
    out = ((1.0 - w) / p).unsqueeze(-1).expand(*seq.shape, p).clone()
    return out.scatter_add_(2, target.unsqueeze(-1), w.unsqueeze(-1))


def recurrence_brute_force(seq: Tensor, p: int, pi: float) -> Tensor:
    """The same predictive [B, L, p] as the mixture written out, float64: a sum over the p^2
    programs (a, b) of pi p^-3 [every transition fits] [a x_t + b = v], plus (1 - pi) p^-(t+2),
    normalised over v. O(B L p^2) memory: for small p."""
    p = require_prime("p", p)
    pi = require_weight("pi", pi)
    check_sequence_inputs("seq", seq, p)
    B, L = seq.shape
    dev = seq.device
    x = seq.long()
    grid = torch.arange(p, device=dev)
    a = grid.repeat_interleave(p).view(1, p * p, 1)  # every program (a, b)
    b = grid.repeat(p).view(1, p * p, 1)
    nxt = (a * x.unsqueeze(1) + b) % p  # [B, p^2, L]: program's x_{t+1}
    fits = torch.ones((B, p * p, L), dtype=torch.float64, device=dev)
    if L > 1:
        fits[:, :, 1:] = (nxt[:, :, :-1] == x[:, 1:].unsqueeze(1)).double().cumprod(2)
    hits = torch.nn.functional.one_hot(nxt, p).double() * fits.unsqueeze(-1)  # [B, p^2, L, p]
    program = hits.sum(1)  # [B, L, p]: programs fitting x_0..x_t and predicting v
    t = torch.arange(L, device=dev, dtype=torch.float64).view(1, L, 1)
    log_prog = (math.log(pi) if pi > 0 else -math.inf) - 3 * math.log(p) + torch.log(program)
    log_rand = (math.log1p(-pi) if pi < 1 else -math.inf) - (t + 2) * math.log(p)
    joint = torch.logaddexp(log_prog, log_rand.expand_as(log_prog))
    return torch.softmax(joint, -1)
