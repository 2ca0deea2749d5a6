"""Probe and evaluation sets drawn per seed (issue 44, point 6).

The studies' unit of replication is the seed: each interval is over seeds. A probe batch or an
evaluation set drawn once and shared by every seed leaves its own sampling variance out of those
intervals (16 probe sequences are a small sample of the task), so by default each seed e gets its
own sets, drawn from

    member_set_seed(task, purpose, e) = eval_seed(task, f"{purpose}:seed={e}")

an evaluation seed (`training.seeds.eval_seed`: at or above 2^61, where no training-data stream
and no replica stream draws: those are `data_seed`s, below 2^61), fixed by the task's
configuration, the set's purpose ("profile-probe", "profile-eval", "profile-heldout-law",
"geometry") and the seed. Two seeds get different sets; the same seed the same set in every
study that asks for it (so a profile and a geometry of one seed read the sets of that seed).

`sets="shared"` is the behaviour before (one set for every seed, from `eval_seed(task, purpose)`
or the task's main evaluation seed): the stored studies of 2026-12-06 and before were measured so,
and a study records which it used (`config["sets"]`; absent: shared).

A member's sets are stacked along a leading member axis for the ensemble's forward
(`stack_sets`); `calibration` scores each member against its own set's exact posterior.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..tasks import Batch, Task
from ..training.seeds import eval_seed

SETS = ("per-seed", "shared")


def member_set_seed(task: Task, purpose: str, seed: int) -> int:
    """The evaluation seed of seed `seed`'s `purpose` set (module docstring): never a training seed."""
    return eval_seed(task, f"{purpose}:seed={int(seed)}")


def member_sets(task: Task, n: int, purpose: str, seeds: list[int], sets: str = "per-seed", *,
                shared_seed: int | None = None, cache_dir: str | None = None) -> list[Batch]:
    """One batch of `n` sequences per seed: each seed's own (`sets` "per-seed"), or one batch for all
    (`sets` "shared", drawn from `shared_seed`, default the task's main evaluation seed)."""
    from ..scoring.evaluate import eval_set

    if sets not in SETS:
        raise ValueError(f"sets must be one of {SETS}, got {sets!r}")
    if sets == "shared":
        batch = eval_set(task, n, seed=shared_seed, cache_dir=cache_dir)
        return [batch] * len(seeds)
    return [eval_set(task, n, seed=member_set_seed(task, purpose, s), cache_dir=cache_dir) for s in seeds]


def is_shared(batches: list[Batch]) -> bool:
    """True when every member reads the same batch object (the shared sets)."""
    return all(b is batches[0] for b in batches)


@dataclass(frozen=True)
class StackedSets:
    """Per-member batches stacked on a leading member axis E: tokens, targets, mask [E, B, L],
    posterior [E, B, L, C], header [E, B, ...] or None."""

    tokens: Tensor
    header: Tensor | None
    targets: Tensor
    mask: Tensor
    posterior: Tensor


def stack_sets(batches: list[Batch], device=None) -> StackedSets:
    """The members' batches on one leading axis (expanded views where they are one shared batch,
    so the shared sets compute exactly as before); an error naming the rule when their shapes differ."""
    if not batches:
        raise ValueError("stack_sets needs one batch per member, got none")
    shapes = {tuple(b.tokens.shape) for b in batches}
    if len(shapes) != 1:
        raise ValueError(f"the members' sets must have one shape, got {sorted(shapes)}")
    if (len({b.header is None for b in batches})) != 1:
        raise ValueError("the members' sets must all have a header or none")
    E = len(batches)

    def stack(get) -> Tensor:
        if is_shared(batches):
            x = get(batches[0]).to(device) if device is not None else get(batches[0])
            return x.unsqueeze(0).expand(E, *x.shape)
        x = torch.stack([get(b) for b in batches])
        return x.to(device) if device is not None else x

    header = None if batches[0].header is None else stack(lambda b: b.header)
    return StackedSets(stack(lambda b: b.tokens), header, stack(lambda b: b.targets), stack(lambda b: b.mask),
                       stack(lambda b: b.posterior))


def scored_rows(probs: Tensor, mask: Tensor) -> Tensor:
    """probs [E, B, L, C], mask [E, B, L] -> [E, N, C]: each member's rows at its own scored
    positions. Where the members have different counts N_e, the shorter are padded with zero rows
    and each member's rows scaled by sqrt(N / N_e), so that a mean over the N rows of a squared
    difference (frames.pairwise_sq, sq_to_late) is the mean over that member's own N_e rows."""
    rows = [probs[e][mask[e].to(probs.device)] for e in range(probs.shape[0])]
    n = max(r.shape[0] for r in rows)
    if all(r.shape[0] == n for r in rows):
        return torch.stack(rows)
    out = probs.new_zeros(len(rows), n, probs.shape[-1])
    for e, r in enumerate(rows):
        if r.shape[0]:
            out[e, : r.shape[0]] = r * (n / r.shape[0]) ** 0.5
    return out


@torch.no_grad()
def calibration(model, batches: list[Batch], chunk: int = 512, task: Task | None = None) -> Tensor:
    """[2, E] each member's entropy MAE and KL (bits, means over its sequences) on its own set,
    computed as `scoring.evaluate.evaluate_members` computes them on a shared one (exact float32,
    the task's scored positions; `task` with a continuous head: against its predictive density, as
    `scoring.continuous.score_continuous`); a diverged member gets NaN."""
    from ..models.heads import CATEGORICAL, is_continuous, read_outputs
    from ..scoring.continuous import score_continuous
    from ..scoring.metrics import score
    from ..training.curves import exact_float32

    if len(batches) != model.ensemble:
        raise ValueError(f"calibration needs one set per member ({model.ensemble}), got {len(batches)}")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    head = getattr(model.shape, "head", CATEGORICAL)
    s = stack_sets(batches)
    out = []
    try:
        with exact_float32(), torch.autocast("cuda", enabled=False), torch.autocast("cpu", enabled=False):
            for start in range(0, s.tokens.shape[1], chunk):
                tokens = s.tokens[:, start: start + chunk].to(device)
                header = None if s.header is None else s.header[:, start: start + chunk].to(device)
                out.append(read_outputs(model(tokens, header).double(), head).cpu())
    finally:
        model.train(was_training)
    log_q = torch.cat(out, dim=1)
    res = []
    for e, b in enumerate(batches):
        if task is not None and is_continuous(task.head):
            sc = score_continuous(b.posterior.double(), b.mask, log_q[e], b.targets, dim=getattr(task, "error_dim", 1),
                                  task=task.name, nonfinite="nan")
        else:
            sc = score(b.posterior.double(), b.mask, log_q=log_q[e], nonfinite="nan")
        res.append([sc.entropy_mae.mean, sc.kl.mean])
    return torch.tensor(res, dtype=torch.float64).T
