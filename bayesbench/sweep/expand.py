"""Resolved jobs -> sweep jobs, each with a stable key; a checked sweep file's points -> such jobs.

The key of a job is a hash of everything that decides its stored numbers: the task's
configuration and evaluation (label, lengths, set size), the architecture and its resolved model
configuration (capacity matching already applied), the training configuration, the seeds, the
device kind, and the code (`Job.code`: an outside tunnel's or model's file contents, the
versions of the built-in tunnels, architectures, trainer and metrics; `bayesbench.versions`).
An edited file is a new key, and so a new run directory and new rows; the file reverted finds
its old rows again. The store keeps one row per (run_id, seed) and a job's run_id IS this key, so
each (job configuration, seed) has one stable row key: re-running a sweep (or `bayesbench run`,
whose preset jobs become sweep jobs through `sweep_job`) finds what is already stored, and
writing a result twice replaces it instead of adding a second row. The same configuration gives
the same key and the same run directory whichever command expanded it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .. import versions
from ..models import count_params
from ..models.registry import is_outside
from ..presets import get_preset
from ..scoring.evaluate import max_eval_len
from ..training.trainer import TrainConfig
from .jobs import Job, make_task, resolve_model, scored_sets
from .spec import Resources, SweepSpec

KEY_CHARS = 16  # hex characters of the SHA-256 kept: 64 bits


@dataclass(frozen=True)
class SweepJob:
    """One job of a sweep: a resolved `Job` (an ensemble of seeds) and how the sweep runs it."""

    key: str  # stable hash of the resolved configuration; the stored rows' run_id
    job: Job
    size: str | None  # the sweep's name for the model size, if it has a sizes axis
    checkpoint_every: int  # steps between checkpoints (and progress reports)
    group_id: str  # stored with every row: "sweep-<name>"
    log: str | None = None  # send the training curves to "tensorboard" or "wandb" (training/loggers.py); not in the key

    @property
    def arch(self) -> str:
        """The arch as stored and shown: a built-in name, or an outside model's leaderboard name."""
        return self.job.name or self.job.arch

    @property
    def label(self) -> str:
        """Task / arch [size] [lr] seeds: how the job is named in progress lines and tables."""
        j = self.job
        size = f" [{self.size}]" if self.size else ""
        return f"{j.setup.label} / {self.arch}{size} lr {j.train.lr:g} seeds {seeds_text(j.seeds)}"

    def run_dir(self, root: str) -> str:
        """Its checkpoint folder under the runs directory, readable and unique:
        `<root>/<preset>/<task>-<arch>[-<size>]-lr<lr>-s<seeds>-<key>`."""
        j = self.job
        task = j.task.name if ":" in j.task_key else j.task_key  # an outside tunnel by its name, not its path
        parts = [task, self.arch] + ([self.size] if self.size else []) + [f"lr{j.train.lr:g}",
                                                                            "s" + seeds_name(j.seeds)]
        return os.path.join(root, j.preset, f"{'-'.join(_safe(p) for p in parts)}-{self.key}")

    @property
    def tokens(self) -> int:
        """Training tokens over all members: steps x batch x sequence length x members."""
        j = self.job
        return j.train.steps * j.train.batch_size * j.task.seq_len * len(j.seeds)

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


def job_key(job: Job, threads: int = 1) -> str:
    """SHA-256 (first 16 hex characters) of the job's resolved configuration; see the module doc.

    `threads`, the torch threads it trains with, is part of what a result is: the same seeds give
    numbers that differ in their last digits at another thread count (a staged learner can then
    leave a plateau at another step), so a job at 2 threads is another job than at 1. It enters
    the key only when not 1, the default, so the keys of earlier runs stay valid."""
    train = job.train.as_dict()  # the learning-curve fields only when set: keys of earlier sweeps stay valid
    train.pop("checkpoint_every")  # when checkpoints are written changes no number
    code = versions.keyed(job.code)  # outside contents and raised versions; none for first-version built-ins
    ident = {"task": job.task.config(), "label": job.setup.label, "eval_lengths": list(job.setup.eval_lengths),
             "eval_scored": list(job.setup.eval_scored),
             "eval_sequences": job.setup.eval_sequences, "arch": job.arch, "model": job.model,
             "max_len": job.max_len, "train": train, "seeds": list(job.seeds),
             "device": torch.device(job.device).type, **({"threads": threads} if threads != 1 else {}),
             **({"code": code} if code else {})}
    text = json.dumps(ident, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_CHARS]


