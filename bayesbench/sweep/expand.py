"""Resolved jobs -> sweep jobs, each with a stable key; a checked sweep file's points -> such jobs.

A job's key (`job_key`) hashes its identity (`bayesbench.identity`: everything that decides its
stored numbers, the code included) with its seeds. An edited file is a new key, and so a new
run directory and new rows; the file reverted finds its old rows again. The store keeps one row
per (run_id, seed) and a job's run_id IS this key, so each (job configuration, seed) has one
stable row key: re-running a sweep (or `bayesbench run`, whose preset jobs become sweep jobs
through `SweepJob.of`) finds what is already stored, and writing a result twice replaces it
instead of adding a second row. The same configuration gives the same key and the same run
directory whichever command made it: both resolve their points with `jobs.resolve`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..checks import SettingError
from ..identity import KEY_CHARS, identity_key
from ..models.registry import is_outside
from .jobs import Job, point, resolve
from .sweep_file import Resources, SweepSpec

__all__ = ["KEY_CHARS", "SweepJob", "expand", "gpu_share", "job_key", "seeds_name", "seeds_text"]


@dataclass(frozen=True)
class SweepJob:
    """One job of a sweep: a resolved `Job` (an ensemble of seeds) and how the sweep runs it."""

    key: str  # `job_key`: the hash of the job's identity and seeds; the stored rows' run_id
    job: Job
    size: str | None  # the sweep's name for the model size, if it has a sizes axis
    checkpoint_every: int  # steps between checkpoints (and progress reports)
    group_id: str  # stored with every row: "sweep-<name>"
    log: str | None = None  # send the training curves to "tensorboard" or "wandb" (training/loggers.py); not in the key

    @classmethod
    def of(cls, job: Job, *, group_id: str, size: str | None = None) -> SweepJob:
        """`job` as the sweep driver runs it: its key (`job_key`), its checkpoint interval (the
        job's TrainConfig.checkpoint_every, else a tenth of its steps), which the worker keeps (it
        trains from checkpoint to checkpoint, so the job's own TrainConfig gets 0; the interval is
        no part of the identity), and the group its rows are stored with."""
        steps = job.train.steps
        every = min(job.train.checkpoint_every or max(1, steps // 10), steps)
        job = dataclasses.replace(job, train=dataclasses.replace(job.train, checkpoint_every=0))
        return cls(job_key(job), job, size, every, group_id)

    @property
    def arch(self) -> str:
        """The arch as stored and shown: a built-in name, or an outside model's leaderboard name."""
        return self.job.name or self.job.arch

    @property
    def label(self) -> str:
        """Task / arch [size] [lr] seeds: how the job is named in progress lines and tables."""
        job = self.job
        size = f" [{self.size}]" if self.size else ""
        return f"{job.setup.label} / {self.arch}{size} lr {job.train.lr:g} seeds {seeds_text(job.seeds)}"

    def run_dir(self, root: str) -> str:
        """Its checkpoint folder under the runs directory, readable and unique:
        `<root>/<preset>/<task>-<arch>[-<size>]-lr<lr>-s<seeds>-<key>`."""
        job = self.job
        task = job.task.name if ":" in job.task_key else job.task_key  # an outside tunnel by its name, not its path
        parts = [task, self.arch] + ([self.size] if self.size else []) + [f"lr{job.train.lr:g}",
                                                                            "s" + seeds_name(job.seeds)]
        return os.path.join(root, job.preset, f"{'-'.join(_safe(part) for part in parts)}-{self.key}")

    @property
    def tokens(self) -> int:
        """Training tokens over all members: steps x batch x sequence length x members."""
        job = self.job
        return job.train.steps * job.train.batch_size * job.task.seq_len * len(job.seeds)

    @property
    def flops(self) -> float:
        """Estimated training compute: 6 x parameters per member x tokens (forward + backward)."""
        return 6.0 * self.job.params * self.tokens


