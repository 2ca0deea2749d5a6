"""The bijection's positions by case, from the keys that generated them (the task's latents).

At a value position the posterior is a point mass when the key was seen at an earlier pair
(**repeated**: a retrieval) and uniform over the values not yet seen when it was not (**new**:
an elimination); the final query is a retrieval. `BijectionTask.case_masks` gives the [N, T]
masks; `bayesbench.scoring.by_case` scores a model on each, and the trainer's learning curves
(`training/curves.py`) record the KL per case.
"""

from __future__ import annotations

import torch
from torch import Tensor

CASES = ("repeated", "new", "query")  # the bijection's primary split
DETAILS = ("free", "lag")  # finer splits: new keys by the values left, repeated keys by pairs back


def bijection_key_structure(keys: Tensor, V: int) -> tuple[Tensor, Tensor, Tensor]:
    """For keys [N, K] (the pairs' keys in order, as `BijectionTask` stores them in latents):
    (repeated [N, K] bool: key seen at an earlier pair; free [N, K] long: values not yet seen
    before pair k, i.e. V minus the distinct keys before k; lag [N, K] long: pairs back to the
    key's last earlier occurrence, 0 where it is new)."""
    N, K = keys.shape
    pos = torch.arange(K, device=keys.device)
    same = keys.unsqueeze(2) == keys.unsqueeze(1)  # [N, k, j]: key k equals key j
    before = pos.view(1, K, 1) > pos.view(1, 1, K)  # j < k
    earlier = same & before
    repeated = earlier.any(2)
    first = ~repeated
    free = V - (first.long().cumsum(1) - first.long())  # distinct keys strictly before k
    last = torch.where(earlier, pos.view(1, 1, K), torch.full((), -1, device=keys.device)).amax(2)
    lag = torch.where(repeated, pos.view(1, K) - last, torch.zeros_like(last))
    return repeated, free, lag


def bijection_case_masks(task, batch, detail: tuple[str, ...] = ()) -> dict[str, Tensor]:
    """{case name: [N, T] bool mask} of a bijection batch, each within `batch.mask`; cases no
    position falls in are left out (one host read per case). `detail` adds DETAILS' splits:
    `new:free=K` (K values left) and `repeated:lag=D` (last seen D pairs back)."""
    unknown = [d for d in detail if d not in DETAILS]
    if unknown:
        raise ValueError(f"detail must be among {DETAILS}, got {unknown}")
    keys = batch.latents.get("keys")
    if keys is None or keys.dim() != 2 or keys.shape[0] != batch.batch_size:
        raise ValueError("batch.latents['keys'] must hold the [N, L(+1)] keys of the sampled sequences "
                         "(as BijectionTask.sample stores them)")
    L = task.L
    repeated, free, lag = bijection_key_structure(keys[:, :L], task.V)
    N, T = batch.tokens.shape
    value_pos = torch.arange(0, 2 * L, 2, device=keys.device)

    def at_values(flags: Tensor) -> Tensor:
        m = torch.zeros((N, T), dtype=torch.bool, device=keys.device)
        m[:, value_pos] = flags
        return m & batch.mask

    masks = {"repeated": at_values(repeated), "new": at_values(~repeated)}
    if task.query:
        q = torch.zeros((N, T), dtype=torch.bool, device=keys.device)
        q[:, 2 * L] = True
        masks["query"] = q & batch.mask
    if "free" in detail:
        for k in range(task.V, 0, -1):
            masks[f"new:free={k}"] = at_values(~repeated & (free == k))
    if "lag" in detail:
        for d in range(1, L):
            masks[f"repeated:lag={d}"] = at_values(repeated & (lag == d))
    return {name: m for name, m in masks.items() if bool(m.any())}
