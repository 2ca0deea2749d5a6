"""A preset's jobs: (task, architecture, seed ensemble), resolved from the preset and a command
line's selections, before anything runs.

`make_jobs` turns a preset (`bayesbench.presets`) and `bayesbench run`/`train`'s selections into
`Job`s; `sweep.expand.sweep_job` gives each its stable key and run directory, and the sweep
driver runs them (`sweep/driver.py`: skip what is stored, train the rest on the local pool, in
this process or on Ray, store each job's rows once). A `Job` knows its task, model and
training configuration, and opens its Trainer (`Job.open_trainer`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..models import TaskShape, count_params, list_models
from ..models.outside import preset_options
from ..models.registry import is_outside
from ..presets import TaskSetup, get_preset, outside_setup
from ..scoring.evaluate import evaluation_tasks, max_eval_len
from ..scoring.metrics import METRIC_VERSIONS
from ..tasks import Task, is_outside_task, outside_task, task_from_config
from ..tasks.base import available_bytes, check_fits, format_bytes
from ..tasks.check import check_task
from ..training.trainer import TrainConfig, open_trainer, run_code


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

    An outside model ('pkg.mod:build', '/abs/file.py:build', 'hf:gpt2') gets the options the
    models package derives from the preset's model table (`models.outside.preset_options`: for
    an `hf:` model the sizes of the preset's transformer for this task, then any options the
    table (a sweep's `models`) gives it)."""
    if is_outside(arch):
        return preset_options(arch, setup.models)
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


@dataclass(frozen=True)
class Job:
    preset: str
    task_key: str  # the task's key in the preset ('bijection'); the job's own key is SweepJob.key, a hash
    setup: TaskSetup
    arch: str
    model: dict
    train: TrainConfig
    seeds: tuple[int, ...]
    device: str
    name: str | None = None  # leaderboard name when arch is an outside model ('./mine.py:build' -> 'mine')
    # what the command line changed from the preset ({"train": {...}, "task": {...}, "model": {...}}), for
    # the record; the resolved configs above already hold every change
    overrides: dict = dataclasses.field(default_factory=dict, compare=False)

    @functools.cached_property
    def task(self) -> Task:
        return make_task(self.setup)

    @functools.cached_property
    def max_len(self) -> int:
        return max_eval_len(self.task, self.setup.eval_lengths, self.setup.eval_scored)

    @functools.cached_property
    def code(self) -> dict:
        """The code the job trains and scores with (`bayesbench.versions`): the tunnel's, the
        architecture's, the trainer's and the metrics' versions or file contents. Computed once,
        where the job is resolved; its key holds it, and the worker checks it is still the code."""
        return {**run_code(self.task, self.arch), "metrics": dict(METRIC_VERSIONS)}

    @functools.cached_property
    def params(self) -> int:
        """Parameters per ensemble member."""
        return count_params(self.arch, self.task, max_len=self.max_len, **self.model)

    def open_trainer(self, run_dir: str | None, **kwargs):
        """The job's Trainer, in its run directory (`training.trainer.open_trainer`: run lock,
        leftovers removed, the checkpoint loaded with resume=True); use it as a context manager.
        Keyword arguments: run_id, meta, resume, say."""
        return open_trainer(self.task, self.arch, list(self.seeds), self.train, model_cfg=self.model,
                            max_len=self.max_len, device=self.device, run_dir=run_dir, **kwargs)

    def describe(self) -> str:
        """'task label / arch', how messages name the job."""
        return f"{self.setup.label} / {self.arch}"

    def meta(self, group_id: str | None) -> dict:
        return {"preset": self.preset, "label": self.setup.label, "group_id": group_id, "name": self.name,
                "eval_lengths": list(self.setup.eval_lengths), "eval_scored": list(self.setup.eval_scored),
                "eval_sequences": self.setup.eval_sequences, "overrides": dict(self.overrides), "code": self.code}


