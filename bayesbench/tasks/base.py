"""What every wind tunnel provides: a `Batch` of sequences with their exact posteriors."""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ..checks import positive_int

IGNORE_INDEX = -100  # hard target at unsupervised positions (torch's cross-entropy default)


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

    def map(self, fn) -> "Batch":
        """A batch with `fn` applied to every tensor (latents and header included)."""
        f = lambda x: None if x is None else fn(x)  # noqa: E731
        return Batch(f(self.tokens), f(self.mask), f(self.targets), f(self.posterior),
                     {k: f(v) for k, v in self.latents.items()}, f(self.header))

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

    name: str = "task"

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

    @abstractmethod
    def sample(self, batch_size: int, generator: torch.Generator | None = None, *,
               device: torch.device | str | None = None,
               dtype: torch.dtype = torch.float32) -> Batch:
        """Draw `batch_size` sequences with fresh latents.

        Randomness comes from `generator` (on its device, which is then the batch's device);
        without one, torch's global generator on `device` (default CPU) is used. `dtype` is the
        float type of the posterior and soft targets.
        """

    def config(self) -> dict:
        return {"task": self.name, **dataclasses.asdict(self)}  # type: ignore[arg-type]

    def describe(self) -> str:
        fields = ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(self).items())  # type: ignore[arg-type]
        return f"{self.name}({fields})"


def batch_device(generator: torch.Generator | None, device) -> torch.device:
    """Where a batch is drawn: the generator's device (a given device must agree), else device, else CPU."""
    if generator is not None:
        gdev = torch.device(generator.device)
        if device is not None and torch.device(device).type != gdev.type:
            raise ValueError(f"device {device} does not match the generator's device {gdev}")
        return gdev
    return torch.device(device) if device is not None else torch.device("cpu")


def check_batch_size(batch_size: int) -> int:
    return positive_int("batch_size", batch_size)
