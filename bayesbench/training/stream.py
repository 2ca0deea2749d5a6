"""Training data: one stream of fresh batches per ensemble member, and the batches stacked.

Member e's stream is seeded from its own seed only (`seeds.data_seed`), so it draws the batches
a solo run of that seed draws; its state (the generator before the current prefetch chunk and
the offset in it) goes into the checkpoint, so a resumed run replays exactly.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..tasks import Batch, Task
from .seeds import data_seed


class MemberStream:
    """Fresh training batches for one member: `next()` -> Batch of `batch_size` sequences.

    Samples `prefetch` batches per task.sample call and hands them out in order: fewer calls
    into the samplers' per-time-step Python loops, still never a repeated sequence. Nothing is
    checked here: the task's own sampler makes the data (tokens in range, posteriors from the
    oracle without its input checks), so a chunk costs no read back to the host.
    """

    def __init__(self, task: Task, seed: int, batch_size: int, prefetch: int = 16,
                 device: torch.device | str = "cpu") -> None:
        self.task, self.batch_size, self.prefetch = task, batch_size, prefetch
        self.generator = torch.Generator(device=device).manual_seed(data_seed(seed))
        self._chunk_state = self.generator.get_state()  # generator state before the current chunk
        self._chunk: Batch | None = None
        self._offset = 0

    def _refill(self) -> Batch:
        self._chunk_state = self.generator.get_state()
        self._chunk = self.task.sample(self.batch_size * self.prefetch, self.generator)
        self._offset = 0
        return self._chunk

    def next(self) -> Batch:
        chunk = self._chunk
        if chunk is None or self._offset == self.prefetch:
            chunk = self._refill()
        b, i = self.batch_size, self._offset
        self._offset += 1
        return chunk.slice(i * b, (i + 1) * b)

    def state_dict(self) -> dict:
        """Enough to replay exactly: the generator state before the current chunk, the offset."""
        return {"chunk_state": self._chunk_state.clone(), "offset": self._offset,
                "has_chunk": self._chunk is not None}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["chunk_state"].cpu())  # RNG states are CPU byte tensors
        self._chunk, self._offset = None, 0
        if state["has_chunk"]:
            self._refill()
            self._offset = state["offset"]


def stack_members(batches: list[Batch]) -> tuple[Tensor, Tensor | None, Tensor, Tensor]:
    """Per-member batches -> (tokens [E,B,L], header [E,B,H,D] or None, targets, mask [E,B,L])."""
    if len(batches) == 1:  # one member: views, no copies
        b = batches[0]
        header = None if b.header is None else b.header.unsqueeze(0)
        return b.tokens.unsqueeze(0), header, b.targets.unsqueeze(0), b.mask.unsqueeze(0)
    headers = [b.header for b in batches if b.header is not None]
    if headers and len(headers) != len(batches):
        raise ValueError(f"the members' batches must all have a header or none, got {len(headers)} of {len(batches)}")
    header = torch.stack(headers) if headers else None
    return (torch.stack([b.tokens for b in batches]), header,
            torch.stack([b.targets for b in batches]), torch.stack([b.mask for b in batches]))