def make_jobs(preset: str, *, tasks: list[str] | None = None, archs: list[str] | None = None,
              seeds: list[int] | None = None, steps: int | None = None, device: str | None = None,
              attention: str | None = None, compile: bool = False, precision: str | None = None,
              checkpoint_every: int | None = None, eval_sequences: int | None = None,
              train: dict | None = None, place: Callable[[str], str] | None = None,
              task_args: dict | None = None, model_args: dict | None = None) -> list[Job]:
    """Every (task, arch) of the preset, or of the given selections, as resolved jobs.

    Without `archs`, each task runs its own default architectures (`TaskSetup.archs`, else the
    preset's); a named arch must be configured for every selected task. A task may also be an
    outside tunnel ('pkg.mod:build', './file.py:build'; `tasks.outside`), checked before anything
    else (`tasks.check.check_task`) and trained with the preset's settings for outside tasks
    (`presets.outside_setup`). `train`: TrainConfig fields set for every job (e.g. {"until": 0.1}:
    `--until`; `--train-args`). `task_args`: fields of the preset's task config replaced (an
    outside tunnel: its factory's options; `--task-args`); `model_args`: options merged into the
    one selected architecture's config (`--model-args`). `place` maps the device asked for
    (`device`, else the preset's) to the one the jobs run on (default `resolve_device`: 'auto' is
    this machine's GPU if it has one). `checkpoint_every` (default: the preset's; 0: a tenth of
    the steps) is the job's TrainConfig.checkpoint_every.
    """
    p = get_preset(preset)
    keys = list(tasks or p.tasks)
    for flag, names in (("--tasks", keys), ("--archs", archs or [])):
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"{flag} names {', '.join(map(repr, twice))} twice: each job is trained and stored once")
    for k in keys:
        if k not in p.tasks and not is_outside_task(k):
            raise ValueError(f"task {k!r} is not in preset {preset!r}; available: {', '.join(p.tasks)} (or your own "
                             "tunnel: 'pkg.mod:build', './file.py:build')")
    explicit = bool(archs)
    known = list_models()
    for a in archs or ():
        if a not in known:
            raise ValueError(f"unknown arch {a!r}; available: {', '.join(known)}")
    dev = (place or resolve_device)(device or p.device)
    if attention == "triton":
        check_triton(dev)
    if model_args and (len(archs or []) != 1):
        raise ValueError("--model-args are one architecture's options: name exactly one arch (--archs A, --arch A, "
                         "or --model)")
    overrides = {k: dict(v) for k, v in (("train", train), ("task", task_args), ("model", model_args)) if v}
    jobs = []
    for k in keys:
        setup = task_setup(p, k, task_args)
        if model_args:
            setup = dataclasses.replace(setup, models={**setup.models, archs[0]: with_model_args(
                setup.models.get(archs[0], {}), model_args)})
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
            # keep the preset's warm-up a small fraction of fewer steps; a warm-up the user set stays
            if "warmup_steps" not in (train or {}) and train_cfg.get("warmup_steps", 0) > steps // 10:
                train_cfg["warmup_steps"] = max(0, steps // 100)
        member_seeds = tuple(seeds) if seeds is not None else tuple(range(setup.seeds))
        try:
            train_config = TrainConfig(**train_cfg)
        except TypeError as err:  # a field TrainConfig does not have (check_train_args names it for the CLI)
            raise ValueError(f"training settings: {err}") from None
        for a in (archs if explicit else (setup.archs or p.archs)):
            try:
                model = resolve_model(setup, a, task, max_len, attention)
                if model_args:
                    count_params(a, TaskShape.from_task(task, max_len), **model)  # a bad option fails here
            except (TypeError, ValueError) as err:
                if not model_args:
                    raise
                raise ValueError(f"--model-args for {a}: {err}") from None
            job = Job(preset, k, setup, a, model, train_config, member_seeds, dev, overrides=overrides)
            check_ensemble_fits(job)
            check_sets_fit(job)
            jobs.append(job)
    return jobs


# Model options a capacity match chooses itself: giving one (or match_params) in --model-args sizes
# the model directly, so the preset's match to the transformer's parameter count is dropped.
MATCHED_SIZES = frozenset({"width", "d_model", "d_embed", "d_inner", "d_ffn", "d_head", "match", "match_params"})


def with_model_args(preset_cfg: dict, model_args: dict) -> dict:
    """The preset's config of one architecture with `model_args` (`--model-args`) over it: a size
    the user gives replaces the preset's capacity match (`match`, `match_params`), and
    `match_params=null` means no match."""
    cfg = dict(preset_cfg)
    if MATCHED_SIZES & set(model_args):
        cfg.pop("match", None)
        cfg.pop("match_params", None)
    cfg.update(model_args)
    if "match_params" in cfg and cfg["match_params"] is None:
        del cfg["match_params"]
    return cfg


def check_ensemble_fits(job: Job) -> None:
    """Refuse, before anything is built, an ensemble whose weights, gradients and optimiser
    state alone (4 float32 copies of every member's parameters) exceed the device's free memory,
    naming the cause: one member too large (the model's size), or too many members (the seeds)."""
    one = 16 * job.params
    free = available_bytes(torch.device(job.device))
    if free is None or one * len(job.seeds) <= free:
        return
    state = "for its weights, gradients and optimiser state"
    if one > free:
        given = " ".join(f"{k}={v}" for k, v in (job.overrides.get("model") or {}).items())
        cause = (f"the model (--model-args {given}) is too large for this device; make it smaller" if given else
                 "the model is too large for this device; make it smaller (--model-args, e.g. d_model)")
        raise ValueError(f"{job.describe()}: one member of {job.params:,} parameters needs at least "
                         f"{format_bytes(one)} {state}, and {job.device} has {format_bytes(free)} free: {cause}")
    raise ValueError(f"{job.describe()}: an ensemble of {len(job.seeds):,} members of {job.params:,} parameters "
                     f"needs at least {format_bytes(one * len(job.seeds))} {state}, and {job.device} has "
                     f"{format_bytes(free)} free; at most {free // one:,} members fit: use fewer seeds (--seeds)")


def check_sets_fit(job: Job) -> None:
    """Refuse, before a run directory is made, an evaluation or learning-curve set too large to
    sample on the job's device, naming the setting that sizes it."""
    sets = [("the evaluation set", "eval_sequences (--eval-sequences)", job.setup.eval_sequences)]
    if job.train.curves:
        sets.append(("the learning-curve set", "curve_sequences (--curve-sequences)", job.train.curve_sequences))
    for what, option, n in sets:
        try:
            check_fits(job.task, n, torch.device(job.device))
        except ValueError as err:
            raise ValueError(f"{job.describe()}: {what} of {n:,} sequences, {option}, is too large: {err}") from None


def task_setup(p, key: str, task_args: dict | None = None) -> TaskSetup:
    """The TaskSetup of task `key` of preset `p` (an outside tunnel's: `presets.outside_setup`, after
    its checks), with `task_args` applied: the preset's task fields replaced and said in the label
    (its rows are another task's), or an outside tunnel's factory options."""
    if is_outside_task(key):
        task = outside_task(key, task_args)
        check_task(task)  # shapes, normalisation, determinism, the posterior against its sampler (and brute force)
        return outside_setup(p, task)
    setup = p.tasks[key]
    if not task_args:
        return setup
    if "task" in task_args:  # it would silently make another task, with this one's settings
        fields = ", ".join(f.name for f in dataclasses.fields(task_from_config(setup.task)) if f.init)
        raise ValueError(f"--task-args for task {key!r}: 'task' is not a setting of task {setup.task['task']!r} (the "
                         f"task is --task's); its settings: {fields}")
    config = {**setup.task, **task_args}
    try:
        task = task_from_config(config)
    except (TypeError, ValueError) as err:
        raise ValueError(f"--task-args for task {key!r}: {err}") from None
    scored = scored_sets(setup, task, f"--task-args for task {key!r}")
    changed = " ".join(f"{k}={v}" for k, v in sorted(task_args.items()))
    # a set the new task lacks (the paper's bijection has no query: no 'values+query') is left out
    return dataclasses.replace(setup, task=config, label=f"{setup.label} [{changed}]", eval_scored=scored)


def scored_sets(setup: TaskSetup, task: Task, where: str) -> tuple[str, ...]:
    """The preset's scored position sets that `task` has (the paper's bijection has no query: no
    'values+query'); ValueError naming `where` when it has none of them."""
    scored = tuple(name for name in setup.eval_scored if _can_score(task, name))
    if setup.eval_scored and not scored:
        raise ValueError(f"{where}: the task they make has none of the preset's scored position sets "
                         f"{list(setup.eval_scored)}")
    return scored


def _can_score(task: Task, name: str) -> bool:
    """Whether `task` has the positions of the scored set `name` (e.g. a query for 'values+query')."""
    try:
        evaluation_tasks(task, (), (name,))
    except ValueError:
        return False
    return True


def trial_forward(job) -> str:
    """Build two members for the job's task (factory, trial forward, path choice: vmap over
    members needs two to be tried) before anything runs, so a broken model fails here; says which
    forward path the job's own members get. The trial's two members are not the job's: the
    adapter's note is left to the job's model (`adapter.notes_off`)."""
    import warnings

    from ..models import get_model
    from ..models.adapter import notes_off

    with warnings.catch_warnings(), notes_off():
        warnings.simplefilter("ignore", RuntimeWarning)  # the fallback is reported in the line instead
        model = get_model(job.arch, job.task, seeds=[0, 1], max_len=job.max_len, **job.model)
    n = len(job.seeds)
    if model.path == "vmap":
        return f"vmap over its {n} member{'s' if n != 1 else ''} (one batched call)"
    if n == 1:
        return f"one forward call for its 1 member (vmap over members fails: {model.cfg.fallback})"
    return f"a loop over its {n} members, one call each (vmap failed: {model.cfg.fallback})"


