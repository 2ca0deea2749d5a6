"""The authors' pointer head for the bijection's final query (their Paper I training script).

The authors' `experiments/paper1_bijection/train.py` (repository `vishalmisra/bayesian-wind-
tunnel`, commit 670c6d6; docs/reproducing.md) builds its transformer with a pointer lookup in
"replace" mode: at the last position (the query key), the logits are replaced by

    log(w_j + 1e-9) at the class of value j,   -1e9 at every class no context value has,

where w = softmax_j(h_query . h_key_j / sqrt(d)) over the context pairs j, h the final hidden
states (after the last norm), h_key_j the one at key position 2j and value j the token at 2j+1.
The retrieval is then a copy mechanism built into the head: the query's loss trains the hidden
states through w, and never the LM head at that position. "add" mode adds the same values to the
head's logits instead.

When a value occurs at more than one pair (a repeated key), the authors write the entries with
`Tensor.scatter_`, so one of the duplicates' weights is kept, not their sum; PyTorch leaves which
one unspecified (the CPU kernel writes in order, so the last). This head keeps the last,
deterministically.

It applies to sequences of odd length >= 3 (pairs, then a query key), the bijection's layout:
keys are tokens 0..C-1 and values C..2C-1 for C value classes.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

POINTER_MODES = ("none", "replace", "add")
POINTER_EPS = 1e-9  # the authors' log(w + eps)
ABSENT_LOGIT = -1e9  # the authors' logit for a value no context pair has


def check_pointer_shape(mode: str, vocab_size: int, num_classes: int, header_len: int) -> None:
    """The pointer head needs the bijection's token layout (2C tokens: keys then values) and no header."""
    if mode not in POINTER_MODES:
        raise ValueError(f"pointer must be one of {POINTER_MODES}, got {mode!r}")
    if mode != "none" and (vocab_size != 2 * num_classes or header_len):
        raise ValueError(f"pointer={mode!r} needs the bijection's tokens (keys 0..C-1, values C..2C-1: vocab_size = "
                         f"2 x num_classes, no header); this task has vocab_size {vocab_size}, num_classes "
                         f"{num_classes}, header_len {header_len}")


def last_occurrence(ids: Tensor, num_classes: int) -> tuple[Tensor, Tensor]:
    """For ids [..., L] in 0..C-1: (index [..., C] of the last j with ids[j] == c (0 where none),
    present [..., C] bool)."""
    L = ids.shape[-1]
    onehot = torch.nn.functional.one_hot(ids, num_classes)  # [..., L, C]
    rank = onehot * torch.arange(1, L + 1, device=ids.device).unsqueeze(-1)  # j + 1 where ids[j] == c
    last = rank.amax(-2)  # [..., C]
    return (last - 1).clamp(min=0), last > 0


def pointer_logits(hidden: Tensor, tokens: Tensor, num_classes: int) -> Tensor:
    """The pointer's logits at the last position: hidden [E, B, T, d] (final, normed), tokens
    [E, B, T] with T odd -> [E, B, C]."""
    T, d = hidden.shape[-2], hidden.shape[-1]
    keys = hidden[..., 0 : T - 1 : 2, :]  # [E, B, L, d]
    query = hidden[..., T - 1, :]  # [E, B, d]
    sim = (keys @ query.unsqueeze(-1)).squeeze(-1) / math.sqrt(d)  # [E, B, L]
    w = torch.softmax(sim.float(), -1).to(hidden.dtype)
    values = tokens[..., 1 : T - 1 : 2] - num_classes  # class ids of the context values
    last, present = last_occurrence(values, num_classes)
    logw = torch.log(w.gather(-1, last) + POINTER_EPS)
    return torch.where(present, logw, torch.full_like(logw, ABSENT_LOGIT))


def apply_pointer(logits: Tensor, hidden: Tensor, tokens: Tensor, mode: str) -> Tensor:
    """The head's logits [E, B, T, C] with the last position replaced by (or added to) the
    pointer's, for a sequence of pairs and a query (odd T >= 3); unchanged otherwise."""
    T = tokens.shape[-1]
    if mode == "none" or T < 3 or T % 2 == 0:
        return logits
    ptr = pointer_logits(hidden, tokens, logits.shape[-1]).to(logits.dtype)
    last = ptr if mode == "replace" else logits[..., T - 1, :] + ptr
    return torch.cat([logits[..., : T - 1, :], last.unsqueeze(-2)], -2)