def seeds_name(seeds) -> str:
    """The seeds as a run directory names them: '0-1-2', or for many '0..999999' (a range) or
    '0..4093-n1000' (the first, the last and how many): a name short enough for any file system."""
    seeds = list(seeds)
    if len(seeds) <= 8:
        return "-".join(map(str, seeds))
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}..{seeds[-1]}"
    return f"{seeds[0]}..{seeds[-1]}-n{len(seeds)}"


def seeds_text(seeds) -> str:
    """'[0, 1, 2]', or for many seeds '[0 .. 999999] (1000000 seeds)': how messages list them."""
    seeds = list(seeds)
    return str(seeds) if len(seeds) <= 8 else f"[{seeds[0]} .. {seeds[-1]}] ({len(seeds)} seeds)"


def _safe(part: str) -> str:
    """A task key or an outside model's name as a path component (no separators, not too long)."""
    part = "".join(c if c.isalnum() or c in "._-" else "_" for c in str(part))
    return part[:60]


def job_key(job: Job) -> str:
    """The job's key: `identity.identity_key` of its identity (`Job.identity`) and its seeds."""
    return identity_key(job.identity, job.seeds)


def gpu_share(sweep_job: SweepJob, resources: Resources) -> float:
    """GPUs a job asks Ray for: 0 on CPU; the sweep's `resources.gpus`; or by size ("auto"):
    a quarter of a GPU below 2M parameters x members, half below 20M, else a whole one."""
    job = sweep_job.job
    if torch.device(job.device).type != "cuda":
        return 0.0
    if resources.gpus != "auto":
        return float(resources.gpus)
    size = job.params * len(job.seeds)
    return 0.25 if size < 2_000_000 else 0.5 if size < 20_000_000 else 1.0


# What a resolver's setting is called in a sweep file's errors: "bad task settings: ...".
_WHAT = {"task_options": "task", "models": "model", "train": "training"}


def expand(spec: SweepSpec, *, device: Callable[[str], str] | None = None) -> list[SweepJob]:
    """Resolve every point of `spec` into a job (`jobs.resolve`; each trains with the sweep's
    `resources.cpus` torch threads); `device` maps the requested device ("auto", "cuda", ...) to
    the one used (default: unchanged, "auto" -> "cpu"). Builds every model on the meta device to
    count its parameters, so a bad model setting fails here, before anything runs."""
    place = device or (lambda d: "cpu" if d == "auto" else d)
    jobs: list[SweepJob] = []
    seen: dict[str, int] = {}
    names: dict[str, str] = {}  # leaderboard name -> the outside model stored under it
    setups: dict = {}
    for i, entry in enumerate(spec.points):
        where = f"sweep file {spec.path}: job {i + 1} ({entry['task']} / {entry['arch']}" + \
                (f" size {entry['size']})" if entry["size"] else ")")
        name = _outside_name(entry["arch"], names, where)
        try:
            job = resolve(point(**entry, name=name, threads=spec.resources.cpus), place, setups)
        except SettingError as err:
            raise ValueError(f"{where}: bad {_WHAT.get(err.fields[0], err.fields[0])} settings: {err}") from None
        sweep_job = SweepJob.of(job, group_id=f"sweep-{spec.name}", size=entry["size"])
        if sweep_job.key in seen:
            raise ValueError(f"{where}: the same job as job {seen[sweep_job.key] + 1} (identical configuration and "
                             "seeds); each job is trained and stored once")
        seen[sweep_job.key] = i
        jobs.append(sweep_job)
    return jobs


def _outside_name(arch: str, names: dict[str, str], where: str) -> str | None:
    """An outside model's leaderboard name (as `bayesbench run --model` names it: the file or
    module name, `models.outside.default_name`); None for a built-in arch. Two outside models of
    one sweep may not share a name: their rows could not be told apart."""
    if not is_outside(arch):
        return None
    from ..models.outside import default_name
    from ..scoring.trained_elsewhere import check_name

    try:
        name = check_name(default_name(arch))
    except ValueError as err:
        raise ValueError(f"{where}: model {arch!r}: {err}") from None
    if names.setdefault(name, arch) != arch:
        raise ValueError(f"{where}: models {names[name]!r} and {arch!r} would both be stored as {name!r}; rename "
                         "one's file, module or factory")
    return name
