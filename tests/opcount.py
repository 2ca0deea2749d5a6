"""Count what a piece of PyTorch code dispatches, and forbid host reads inside it.

`count_ops(fn)` runs fn under a dispatch mode and counts every aten op that reaches the
dispatcher, split into *kernel* ops (ones that launch work on a device) and *metadata* ops
(views, detach, transposes: no kernel). `no_host_sync()` makes any read of a tensor's value
back to the host (`.item()`, `.tolist()`, `.cpu()`, `.numpy()`, `bool(t)`, `int(t)`, ...) raise,
so a test can prove that a training step never waits for the device.
"""

from __future__ import annotations

import collections
import contextlib
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# aten ops that only make a new view or alias of existing memory (no kernel launch)
METADATA_OPS = frozenset({
    "aten.view", "aten._unsafe_view", "aten.detach", "aten.transpose", "aten.t", "aten.permute",
    "aten.unsqueeze", "aten.squeeze", "aten.select", "aten.slice", "aten.expand", "aten.as_strided",
    "aten.alias", "aten.unbind", "aten.split", "aten.split_with_sizes", "aten.chunk", "aten.reshape",
    "aten.view_as", "aten.lift_fresh", "aten.unfold", "aten.diagonal", "aten.narrow",
})
HOST_READ_OPS = frozenset({"aten._local_scalar_dense"})


@dataclass
class OpCount:
    ops: collections.Counter

    @property
    def total(self) -> int:
        return sum(self.ops.values())

    @property
    def kernels(self) -> int:
        """Ops that launch work (everything but views/aliases and host reads)."""
        return sum(n for op, n in self.ops.items() if op not in METADATA_OPS and op not in HOST_READ_OPS)

    @property
    def host_reads(self) -> int:
        return sum(self.ops[op] for op in HOST_READ_OPS)

    def most_common(self, n: int = 10) -> list[tuple[str, int]]:
        return self.ops.most_common(n)


class _Counter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


def count_ops(fn: Callable[[], object]) -> OpCount:
    """Run fn once and count the aten ops it dispatched (autograd's backward included)."""
    counter = _Counter()
    with counter:
        fn()
    return OpCount(counter.ops)


class HostSyncError(RuntimeError):
    """Raised by `no_host_sync` when code reads a tensor's value back to the host."""


class _ForbidScalars(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if str(func.overloadpacket) in HOST_READ_OPS:
            raise HostSyncError(f"host read inside a no_host_sync() block: {func}")
        if str(func.overloadpacket) == "aten._to_copy":
            device = (kwargs or {}).get("device")
            if device is not None and torch.device(device).type == "cpu" and args[0].device.type != "cpu":
                raise HostSyncError("device-to-host copy inside a no_host_sync() block")
        return func(*args, **(kwargs or {}))


_READERS = ("item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "__index__")


@contextlib.contextmanager
def no_host_sync() -> Iterator[None]:
    """Any host read of a tensor value inside the block raises HostSyncError.

    On a CPU tensor these reads cost nothing, but on a GPU each one waits for the device; the
    methods are patched on torch.Tensor so that a CPU test catches what would stall a GPU.
    """
    saved = {name: getattr(torch.Tensor, name) for name in _READERS}

    def forbid(name):
        def reader(self, *args, **kwargs):
            raise HostSyncError(f"Tensor.{name}() inside a no_host_sync() block")
        return reader

    try:
        for name in _READERS:
            setattr(torch.Tensor, name, forbid(name))
        with _ForbidScalars():
            yield
    finally:
        for name, fn in saved.items():
            setattr(torch.Tensor, name, fn)
