"""`bayesbench emsgd`: run an EM-vs-SGD study, store it, draw its figures, write its report.

    bayesbench emsgd                          # paper variant, 16 seeds, T = 2000, 1000 steps
    bayesbench emsgd --seeds 16 --length 300  # shorter sequences (what a 2-core CPU affords)
    bayesbench emsgd --variant beta           # Beta-sticky tunnel, exact posterior predictive floor
    bayesbench emsgd --variant deep --steps 2000

Seeds: the authors' five (42, 2024, 1337, 7777, 9999) first, then 0, 1, 2, ... up to --seeds.
Numbers go to the `studies` / `dynamics` tables of the results store; the report and figures to
`<store folder>/reports/`. docs/em_vs_sgd.md explains every quantity.

This module is the command: its settings checked (`EmsgdConfig`), the study registered, run and
stored. The study's parts: its runs (`train.py`), numbers and stored rows (`summary.py`),
verdicts (`verdicts.py`), figures (`plots.py`) and report (`report.py`).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import cast

import torch

from ..config import FieldError, check_choice, check_int
from ..cut_short import removed_if_stopped
from ..report import report_dir, write_report
from ..store import register_study, write_dynamics
from . import DEFAULTS, VARIANTS
from .chain import MEANS

AUTHORS_SEEDS = (42, 2024, 1337, 7777, 9999)


@dataclass(frozen=True)
class EmsgdConfig:
    """What `bayesbench emsgd` is asked to run, checked (a bad value: `FieldError` naming the field).
    steps and length None: the variant's defaults (`DEFAULTS`)."""

    variant: str = "paper"
    seeds: int = 16  # how many: the authors' five first, then 0, 1, 2, ...
    steps: int | None = None
    length: int | None = None
    sequences: int = 40
    schedules: tuple[str, ...] | None = None
    means: str = "shared"
    chunk: int | None = None
    threads: int | None = None
    db: str | None = None
    progress: bool = True
    as_json: bool = False

    def __post_init__(self) -> None:
        check_choice("variant", self.variant, VARIANTS)
        check_int("seeds", self.seeds, 2, "a speed-up interval needs at least 2")
        check_int("sequences", self.sequences, 1)
        check_choice("means", self.means, MEANS)
        for name in ("chunk", "threads"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1)
        object.__setattr__(self, "steps", DEFAULTS[self.variant]["steps"] if self.steps is None else self.steps)
        object.__setattr__(self, "length", DEFAULTS[self.variant]["length"] if self.length is None else self.length)
        check_int("steps", self.steps, 1)
        check_int("length", self.length, 3)
        if self.schedules is not None:
            object.__setattr__(self, "schedules", tuple(check_schedules(list(self.schedules))))


def default_seeds(n: int) -> list[int]:
    """The authors' five seeds, then 0, 1, 2, ... until there are n."""
    check_int("seeds", n, 2, "a speed-up interval needs at least 2")
    out = list(AUTHORS_SEEDS[:n])
    i = 0
    while len(out) < n:
        if i not in out:
            out.append(i)
        i += 1
    return out


