"""What the continuous wind tunnels share (issue 41; docs/tasks.md, "Continuous tunnels"): a real
y predicted at each supervised position, read in as real vectors, scored against an exact
predictive density.

A continuous tunnel is a `Task` whose `head` is "gaussian" or "mixture:M" (the model's predictive,
`models.heads`), whose header carries a real vector at every position
(`header_every_position`), whose targets are the real y's and whose posterior is the exact
predictive as a mixture of J Gaussians in the layout [..., 3J] (weights, means, variances).
`floor_predictives(batch)` gives the reference predictors scored beside the models (the prior
predictive for every tunnel; least squares and a ridge with a wrong prior for `linreg`), in
the same layout; `error_dim` is the d that Garg et al.'s normalised squared error divides by.

This module registers no tunnel (it is imported by linreg, mixreg and kalman).
"""

from __future__ import annotations

from abc import abstractmethod

import torch
from torch import Tensor

from ..checks import positive_int
from ..models.heads import head_outputs
from .base import Batch, Task

#: The names of the built-in continuous tunnels (the metric table's continuous-only metrics apply to them).
CONTINUOUS_TUNNELS = ("linreg", "mixreg", "kalman")


def model_head(components: int) -> str:
    """The model's head for `components` Gaussians: "gaussian" for one, "mixture:M" for more."""
    positive_int("components", components, "Gaussians of the model's predictive head")
    return "gaussian" if components == 1 else f"mixture:{components}"


class ContinuousTask(Task):
    """Base of the continuous tunnels (a dataclass subclass gives the fields, among them
    `components`, the model head's number of Gaussians)."""

    components: int

    @property
    def head(self) -> str:
        return model_head(self.components)

    @property
    def num_classes(self) -> int:
        """The model's raw outputs per position (2 for a Gaussian, 3M for a mixture of M)."""
        return head_outputs(self.head)

    @property
    def header_every_position(self) -> bool:
        return True

    @property
    def header_len(self) -> int:
        return self.seq_len

    @property
    def posterior_components(self) -> int:
        """J: the Gaussians of the exact predictive (1 unless the prior is a mixture)."""
        return 1

    @property
    def error_dim(self) -> int:
        """The d of Garg et al.'s normalised squared error (the dimension of the regression)."""
        return 1

    @abstractmethod
    def floor_predictives(self, batch: Batch) -> dict[str, Tensor]:
        """{name: [B, L, 3K] float64}: the reference predictors of this tunnel on `batch` (the
        prior predictive "prior" first), in the posterior's layout, at the supervised positions."""

    def sequence_bytes(self, dtype: torch.dtype = torch.float32) -> int:
        """Header [L, D], posterior [L, 3J], targets [L] in `dtype`, tokens and mask [L]."""
        item = torch.empty((), dtype=dtype).element_size()
        L = self.seq_len
        return L * (self.header_dim + 3 * self.posterior_components + 1) * item + 2 * L * 8


def off_mask_layout(B: int, L: int, J: int, device, dtype) -> Tensor:
    """[B, L, 3J] filled with the harmless predictive (weight 1 on the first component, mean 0,
    variance 1) that every position off the mask holds."""
    out = torch.zeros((B, L, 3 * J), dtype=dtype, device=device)
    out[..., 0] = 1.0
    out[..., 2 * J:] = 1.0
    return out


def place(layout: Tensor, positions: Tensor, values: Tensor) -> Tensor:
    """`layout` [B, L, 3J] with `values` [B, P, 3J] written at sequence positions `positions` [P]."""
    out = layout.clone()
    out[:, positions] = values.to(out.dtype)
    return out
