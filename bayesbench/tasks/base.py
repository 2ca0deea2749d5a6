"""What every wind tunnel provides: a `Batch` of sequences with their exact posteriors."""

from __future__ import annotations

import dataclasses
import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import Tensor

from ..checks import positive_int

IGNORE_INDEX = -100  # hard target at unsupervised positions (torch's cross-entropy default)
#: The most memory one sampled sequence may need (`Task.sequence_bytes`): a task configured
#: beyond it is refused when it is built, with the size it would need.
MAX_SEQUENCE_BYTES = 2**30
#: Batches needing less than this are not checked against the device's free memory.
CHECK_FREE_ABOVE_BYTES = 2**28


@dataclass
class Batch:
    """A batch of B wind-tunnel sequences of length L over C output classes.

    tokens: [B, L] long token ids, the model's input (position t sees tokens 0..t).
    mask: [B, L] bool, True at supervised (trained and scored) positions.
    targets: [B, L] long class indices (IGNORE_INDEX elsewhere) for hard targets, or
        [B, L, C] float soft targets (zeros elsewhere).
    posterior: [B, L, C] exact Bayes posterior of the class predicted at each position given
        tokens 0..t (zeros at unsupervised positions).
    latents: the hidden variables that generated the batch (bijection, HMM matrices, ...).
    header: [B, H, D] continuous vectors fed at positions 0..H-1 (HMM `rows` encoding), or None.

    A continuous tunnel (`Task.head` "gaussian" or "mixture:M", issue 41) fills the same fields
    so: header [B, L, D] a real vector at every position (`Task.header_every_position`), tokens
    the slot each vector fills, targets [B, L] float the real y to predict (0 off the mask), and
    posterior [B, L, 3J] the exact predictive, a mixture of J Gaussians in the layout of
    `models.heads` (weights, means, variances; weight 1, mean 0, variance 1 off the mask).
    """

    tokens: Tensor
    mask: Tensor
    targets: Tensor
    posterior: Tensor
    latents: dict[str, Tensor] = field(default_factory=dict)
    header: Tensor | None = None

    @property
    def batch_size(self) -> int:
        return self.tokens.shape[0]

    @property
    def seq_len(self) -> int:
        return self.tokens.shape[1]

    @property
    def soft_targets(self) -> bool:
        return self.targets.dim() == 3

    def map(self, fn: Callable[[Tensor], Tensor]) -> "Batch":
        """A batch with `fn` applied to every tensor (latents and header included)."""
        # (a latent an outside tunnel left None stays None)
        latents = {k: v if v is None else fn(v) for k, v in self.latents.items()}
        return Batch(fn(self.tokens), fn(self.mask), fn(self.targets), fn(self.posterior), latents,
                     None if self.header is None else fn(self.header))

    def to(self, device: torch.device | str) -> "Batch":
        return self.map(lambda x: x.to(device))

    def slice(self, start: int, stop: int) -> "Batch":
        """Sequences start..stop-1 (for evaluating in chunks)."""
        return self.map(lambda x: x[start:stop])


