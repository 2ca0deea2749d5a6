"""The experiment runner: a preset's (task, architecture, seed ensemble) jobs, trained, scored, stored.

`make_jobs` turns a preset (`bayesbench.presets`) and the command line's selections into jobs;
`run_jobs` runs them (a process pool on CPU); `run_job` trains one (checkpointing into its run
directory), then `record` scores it on the fixed evaluation sets and writes one row per seed to
the results store.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass

import torch

from ..models import TaskShape, count_params, list_models
from ..models.registry import is_outside
from ..presets import TaskSetup, get_preset
from ..running import interrupt
from ..running.runlock import run_lock
from ..scoring.evaluate import max_eval_len
from ..scoring.rows import record
from ..store.database import prepare_store
from ..store.records import RunRecord
from ..tasks import Task, task_from_config
from ..training.trainer import TrainConfig, train

DEFAULT_RUN_ROOT = "runs"


def resolve_device(device: str | None) -> str:
    """'auto' (or None) -> 'cuda' when available, else 'cpu'; a named device must exist."""
    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        kind = torch.device(device).type
    except RuntimeError:
        raise ValueError(f"--device must be cpu, cuda, cuda:N or auto, got {device!r}") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: no CUDA device is available here (use cpu or auto)")
    return device


def check_triton(device: str) -> None:
    """--attention triton needs the triton package and a CUDA device (or Triton's interpreter,
    TRITON_INTERPRET=1): checked before any work, not at the first forward pass."""
    import importlib.util

    from ..kernels.config import interpreting

    if importlib.util.find_spec("triton") is None:
        raise ValueError("--attention triton needs the triton package (pip install 'bayesbench[kernels]'); "
                         "use --attention sdpa or eager")
    if torch.device(device).type != "cuda" and not interpreting():
        raise ValueError(f"--attention triton needs a CUDA device, and this run is on {device}; use --attention "
                         "sdpa or eager (or set TRITON_INTERPRET=1 for Triton's slow interpreter on the CPU)")


def make_task(setup: TaskSetup) -> Task:
    return task_from_config(setup.task)


def resolve_model(setup: TaskSetup, arch: str, task: Task, max_len: int, attention: str | None = None) -> dict:
    """The preset's model config for `arch`, with `match` replaced by a parameter count.

    An outside model ('pkg.mod:build', '/abs/file.py:build', 'hf:gpt2'; `models.outside`) gets
    the options `setup.models` gives it (a sweep's `models` table; none by default), after, for
    an `hf:` model, the sizes of the preset's transformer for this task (`models.hf.hf_sizes`)."""
    if is_outside(arch):
        return _outside_model(setup, arch, task, max_len, attention)
    if arch not in setup.models:
        known = ", ".join(sorted(setup.models))
        raise ValueError(f"arch {arch!r} has no configuration for task {setup.label!r} in this preset; "
                         f"configured: {known}")
    cfg = dict(setup.models[arch])
    if "match" in cfg:
        ref = cfg.pop("match")
        ref_cfg = resolve_model(setup, ref, task, max_len, attention)
        cfg["match_params"] = count_params(ref, TaskShape.from_task(task, max_len), **ref_cfg)
    if attention is not None and arch == "transformer":
        cfg["attention"] = attention
    return cfg


def _outside_model(setup: TaskSetup, spec: str, task: Task, max_len: int, attention: str | None) -> dict:
    from ..models.hf import hf_sizes
    from ..models.outside import HF_PREFIX

    sizes = {}
    if spec.startswith(HF_PREFIX):
        sizes = hf_sizes(spec[len(HF_PREFIX):], resolve_model(setup, "transformer", task, max_len, attention),
                         setup.models.get("mamba", {}).get("d_state"))
    return {**sizes, **setup.models.get(spec, {})}


@dataclass(frozen=True)
class Job:
    preset: str
    key: str  # the task's key in the preset
    setup: TaskSetup
    arch: str
    model: dict
    train: TrainConfig
    seeds: tuple[int, ...]
    device: str
    name: str | None = None  # leaderboard name when arch is an outside model ('./mine.py:build' -> 'mine')

    @functools.cached_property
    def task(self) -> Task:
        return make_task(self.setup)

    @functools.cached_property
    def max_len(self) -> int:
        return max_eval_len(self.task, self.setup.eval_lengths, self.setup.eval_scored)

    @functools.cached_property
    def params(self) -> int:
        """Parameters per ensemble member."""
        return count_params(self.arch, self.task, max_len=self.max_len, **self.model)

    def describe(self) -> str:
        """'task label / arch', how messages name the job."""
        return f"{self.setup.label} / {self.arch}"

    def run_dir(self, root: str = DEFAULT_RUN_ROOT) -> str:
        seeds = "-".join(str(s) for s in self.seeds)
        return os.path.join(root, self.preset, f"{self.key}-{self.name or self.arch}-s{seeds}")

    def meta(self, group_id: str | None) -> dict:
        return {"preset": self.preset, "label": self.setup.label, "group_id": group_id, "name": self.name,
                "eval_lengths": list(self.setup.eval_lengths), "eval_scored": list(self.setup.eval_scored),
                "eval_sequences": self.setup.eval_sequences}


def make_jobs(preset: str, *, tasks: list[str] | None = None, archs: list[str] | None = None,
              seeds: list[int] | None = None, steps: int | None = None, device: str | None = None,
              attention: str | None = None, compile: bool = False, precision: str | None = None,
              checkpoint_every: int | None = None, eval_sequences: int | None = None,
              train: dict | None = None) -> list[Job]:
    """Every (task, arch) of the preset, or of the given selections, as resolved jobs.

    Without `archs`, each task runs its own default architectures (`TaskSetup.archs`, else the
    preset's); a named arch must be configured for every selected task. `train`: TrainConfig
    fields set for every job (e.g. {"until": 0.1}: `--until`).
    """
    p = get_preset(preset)
    keys = list(tasks or p.tasks)
    for k in keys:
        if k not in p.tasks:
            raise ValueError(f"task {k!r} is not in preset {preset!r}; available: {', '.join(p.tasks)}")
    explicit = bool(archs)
    known = list_models()
    for a in archs or ():
        if a not in known:
            raise ValueError(f"unknown arch {a!r}; available: {', '.join(known)}")
    dev = resolve_device(device or p.device)
    if attention == "triton":
        check_triton(dev)
    jobs = []
    for k in keys:
        setup = p.tasks[k]
        if eval_sequences is not None:
            setup = dataclasses.replace(setup, eval_sequences=eval_sequences)
        task = make_task(setup)
        max_len = max_eval_len(task, setup.eval_lengths, setup.eval_scored)
        train_cfg = dict(setup.train, checkpoint_every=p.checkpoint_every if checkpoint_every is None
                         else checkpoint_every, compile=compile)
        if precision is not None:
            train_cfg["precision"] = precision
        train_cfg.update(train or {})
        if steps is not None:
            train_cfg["steps"] = steps
            if train_cfg.get("warmup_steps", 0) > steps // 10:  # keep the warm-up a small fraction
                train_cfg["warmup_steps"] = max(0, steps // 100)
        member_seeds = tuple(seeds) if seeds is not None else tuple(range(setup.seeds))
        for a in (archs if explicit else (setup.archs or p.archs)):
            jobs.append(Job(preset, k, setup, a, resolve_model(setup, a, task, max_len, attention),
                            TrainConfig(**train_cfg), member_seeds, dev))
    return jobs


def run_job(job: Job, *, db: str | None = None, group_id: str | None = None, run_root: str = DEFAULT_RUN_ROOT,
            resume: bool = False, progress: bool = True, position: int = 0) -> list[RunRecord]:
    """Train the job's ensemble, evaluate it and store one record per seed; returns the records.

    The run directory stays locked from training to the stored rows (`runlock`). A stop
    request raises `interrupt.Interrupted` naming this job and where it stopped; its rows are
    then not stored (each store write is one transaction: all of a job's rows or none).
    """
    result = None
    try:
        with run_lock(job.run_dir(run_root)):
            result = train(job.task, job.arch, list(job.seeds), job.train, model_cfg=job.model, max_len=job.max_len,
                           device=job.device, run_dir=job.run_dir(run_root), resume=resume, progress=progress,
                           meta=job.meta(group_id), position=position)
            return record(result, db=db, device=job.device)
    except interrupt.Interrupted as stop:
        interrupt.claim(stop, job.describe(),
                        None if result is None else {"phase": "evaluation", "checkpoint": result.checkpoint})
        raise


def job_cost(job: Job) -> float:
    """A rough relative cost (parameters x tokens per step x steps x members) for scheduling."""
    return job.params * job.task.seq_len * \
        job.train.batch_size * job.train.steps * len(job.seeds)


def _set_threads(threads: int | None) -> None:
    if threads:
        torch.set_num_threads(threads)


def _in_worker(item: tuple[Job, dict], slot: int) -> list[RunRecord]:
    """One job in a worker process (`workers.run_parallel`); `slot` is its progress bar's line."""
    job, kwargs = item
    return run_job(job, position=slot, **kwargs)


def run_jobs(jobs: list[Job], *, workers: int = 1, threads: int | None = None, on_done=None,
             **kwargs) -> list[list[RunRecord]]:
    """Run jobs, `workers` at a time in separate processes (1: in this process, in order).

    Small models use a CPU core better as one single-threaded process each than as one
    process with several intra-op threads, so on CPU the quick preset runs its jobs in
    parallel processes with `threads` (default: cores // workers) threads each; they all write
    to the same results store (safe for concurrent writers). Longest jobs start first.
    `on_done(job, records)` is called as each finishes; returns the records per job, in job order.

    The store (`db`) and its evaluation cache are opened, created and checked before any
    training (`results.prepare_store`). SIGINT or SIGTERM stops every job within seconds:
    each writes a checkpoint at its current step, nothing unfinished is stored, and
    `interrupt.Interrupted` says which jobs stopped where (`workers.run_parallel`); a job that
    fails stops the others the same way and its error is raised.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    prepare_store(kwargs.get("db"))
    with interrupt.handling():
        if workers == 1:
            return _run_here(jobs, threads, on_done, kwargs)
        from ..running.pool import run_parallel

        threads = threads or max(1, (os.cpu_count() or 1) // workers)
        order = sorted(range(len(jobs)), key=lambda i: -job_cost(jobs[i]))
        return run_parallel(_in_worker, [(job, kwargs) for job in jobs], workers=workers, order=order,
                            initializer=_set_threads, initargs=(threads,),
                            on_result=(lambda i, rows: on_done(jobs[i], rows)) if on_done else None,
                            describe=lambda item: item[0].describe())


def _run_here(jobs: list[Job], threads: int | None, on_done, kwargs: dict) -> list[list[RunRecord]]:
    """The jobs one by one in this process (`run_jobs` with one worker)."""
    _set_threads(threads)
    out = []
    try:
        for job in jobs:
            records = run_job(job, **kwargs)
            out.append(records)
            if on_done:
                on_done(job, records)
    except interrupt.Interrupted as stop:
        stop.finished, stop.not_started = len(out), len(jobs) - len(out) - 1
        raise
    return out
def trial_forward(job) -> str:
    """Build two members for the job's task (factory, trial forward, path choice) before anything
    runs, so a broken model fails here; says which forward path it got."""
    import warnings

    from ..models import get_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the fallback is reported in the line instead
        model = get_model(job.arch, job.task, seeds=[0, 1], max_len=job.max_len, **job.model)
    if model.path == "vmap":
        return "vmap over members (one batched call)"
    return f"a loop over members (vmap failed: {model.cfg.fallback})"


