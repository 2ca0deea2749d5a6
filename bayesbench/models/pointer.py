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

State (issue 43, `models/state.py`): the head is a module, `PointerLookup`, whose recurrent
reference `recurrent_step` carries what the lookup reads at a query: the final hidden state of
every key position so far (d floats each) and the value token of every pair (integers, not
floats held). A pointer transformer's state is therefore its attention layers' K and V caches plus
ceil(L / 2) x d floats: counted from this reference like every mixer's, not written as a formula.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

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


class PointerLookup(nn.Module):
    """The pointer head as a module (no parameters): `forward(hidden [E, B, T, d], tokens [E, B, T])`
    is the pointer's logits at the last position [E, B, C] (`pointer_logits`), None for a sequence
    it does not apply to (T < 3 or even); `recurrent_step` is its position-by-position reference."""

    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.num_classes = num_classes

    def forward(self, hidden: Tensor, tokens: Tensor) -> Tensor | None:
        T = tokens.shape[-1]
        if T < 3 or T % 2 == 0:
            return None
        return pointer_logits(hidden, tokens, self.num_classes)

    def recurrent_step(self, h: Tensor, token: Tensor, state: dict[str, Tensor] | None
                       ) -> tuple[Tensor, dict[str, Tensor]]:
        """One position: h [E, B, d] (the final hidden state), token [E, B]. At an even position
        t >= 2 (a query, were the sequence to end here) the output is the pointer's logits [E, B, C]
        over the pairs so far, else ABSENT_LOGIT everywhere (the head does not apply there). The
        state: 'keys' [E, B, n, d] the hidden states of the even positions, 'values' [E, B, m] the
        value classes of the odd ones (long), 't' the position (long)."""
        E, B, d = h.shape
        C = self.num_classes
        t = 0 if state is None else int(state["t"])
        keys = h.new_zeros(E, B, 0, d) if state is None else state["keys"]
        values = token.new_zeros(E, B, 0) if state is None else state["values"]
        out = torch.full((E, B, C), ABSENT_LOGIT, dtype=h.dtype, device=h.device)
        if t % 2 == 0:
            if t >= 2:  # a query over the pairs (keys[j], values[j]) so far
                w = torch.softmax(((keys @ h.unsqueeze(-1)).squeeze(-1) / math.sqrt(d)).float(), -1).to(h.dtype)
                last, present = last_occurrence(values, C)
                logw = torch.log(w.gather(-1, last) + POINTER_EPS)
                out = torch.where(present, logw, out)
            keys = torch.cat([keys, h.unsqueeze(2)], 2)
        else:
            values = torch.cat([values, (token - C).unsqueeze(2)], 2)
        return out, {"keys": keys, "values": values, "t": torch.tensor(t + 1)}


def combine_pointer(logits: Tensor, ptr: Tensor | None, mode: str) -> Tensor:
    """The head's logits [E, B, T, C] with the last position replaced by (or added to) the pointer's
    [E, B, C]; unchanged where it does not apply (ptr None). `apply_pointer` in two steps."""
    if mode == "none" or ptr is None:
        return logits
    ptr = ptr.to(logits.dtype)
    last = ptr if mode == "replace" else logits[..., -1, :] + ptr
    return torch.cat([logits[..., :-1, :], last.unsqueeze(-2)], -2)