class Task(ABC):
    """A wind tunnel: samples sequences with fresh latents and knows their exact posterior.

    Subclasses are frozen dataclasses whose fields are the task's configuration; `config()`
    returns them as a dict for the results store.
    """

    # Every task is a dataclass (the subclasses): said here so that dataclasses.asdict and replace
    # type-check on a Task. An annotation only: it creates no attribute.
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    name: str = "task"
    CASES: tuple[str, ...] = ()  # the cases `case_masks` splits the scored positions into (none by default)
    #: Raised whenever a change to the sampler or the exact posterior changes what a seed yields:
    #: it is part of every job key and evaluation-set key (`bayesbench.versions`).
    version: ClassVar[int] = 1

    @property
    @abstractmethod
    def vocab_size(self) -> int:
        """Number of distinct token ids in `Batch.tokens`."""

    @property
    @abstractmethod
    def num_classes(self) -> int:
        """Size C of the predicted distribution at each supervised position."""

    @property
    @abstractmethod
    def seq_len(self) -> int:
        """Length L of every sequence."""

    @property
    def header_dim(self) -> int:
        """Width D of continuous header vectors (0 when the task has none)."""
        return 0

    @property
    def header_len(self) -> int:
        """Number H of leading positions fed with continuous vectors (0 when none)."""
        return 0

    @property
    def head(self) -> str:
        """How a model's outputs are read (`models.heads`): "categorical" (every discrete tunnel),
        "gaussian" or "mixture:M" (a continuous tunnel's predictive of a real y)."""
        return "categorical"

    @property
    def header_every_position(self) -> bool:
        """Whether the header carries a real vector at every position (then header_len is the
        sequence length, whatever it is): the continuous tunnels' read-in."""
        return False

    @abstractmethod
    def sample(self, batch_size: int, generator: torch.Generator | None = None, *,
               device: torch.device | str | None = None,
               dtype: torch.dtype = torch.float32) -> Batch:
        """Draw `batch_size` sequences with fresh latents.

        Randomness comes from `generator` (on its device, which is then the batch's device);
        without one, torch's global generator on `device` (default CPU) is used. `dtype` is the
        float type of the posterior and soft targets.
        """

    def case_masks(self, batch: "Batch", detail: tuple[str, ...] = ()) -> dict:
        """{case name: [N, T] bool mask within batch.mask}: the scored positions by the kind of
        inference they ask for (the bijection: repeated keys, new keys, the query); {} for a task
        without cases."""
        return {}

    def scoring_task(self) -> "Task":
        """The task as evaluation scores it: itself, unless its training supervises positions
        that are no part of what is measured (the bijection's copy targets, "authors")."""
        return self

    def sequence_bytes(self, dtype: torch.dtype = torch.float32) -> int:
        """A lower bound on the memory one sampled sequence takes: its posterior [L, C] in
        `dtype` and its long tokens and targets [L] (tasks add their latents and soft targets)."""
        item = torch.empty((), dtype=dtype).element_size()
        return self.seq_len * self.num_classes * item + 2 * self.seq_len * 8

    def check_size(self) -> None:
        """Refuse (ValueError) a configuration whose single sequence needs more than
        MAX_SEQUENCE_BYTES, saying how much it would need."""
        need = self.sequence_bytes()
        if need > MAX_SEQUENCE_BYTES:
            raise ValueError(f"{self.describe()} is too large to sample: one sequence needs at least "
                             f"{format_bytes(need)} (its L={self.seq_len} x C={self.num_classes} posterior, targets "
                             f"and latents), above the limit of {format_bytes(MAX_SEQUENCE_BYTES)} per sequence")

    def config(self) -> dict:
        return {"task": self.name, **dataclasses.asdict(self)}

    def code(self) -> dict:
        """The code behind this tunnel's sequences and posteriors (`bayesbench.versions`): its version."""
        return {"version": self.version}

    def describe(self) -> str:
        fields = ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(self).items())
        return f"{self.name}({fields})"


def batch_device(generator: torch.Generator | None, device) -> torch.device:
    """Where a batch is drawn: the generator's device (a given device must agree), else device, else CPU."""
    if generator is not None:
        gdev = torch.device(generator.device)
        if device is not None and torch.device(device).type != gdev.type:
            raise ValueError(f"device {device} does not match the generator's device {gdev}")
        return gdev
    return torch.device(device) if device is not None else torch.device("cpu")


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KiB' (binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def available_bytes(device: torch.device) -> int | None:
    """Memory free for new tensors on `device` (CPU: MemAvailable; CUDA: free memory), or None
    when it cannot be told."""
    try:
        if device.type == "cuda":
            return int(torch.cuda.mem_get_info(device)[0])
        if device.type == "cpu":
            try:
                with open("/proc/meminfo") as f:
                    for line in f:
                        if line.startswith("MemAvailable:"):
                            return int(line.split()[1]) * 1024
            except OSError:
                pass
            return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (RuntimeError, ValueError, OSError, AttributeError):
        return None
    return None


def check_fits(task: Task, batch_size: int, device: torch.device, dtype: torch.dtype = torch.float32) -> None:
    """Refuse (ValueError) to sample a batch whose lower-bound size exceeds the device's free
    memory, before allocating any of it."""
    need = batch_size * task.sequence_bytes(dtype)
    if need < CHECK_FREE_ABOVE_BYTES:
        return
    free = available_bytes(device)
    if free is not None and need > free:
        raise ValueError(f"sampling {batch_size} sequences of {task.describe()} needs at least {format_bytes(need)} "
                         f"on {device}, which has {format_bytes(free)} free; use fewer sequences or a smaller task")


def check_batch_size(batch_size: int) -> int:
    return positive_int("batch_size", batch_size)
