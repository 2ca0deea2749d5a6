"""Bijection elimination (docs/science.md#bijection-elimination; Paper I, Sec. 3.1): infer a fresh
random bijection from its pairs.

Tokens: keys 0..V-1, values V..2V-1. A sequence is [x1, y1, ..., xL, yL] (+ [q] with a final
query), y_k = V + pi(x_k). The prediction of pi(x_k) is made at x_k's own position (the model's
next token there is y_k); the prediction of pi(q) at the query's position. Classes are value
indices 0..V-1.

Variants:
- "paper" (Paper I): keys a random permutation, L = V pairs, no query, value positions scored;
  H_Bayes(k) = log2(V - k + 1).
- "code" (the authors' scripts): keys drawn with replacement, L = 19, a final query drawn from the
  context keys; value positions and the query are both scored by default (the authors supervise
  only the query, `supervise="query"`, whose posterior is always a point mass).

`supervise="authors"` is the authors' training targets with `--train_all_values`: the values
and the query as "both", and also every value token's own position, whose target is that same
value (the input there: a copy target; its posterior, given the value itself, is a point mass).
Evaluation never scores those copy positions (`scoring_task`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from ..checks import SettingError, boolean, int_at_least, one_of, positive_int
from ..oracle import bijection_posterior
from ._random import permutations
from .base import IGNORE_INDEX, Batch, Task, batch_device, check_batch_size, check_fits
from .case_masks import CASES, bijection_case_masks
from .registry import register_task

VARIANTS: dict[str, dict[str, object]] = {
    "paper": {"L": None, "keys": "permutation", "query": False, "supervise": "values"},
    "code": {"L": 19, "keys": "replacement", "query": True, "supervise": "both"},
}
SUPERVISE = ("values", "query", "both", "authors")
# The evaluations of a bijection run by name (`scoring.evaluate.evaluation_tasks`): name -> supervise.
SCORED_SETS = {"values": "values", "values+query": "both", "query": "query"}


@register_task("bijection")
@dataclass(frozen=True)
class BijectionTask(Task):
    """Bijection elimination over V symbols; None fields take the variant's default."""

    V: int = 20
    variant: str = "paper"
    L: int | None = None
    keys: str | None = None
    query: bool | None = None
    supervise: str | None = None

    name = "bijection"
    CASES = CASES

    def __post_init__(self) -> None:
        one_of("variant", self.variant, tuple(VARIANTS))
        for key, default in VARIANTS[self.variant].items():
            if getattr(self, key) is None:
                object.__setattr__(self, key, self.V if key == "L" and default is None else default)
        int_at_least("V", self.V, 2)
        positive_int("L", self.L, "number of pairs")
        one_of("keys", self.keys, ("permutation", "replacement"))
        boolean("query", self.query)
        if self.keys == "permutation" and self.pairs > self.V:
            raise SettingError(f"L must be <= V when keys='permutation' (no repeats), got L={self.L}, V={self.V}",
                               ("L", "V", "keys"))
        one_of("supervise", self.supervise, SUPERVISE)
        if self.supervise in ("query", "both", "authors") and not self.query:
            raise SettingError(f"supervise={self.supervise!r} needs query=True", ("supervise", "query"))
        self.check_size()

    def case_masks(self, batch: Batch, detail: tuple[str, ...] = ()) -> dict:
        """Repeated keys, new keys and the query (`tasks/case_masks.py`; `detail`: finer splits)."""
        return bijection_case_masks(self, batch, detail)

    def scoring_task(self) -> "BijectionTask":
        """The task as scored: training-only copy targets ("authors") scored as "both"."""
        return dataclasses.replace(self, supervise="both") if self.supervise == "authors" else self

    @property
    def pairs(self) -> int:
        """L, as __post_init__ resolved it (the field is None only until then)."""
        if self.L is None:
            raise TypeError("BijectionTask.L is unset: __post_init__ resolves it from the variant")
        return self.L

    @property
    def vocab_size(self) -> int:
        return 2 * self.V

    @property
    def num_classes(self) -> int:
        return self.V

    @property
    def seq_len(self) -> int:
        return 2 * self.pairs + int(bool(self.query))

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        B, V, L = check_batch_size(batch_size), self.V, self.pairs
        dev = batch_device(generator, device)
        check_fits(self, B, dev, dtype)
        perm = permutations(B, V, generator, dev)  # pi: key -> value index
        if self.keys == "permutation":
            x = permutations(B, V, generator, dev)[:, :L]
        else:
            x = torch.randint(0, V, (B, L), generator=generator, device=dev)
        if self.query:
            pick = torch.randint(0, L, (B, 1), generator=generator, device=dev)
            x = torch.cat([x, x.gather(1, pick)], 1)
        y = perm.gather(1, x)
        post_pairs = bijection_posterior(x, y, V, dtype=dtype, check=False)  # [B, L(+1), V]; right by construction

        T = self.seq_len
        tokens = torch.empty((B, T), dtype=torch.long, device=dev)
        tokens[:, 0 : 2 * L : 2] = x[:, :L]
        tokens[:, 1 : 2 * L : 2] = y[:, :L] + V
        pred_pos = torch.arange(0, 2 * L, 2, device=dev)  # where pi(x_k) is predicted
        if self.query:
            tokens[:, 2 * L] = x[:, L]
            pred_pos = torch.cat([pred_pos, torch.tensor([2 * L], device=dev)])
        scored = torch.zeros(pred_pos.numel(), dtype=torch.bool, device=dev)
        if self.supervise in ("values", "both", "authors"):
            scored[:L] = True
        if self.supervise in ("query", "both", "authors"):
            scored[L] = True
        mask = torch.zeros((B, T), dtype=torch.bool, device=dev)
        mask[:, pred_pos[scored]] = True
        posterior = torch.zeros((B, T, V), dtype=dtype, device=dev)
        posterior[:, pred_pos[scored]] = post_pairs[:, scored]
        targets = torch.full((B, T), IGNORE_INDEX, dtype=torch.long, device=dev)
        targets[:, pred_pos[scored]] = y[:, scored]
        if self.supervise == "authors":  # each value's own position: the value itself (a copy)
            copy = torch.arange(1, 2 * L, 2, device=dev)
            mask[:, copy] = True
            targets[:, copy] = y[:, :L]
            posterior[:, copy] = torch.nn.functional.one_hot(y[:, :L], V).to(dtype)
        return Batch(tokens, mask, targets, posterior, {"perm": perm, "keys": x, "values": y})