def sweep_job(job: Job, *, group_id: str, size: str | None = None, threads: int = 1) -> SweepJob:
    """`job` as the sweep driver runs it: its key (`job_key`), its checkpoint interval (the job's
    TrainConfig.checkpoint_every, else a tenth of its steps), which the worker keeps (it trains
    from checkpoint to checkpoint, so the job's own TrainConfig gets 0), and the group its rows
    are stored with."""
    steps = job.train.steps
    every = min(job.train.checkpoint_every or max(1, steps // 10), steps)
    job = dataclasses.replace(job, train=dataclasses.replace(job.train, checkpoint_every=0))
    return SweepJob(job_key(job, threads), job, size, every, group_id)


def gpu_share(job: SweepJob, resources: Resources) -> float:
    """GPUs a job asks Ray for: 0 on CPU; the sweep's `resources.gpus`; or by size ("auto"):
    a quarter of a GPU below 2M parameters x members, half below 20M, else a whole one."""
    if torch.device(job.job.device).type != "cuda":
        return 0.0
    if resources.gpus != "auto":
        return float(resources.gpus)
    size = job.job.params * len(job.job.seeds)
    return 0.25 if size < 2_000_000 else 0.5 if size < 20_000_000 else 1.0


def expand(spec: SweepSpec, *, device: Callable[[str], str] | None = None) -> list[SweepJob]:
    """Resolve every point of `spec` into a job; `device` maps the requested device ("auto",
    "cuda", ...) to the one used (default: unchanged, "auto" -> "cpu"). Builds every model on the
    meta device to count its parameters, so a bad model setting fails here, before anything runs."""
    device = device or (lambda d: "cpu" if d == "auto" else d)
    jobs: list[SweepJob] = []
    seen: dict[str, int] = {}
    names: dict[str, str] = {}  # leaderboard name -> the outside model stored under it
    for i, pt in enumerate(spec.points):
        where = f"sweep file {spec.path}: job {i + 1} ({pt['task']} / {pt['arch']}" + \
                (f" size {pt['size']})" if pt["size"] else ")")
        preset = get_preset(pt["preset"])
        setup = preset.tasks[pt["task"]]
        if pt["eval_sequences"] is not None:
            setup = dataclasses.replace(setup, eval_sequences=pt["eval_sequences"])
        if pt["task_options"]:  # the task column names them: such rows are never ranked with the preset's
            opts = ", ".join(f"{k}={v}" for k, v in sorted(pt["task_options"].items()))
            setup = dataclasses.replace(setup, task={**setup.task, **pt["task_options"]},
                                        label=f"{setup.label} [{opts}]")
        if pt["models"]:
            models = dict(setup.models)
            for arch, override in pt["models"].items():
                models[arch] = {**models.get(arch, {}), **override}
            setup = dataclasses.replace(setup, models=models)
        try:
            task = make_task(setup)
            if pt["task_options"]:  # a set the new task lacks is left out, as --task-args does
                setup = dataclasses.replace(setup, eval_scored=scored_sets(setup, task, "task_options"))
        except (TypeError, ValueError) as err:
            raise ValueError(f"{where}: bad task settings: {err}") from None
        max_len = max_eval_len(task, setup.eval_lengths, setup.eval_scored)
        try:
            model = resolve_model(setup, pt["arch"], task, max_len, pt["attention"])
            count_params(pt["arch"], task, max_len=max_len, **model)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{where}: bad model settings: {err}") from None
        train = dict(setup.train)
        if pt["lr"] is not None:
            train["lr"] = pt["lr"]
        if pt["steps"] is not None:
            train["steps"] = pt["steps"]
            if train.get("warmup_steps", 0) > pt["steps"] // 10:  # as `bayesbench run --steps`
                train["warmup_steps"] = max(0, pt["steps"] // 100)
        train.update(pt["train"])
        try:
            train_cfg = TrainConfig(**train, checkpoint_every=pt["checkpoint_every"] or preset.checkpoint_every,
                                    compile=False)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{where}: bad training settings: {err}") from None
        name = _outside_name(pt["arch"], names, where)
        job = Job(pt["preset"], pt["task"], setup, pt["arch"], model, train_cfg, tuple(pt["seeds"]),
                  device(pt["device"]), name)
        sj = sweep_job(job, group_id=f"sweep-{spec.name}", size=pt["size"], threads=spec.resources.cpus)
        if sj.key in seen:
            raise ValueError(f"{where}: the same job as job {seen[sj.key] + 1} (identical configuration and seeds); "
                             "each job is trained and stored once")
        seen[sj.key] = i
        jobs.append(sj)
    return jobs


def _outside_name(arch: str, names: dict[str, str], where: str) -> str | None:
    """An outside model's leaderboard name (as `bayesbench run --model` names it: the file or
    module name, `models.outside.default_name`); None for a built-in arch. Two outside models of
    one sweep may not share a name: their rows could not be told apart."""
    if not is_outside(arch):
        return None
    from ..models.outside import default_name
    from ..scoring.outside import check_name

    try:
        name = check_name(default_name(arch))
    except ValueError as err:
        raise ValueError(f"{where}: model {arch!r}: {err}") from None
    if names.setdefault(name, arch) != arch:
        raise ValueError(f"{where}: models {names[name]!r} and {arch!r} would both be stored as {name!r}; rename "
                         "one's file, module or factory")
    return name