def run_emsgd(cfg: EmsgdConfig) -> dict:
    """The `bayesbench emsgd` command's work (cli/emsgd.py builds `cfg`): run, store, plot, report."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    steps, length = cast(int, cfg.steps), cast(int, cfg.length)  # __post_init__ filled them in
    check_length(length)
    return run_study(cfg.variant, default_seeds(cfg.seeds), steps=steps, length=length,
                     sequences=cfg.sequences, chunk=cfg.chunk, db=cfg.db, progress=cfg.progress,
                     schedules=list(cfg.schedules) if cfg.schedules else None, means=cfg.means)


def run_study(variant: str, seeds: list[int], *, steps: int, length: int, sequences: int = 40,
              chunk: int | None = None, db: str | None = None, progress: bool = False,
              schedules: list[str] | None = None, means: str = "shared", device: str | None = None) -> dict:
    """Run one study end to end; returns its summary (also stored in `studies`).

    `schedules` (toy variants): which of `toy.ALL_SCHEDULES` to train, default all of them
    (SGD, EM-like and the controls); "sgd" and "em" are always among them. `means`: "shared"
    (the authors' symbol means for every seed) or "per-seed". `device` (toy variants): where the
    members train (default the CPU; scripts/gpu_check.sh runs the authors' T = 2000 on a GPU)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    schedules = check_schedules(schedules)
    study_id = f"emsgd-{variant}-{uuid.uuid4().hex[:8]}"
    config = {"variant": variant, "seeds": seeds, "steps": steps, "length": length,
              "sequences": sequences if variant == "beta" else 1, "means": means,
              "schedules": schedules if variant != "deep" else ["adamw", "adamw-em"]}
    register_study(study_id, "emsgd", config, path=db)
    out_dir = os.path.join(report_dir(db), study_id)
    os.makedirs(out_dir, exist_ok=True)
    with removed_if_stopped(study_id, "emsgd", db):
        if variant == "deep":
            summary, records, sections, figures = _deep(seeds, steps, length, out_dir, progress)
        else:
            summary, records, sections, figures = _toy(variant, seeds, steps, length, sequences, chunk, out_dir,
                                                       progress, schedules, means, device)
        write_dynamics(study_id, records, path=db)
    report = write_report(os.path.join(report_dir(db), f"{study_id}.md"),
                          f"EM-like vs SGD ({variant} variant), study {study_id}", sections, figures)
    summary.update({"study_id": study_id, "report": report, "config": config})
    register_study(study_id, "emsgd", config, summary=summary, status="done", path=db)
    return summary


def check_length(length: int) -> int:
    """Refuse, before anything is drawn, a sequence whose T x T attention map (float32, with its
    gradient and softmax: 3 copies) exceeds the free memory on its own: it could never run."""
    from ...tasks.base import available_bytes, format_bytes

    need = 3 * 4 * length * length
    free = available_bytes(torch.device("cpu"))
    if free is not None and need > free:
        most = int((free / 12) ** 0.5)
        raise FieldError("length", f"{length:,}: one sequence's {length:,} x {length:,} attention map needs at "
                                   f"least {format_bytes(need)}, and this machine has {format_bytes(free)} free; at "
                                   f"most about {most:,} fits")
    return length


def check_schedules(schedules: list[str] | None) -> list[str]:
    """The toy schedules to train, in `ALL_SCHEDULES` order; "grid" stands for every point of the
    2-D grid of rates (`toy.grid_points`). FieldError for an unknown name or a list without both
    "sgd" and "em" (every comparison is against them)."""
    from .toy import ALL_SCHEDULES, grid_points

    if schedules is None:
        return list(ALL_SCHEDULES)
    if "grid" in schedules:
        schedules = [s for s in schedules if s != "grid"] + list(grid_points())
    unknown = [s for s in schedules if s not in ALL_SCHEDULES]
    if unknown:
        raise FieldError("schedules", f": unknown {unknown}; choose from {list(ALL_SCHEDULES)}")
    if not {"sgd", "em"} <= set(schedules):
        raise FieldError("schedules", f"must include sgd and em (every comparison is against them), got {schedules}")
    return [s for s in ALL_SCHEDULES if s in schedules]


def _toy(variant: str, seeds: list[int], steps: int, length: int, sequences: int, chunk: int | None, out_dir: str,
         progress: bool, schedules: list[str], means: str,
         device: str | None = None) -> tuple[dict, list, list[tuple[str, str]], list[str]]:
    """A toy study (paper or beta variant): (summary, stored rows, report sections, figures)."""
    from . import plots
    from .report import toy_headline, toy_sections
    from .summary import toy_records, toy_summary
    from .train import toy_splits, train_schedules
    from .verdicts import toy_verdicts

    splits = toy_splits(variant, seeds, length=length, sequences=sequences, means=means)
    run = train_schedules(splits, seeds, schedules, steps=steps, chunk=chunk, progress=progress, device=device)
    summary, per_seed, pooled = toy_summary(variant, seeds, steps, means, run, splits)
    summary["verdicts"] = toy_verdicts(summary)
    records = toy_records(run, seeds, splits, summary, per_seed, pooled)
    setting = plots.toy_setting(variant, seeds, steps=steps, length=length, sequences=sequences, means=means)
    figures, summary["value_pca_variance_pc1_pc2"] = plots.toy_figures(out_dir, run, summary, seeds,
                                                                       int(splits.means.shape[1]), setting)
    summary["headline"] = toy_headline(summary, per_seed, pooled)
    sections = toy_sections(variant, seeds, steps, length, sequences, summary, per_seed, pooled, run)
    return summary, records, sections, figures


def _deep(seeds: list[int], steps: int, length: int, out_dir: str,
          progress: bool) -> tuple[dict, list, list[tuple[str, str]], list[str]]:
    """A deep-variant study: (summary, stored rows, report sections, figures)."""
    from .plots import deep_figures
    from .report import deep_headline, deep_sections
    from .summary import deep_records, deep_summary
    from .train import deep_run
    from .verdicts import deep_verdicts

    test, run = deep_run(seeds, steps=steps, length=length, progress=progress)
    summary, per_seed, pooled = deep_summary(seeds, steps, run, test)
    summary["verdicts"] = deep_verdicts(summary)
    records = deep_records(run, seeds)
    figures = deep_figures(out_dir, run, summary, seeds, steps=steps, length=length)
    summary["headline"] = deep_headline(summary, per_seed, pooled)
    return summary, records, deep_sections(seeds, steps, length, summary), figures
