"""The seed domains: training-data streams and evaluation sets never share a generator seed.

Training data of model seed s comes from `data_seed(s)`, in [0, 2^61); every evaluation set
(and the label permutation of the HMM check) comes from `eval_seed(task, salt)`, at or above
2^61 and fixed by the task's configuration. So no evaluation sequence is ever drawn from a
training stream's generator.
"""

from __future__ import annotations

import contextlib
import zlib

TRAIN_SEED_DOMAIN = 2**61  # training-data seeds live in [0, 2^61); evaluation seeds above it
MAX_SEED = 2**63 - 1  # a model seed is a non-negative int64 (torch's generators and the store hold them so)
_MIX = 0x9E3779B97F4A7C15  # odd 64-bit constant (2^64 / golden ratio): spreads consecutive seeds


def check_seeds(seeds) -> list[int]:
    """An ensemble's seeds as ints: at least one, distinct, each in [0, MAX_SEED]; else ValueError."""
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {seeds}")
    if any(isinstance(s, bool) or int(s) != s or s < 0 or s > MAX_SEED for s in seeds):
        raise ValueError(f"seeds must be integers in [0, 2^63 - 1], got {seeds}")
    return [int(s) for s in seeds]


def data_seed(seed: int) -> int:
    """The training-data generator seed of model seed `seed` (a different stream from its init)."""
    return (int(seed) * _MIX + 0x5EED) % TRAIN_SEED_DOMAIN


def dropout_seed(seeds: list[int], step: int) -> int:
    """The global RNG seed for training step `step` of the ensemble of `seeds` (dropout draws from
    torch's global generator): fixed by the seeds and the step, so a run's dropout masks do not
    depend on what ran before it in the process, and a resumed run draws the same masks."""
    return zlib.crc32(f"dropout:{list(seeds)}:{int(step)}".encode())


@contextlib.contextmanager
def dropout_rng(seeds: list[int], step: int, device, draws: bool = True):
    """torch's global RNG (dropout's) seeded for training step `step` only (`dropout_seed`), the
    caller's RNG state restored afterwards: reproducible whatever ran before in the process.
    `draws` False (a model without dropout: nothing in the step draws from it) skips it, ~0.1 ms."""
    if not draws:
        yield
        return
    import torch

    cuda = device.type == "cuda"
    with torch.random.fork_rng(devices=[device.index or 0] if cuda else []):
        torch.manual_seed(dropout_seed(seeds, step))
        yield


def eval_seed(task, salt: str = "eval") -> int:
    """Evaluation-set seed of a task (anything with `describe()`): fixed by its configuration,
    never a training-data seed."""
    return TRAIN_SEED_DOMAIN + zlib.crc32(f"{salt}:{task.describe()}".encode())
