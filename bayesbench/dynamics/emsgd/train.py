"""The runs of an EM-vs-SGD study: each seed's data splits, and every schedule trained on them.

A seed s draws three sequences (or sets of sequences, beta variant) of the chain: the training
data from s, a validation split from s + VALIDATION_SEED_OFFSET (the authors' held-out sequence)
and a test split from s + TEST_SEED_OFFSET, never used to choose anything. The toy variants train
each schedule of `toy.ALL_SCHEDULES` asked for (`toy.train_toy`); a norm-matched control trains
after the schedule whose update norms it takes. The deep variant trains `deep.train_deep`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .chain import ChainData, beta_sticky_data, means_seed, paper_data, symbol_means
from .deep import DeepRun, train_deep
from .toy import ALL_SCHEDULES, NORM_MATCHED, ToyRun, concat_runs, train_toy

VALIDATION_SEED_OFFSET = 10000  # the authors' held-out sequence of seed s (seed + 10000): here the validation split
TEST_SEED_OFFSET = 20000  # the test split, never used to choose anything


@dataclass(frozen=True)
class Splits:
    """Each seed's training, validation and test data (index e: seed e), and the symbol means
    [E, V, d] they were drawn with."""

    train: list[ChainData]
    validation: list[ChainData]
    test: list[ChainData]
    means: Tensor


def toy_splits(variant: str, seeds: list[int], *, length: int, sequences: int, means: str) -> Splits:
    """The three splits of every seed: one sequence of T = `length` (paper variant), or
    `sequences` sequences of L = `length` (beta); symbol means shared or per seed (`means`)."""
    mu_seeds = [means_seed(s, means) for s in seeds]

    def split(offset: int) -> list[ChainData]:
        if variant == "paper":
            return [paper_data(s + offset, T=length, mu_seed=m) for s, m in zip(seeds, mu_seeds)]
        return [beta_sticky_data(s + offset, n_sequences=sequences, L=length, mu_seed=m)
                for s, m in zip(seeds, mu_seeds)]

    train, validation, test = split(0), split(VALIDATION_SEED_OFFSET), split(TEST_SEED_OFFSET)
    return Splits(train, validation, test, torch.stack([symbol_means(seed=m) for m in mu_seeds]))


def train_schedules(splits: Splits, seeds: list[int], schedules: list[str], *, steps: int, chunk: int | None,
                    progress: bool, device: str | None = None) -> ToyRun:
    """Every schedule of `schedules` trained on `splits` for `steps` updates, in one run: the
    norm-matched ones (`toy.NORM_MATCHED`) after the others, seed by seed and step by step on the
    update norms of the schedule they match."""

    def train(names: list[str], norm_targets: Tensor | None = None) -> ToyRun:
        return train_toy(splits.train, seeds, schedules={n: ALL_SCHEDULES[n] for n in names}, steps=steps,
                         means=splits.means, chunk=chunk, progress=progress, test=splits.test,
                         validation=splits.validation, norm_targets=norm_targets, device=device)

    run = train([n for n in schedules if n not in NORM_MATCHED])
    for n in (n for n in schedules if n in NORM_MATCHED):
        run = concat_runs(run, train([n], run.update_norms[run.schedules.index(NORM_MATCHED[n])]))
    return run


def deep_run(seeds: list[int], *, steps: int, length: int, progress: bool) -> tuple[list[ChainData], DeepRun]:
    """The deep variant: the paper's chain (T = `length`) per seed, scored on the authors' held-out
    sequence (seed + VALIDATION_SEED_OFFSET); returns (that held-out data, the run)."""
    train = [paper_data(s, T=length) for s in seeds]
    test = [paper_data(s + VALIDATION_SEED_OFFSET, T=length) for s in seeds]  # the authors' held-out sequence
    return test, train_deep(train, test, seeds, steps=steps, progress=progress)
