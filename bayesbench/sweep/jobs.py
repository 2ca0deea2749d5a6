"""From a point to a job: one job's settings, resolved against a preset into a `Job` before
anything runs.

A *point* is a plain dict of one shape (`POINT`): the preset, the task and architecture, the
seeds, the learning rate and steps, training, task and model settings over the preset's, the
device and attention backend, the checkpoint interval, the evaluation set's size, the names of
a sweep's size and of an outside model, the torch threads. A sweep file's entries
(`sweep/sweep_file.py`, `sweep/expand.py`) and a command line's selections (`make_jobs`: `bayesbench
run`, `train`, `cli/model_option.py`) are both points, and `resolve` is the one function that
turns a point into a `Job`: task options and the label that says them, model options over the
preset's (a size given replaces the capacity match), the capacity match, the preset's warm-up
kept a small fraction of fewer steps, the `TrainConfig`. Its errors are `SettingError`s naming
the point's setting (`task_options`, `models`, `train`); callers put their source in front (the
flag, or the sweep file and job).

A `Job` knows its task, model and training configuration and its identity (`bayesbench.identity`;
its key is `sweep.expand.job_key`), and opens its Trainer (`Job.open_trainer`). The sweep driver
runs jobs (`sweep/driver.py`: skip what is stored, train the rest, store each job's rows once).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..checks import SettingError
from ..identity import RunSpec
from ..metric_table import metric_versions
from ..models import TaskShape, count_params, list_models
from ..models.outside import preset_options
from ..models.registry import is_outside, model_options
from ..presets import Preset, TaskSetup, get_preset, labelled, outside_setup, registered_setup
from ..scoring.evaluate import evaluation_tasks, max_eval_len
from ..tasks import Task, is_outside_task, outside_task, task_from_config
from ..tasks.base import available_bytes, check_fits, format_bytes
from ..tasks.check import check_task
from ..tasks.registry import get_task, list_tasks, task_settings
from ..training.checkpoint import run_code
from ..training.config import TrainConfig
from ..training.run import open_trainer
from .request import FieldError, field_error

#: A point: one job's settings (None or empty: the preset's). `seeds` None: the task's seeds
#: 0..N-1; `lr`, `steps`: over the preset's training; `train`: other TrainConfig fields over it;
#: `models`: arch -> options over the preset's config of that arch (a sweep's size may set
#: several: a capacity-matched model follows the transformer it matches); `device` None: the
#: preset's; `size`: a sweep's name of the model size (`SweepJob.size`); `name`: an outside
#: model's leaderboard name; `threads`: torch threads it trains with.
POINT: dict[str, Any] = {
    "preset": "quick", "task": None, "arch": None, "seeds": None, "lr": None, "steps": None, "train": {},
         "task_options": {}, "models": {}, "device": None, "attention": None, "compile": False, "precision": None,
         "checkpoint_every": None, "eval_sequences": None, "size": None, "name": None, "threads": 1}


def point(**settings) -> dict:
    """A point: `settings` over `POINT`'s defaults (an unknown setting is a TypeError)."""
    unknown = sorted(set(settings) - set(POINT))
    if unknown:
        raise TypeError(f"unknown point settings {unknown}; settings: {', '.join(POINT)}")
    return {**POINT, **settings}


def resolve_device(device: str | None) -> str:
    """'auto' (or None) -> 'cuda' when available, else 'cpu'; a named device must exist."""
    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        kind = torch.device(device).type
    except RuntimeError:
        raise FieldError("device", f"{{device}} must be cpu, cuda, cuda:N or auto, got {device!r}") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise FieldError("device", f"{{device}} {device}: no CUDA device is available here (use cpu or auto)")
    return device


def check_triton(device: str) -> None:
    """--attention triton needs the triton package and a CUDA device (or Triton's interpreter,
    TRITON_INTERPRET=1): checked before any work, not at the first forward pass."""
    import importlib.util

    from ..kernels.config import interpreting

    if importlib.util.find_spec("triton") is None:
        raise FieldError("attention", "{attention} triton needs the triton package (pip install "
                         "'bayesbench[kernels]'); use {attention} sdpa or eager")
    if torch.device(device).type != "cuda" and not interpreting():
        raise FieldError("attention", f"{{attention}} triton needs a CUDA device, and this run is on {device}; use "
                         "{attention} sdpa or eager (or set TRITON_INTERPRET=1 for Triton's slow interpreter on the "
                         "CPU)")


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
    cfg = setup.model(arch)  # the preset's config, else the capacity match to the task's transformer
    if "match" in cfg:
        ref = cfg.pop("match")
        if "match_params" not in model_options(arch):
            raise ValueError(f"arch {arch!r} cannot be capacity-matched to the {ref} on task {setup.label!r} (its "
                             f"builder takes no match_params), and this preset names no config for it: give its "
                             f"size (model options: {', '.join(model_options(arch))})")
        ref_cfg = resolve_model(setup, ref, task, max_len, attention)
        cfg["match_params"] = count_params(ref, TaskShape.from_task(task, max_len), **ref_cfg)
    if attention is not None and arch == "transformer":
        cfg["attention"] = attention
    return cfg


@dataclass(frozen=True)
class Job:
    """One training job: an ensemble of seeds of one architecture on one task, every setting
    resolved (`resolve`)."""

    preset: str
    task_key: str  # the task's key in the preset ('bijection'); the job's own key is `job_key`, a hash
    setup: TaskSetup
    arch: str
    model: dict
    train: TrainConfig
    seeds: tuple[int, ...]
    device: str
    name: str | None = None  # leaderboard name when arch is an outside model ('./mine.py:build' -> 'mine')
    threads: int = 1  # torch threads it trains with
    # what the command line or sweep file changed from the preset ({"train": {...}, "task": {...},
    # "model": {...}}), for the record; the resolved configs above already hold every change
    overrides: dict = dataclasses.field(default_factory=dict, compare=False)
    # a tuned job's search (`sweep/tune.py`): what its identity holds (`TuneSpec.identity` and the
    # job's role, candidate chosen), and what its rows say besides (the selection's scores, flags)
    tuning: dict | None = None
    tuning_note: dict | None = dataclasses.field(default=None, compare=False)

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
        return {**run_code(self.task, self.arch), "metrics": metric_versions()}

    @functools.cached_property
    def spec(self) -> RunSpec:
        """What decides the job's numbers (`bayesbench.identity.RunSpec`), made once from the
        resolved job: the trainer (`one_job.train_and_score` gives it to `open_trainer`), its
        checkpoint, the scorer and the rows read the identity from it."""
        setup = self.setup
        return RunSpec(task=self.task.config(), label=setup.label, eval_lengths=tuple(setup.eval_lengths),
                       eval_scored=tuple(setup.eval_scored), eval_sequences=setup.eval_sequences, arch=self.arch,
                       model=self.model, max_len=self.max_len, train=self.train.identity(),
                       device_type=torch.device(self.device).type, threads=self.threads, code=self.code,
                       tuning=self.tuning)

    @property
    def identity(self) -> dict:
        """The job's identity without its seeds (`spec.identity`): its key's (`sweep.expand.job_key`),
        its checkpoint's and its rows'."""
        return self.spec.identity

    @functools.cached_property
    def params(self) -> int:
        """Parameters per ensemble member."""
        return count_params(self.arch, self.task, max_len=self.max_len, **self.model)

    def open_trainer(self, run_dir: str | None, **kwargs):
        """The job's Trainer, in its run directory (`training.run.open_trainer`: run lock,
        leftovers removed, the checkpoint loaded with resume=True); use it as a context manager.
        Keyword arguments: run_id, meta, resume, say, spec (the job's `spec`, for a trainer of
        the job as keyed)."""
        return open_trainer(self.task, self.arch, list(self.seeds), self.train, model_cfg=self.model,
                            max_len=self.max_len, device=self.device, run_dir=run_dir, **kwargs)

    def describe(self) -> str:
        """'task label / arch', how messages name the job."""
        return f"{self.setup.label} / {self.arch}"

    def meta(self, group_id: str | None) -> dict:
        return {"preset": self.preset, "label": self.setup.label, "group_id": group_id, "name": self.name,
                "eval_lengths": list(self.setup.eval_lengths), "eval_scored": list(self.setup.eval_scored),
                "eval_sequences": self.setup.eval_sequences, "overrides": dict(self.overrides), "code": self.code,
                **({"tuning": {**self.tuning, **(self.tuning_note or {})}} if self.tuning else {})}


# ---------------------------------------------------------------- the resolver

def resolve(settings: dict, place: Callable[[str], str], setups: dict | None = None) -> Job:
    """The `Job` of one point (see `POINT`); `place` maps the device asked for (the point's, else
    the preset's) to the one the job runs on. `setups`: a cache of task setups shared by the
    points of one command (an outside tunnel is imported and checked once).

    Raises SettingError naming the point's setting that cannot be resolved: `task_options` (the
    task they make), `models` (the model options, or the architecture's config for this task),
    `train` (the TrainConfig)."""
    settings = point(**settings)
    preset = get_preset(settings["preset"])
    key, arch, options = settings["task"], settings["arch"], settings["task_options"]
    cache_key = (preset.name, key, json.dumps(options, sort_keys=True, default=str))
    cache = {} if setups is None else setups
    if cache_key not in cache:
        cache[cache_key] = task_setup(preset, key, options)
    setup = cache[cache_key]
    if settings["models"]:
        setup = dataclasses.replace(setup, models={**setup.models, **{
            name: with_model_args(setup.models.get(name, {}) if is_outside(name) else setup.model(name), given)
            for name, given in settings["models"].items()}})
    if settings["eval_sequences"] is not None:
        setup = dataclasses.replace(setup, eval_sequences=settings["eval_sequences"])
    task = make_task(setup)
    max_len = max_eval_len(task, setup.eval_lengths, setup.eval_scored)
    try:
        model = resolve_model(setup, arch, task, max_len, settings["attention"])
        count_params(arch, TaskShape.from_task(task, max_len), **model)  # a bad option fails here
    except (TypeError, ValueError) as err:
        raise SettingError(str(err), ("models",)) from None
    try:
        train = TrainConfig(**train_settings(preset, setup, settings))
    except (TypeError, ValueError) as err:
        raise SettingError(str(err), ("train",)) from None
    seeds = tuple(range(setup.seeds)) if settings["seeds"] is None else tuple(int(s) for s in settings["seeds"])
    overrides = {name: dict(given) for name, given in (("train", settings["train"]), ("task", options),
                                                      ("model", settings["models"].get(arch))) if given}
    return Job(preset.name, key, setup, arch, model, train, seeds, place(settings["device"] or preset.device),
               settings["name"], settings["threads"], overrides)


def train_settings(preset: Preset, setup: TaskSetup, settings: dict) -> dict:
    """The TrainConfig fields of a point: the preset's training of its task, then the point's
    lr, precision and steps (the preset's warm-up scaled to them, `scaled_warmup`), checkpoint
    interval (else the preset's) and compile switch, then its `train` fields."""
    out = dict(setup.train)
    for name in ("lr", "precision", "steps"):
        if settings[name] is not None:
            out[name] = settings[name]
    if settings["steps"] is not None and "warmup_steps" not in settings["train"]:  # a warm-up given stays
        out["warmup_steps"] = scaled_warmup(out.get("warmup_steps", 0), settings["steps"])
    every = settings["checkpoint_every"]
    out["checkpoint_every"] = preset.checkpoint_every if every is None else every
    out["compile"] = settings["compile"]
    out.update(settings["train"])
    return out


def scaled_warmup(warmup: int, steps: int) -> int:
    """The preset's warm-up for a run of `steps` steps: kept while it is at most a tenth of them,
    else 1% of them (a warm-up longer than the run, or most of it, is no longer a warm-up)."""
    return warmup if warmup <= steps // 10 else max(0, steps // 100)


# Model options a capacity match chooses itself: giving one (or match_params) sizes the model
# directly, so the preset's match to the transformer's parameter count is dropped.
MATCHED_SIZES = frozenset({"width", "d_model", "d_embed", "d_inner", "d_ffn", "d_head", "match", "match_params"})


def with_model_args(preset_cfg: dict, model_args: dict) -> dict:
    """The preset's config of one architecture with `model_args` (`--model-args`, a sweep's
    `models`) over it: a size given replaces the preset's capacity match (`match`,
    `match_params`), and `match_params=null` means no match."""
    cfg = dict(preset_cfg)
    if MATCHED_SIZES & set(model_args):
        cfg.pop("match", None)
        cfg.pop("match_params", None)
    cfg.update(model_args)
    if "match_params" in cfg and cfg["match_params"] is None:
        del cfg["match_params"]
    return cfg


def preset_setup(preset: Preset, key: str) -> TaskSetup:
    """The setup of task `key` in `preset`: the one the preset names, else (a registered tunnel it
    does not name, e.g. a new tunnel file) the task at its own defaults with the preset's settings
    for tunnels it does not name (`presets.registered_setup`)."""
    if key in preset.tasks:
        return preset.tasks[key]
    if key not in list_tasks():
        raise ValueError(f"task {key!r} is not in preset {preset.name!r}; available: "
                         f"{', '.join(preset_task_names(preset))} (or your own tunnel: 'pkg.mod:build', "
                         "'./file.py:build')")
    try:
        task = get_task(key)
    except (TypeError, ValueError) as err:
        raise ValueError(f"task {key!r} is not in preset {preset.name!r}, and its defaults make no task: {err}") \
            from None
    return registered_setup(preset, task)


def preset_task_names(preset: Preset) -> list[str]:
    """Every task `preset` can run by name: its own (run by default), then every other registered tunnel."""
    return [*preset.tasks, *(name for name in list_tasks() if name not in preset.tasks)]


def task_setup(preset: Preset, key: str, options: dict | None = None) -> TaskSetup:
    """The TaskSetup of task `key` of `preset` with `options` applied: the preset's task fields
    replaced, said in its label (`presets.labelled`: the settings that ran; its rows are another
    task's; options all equal to the preset's own values give the preset's task), and the
    scored position sets the new task lacks left out; or an outside tunnel ('pkg.mod:build',
    './file.py:build'), imported and checked (`tasks.check.check_task`) and trained with the
    preset's settings for outside tunnels (`presets.outside_setup`), `options` its factory's."""
    task: Task
    if is_outside_task(key):
        task = outside_task(key, options)
        check_task(task)  # shapes, normalisation, determinism, the posterior against its sampler (and brute force)
        return outside_setup(preset, task)
    setup = preset_setup(preset, key)  # the preset's, else a registered tunnel's at its defaults
    if not options:
        return setup
    if "task" in options:  # it would silently make another task, with this one's settings
        fields = ", ".join(task_settings(task_from_config(setup.task)))
        raise SettingError(f"'task' is not a setting of task {setup.task['task']!r} (it names the task, not one of "
                           f"its settings); its settings: {fields}", ("task_options",))
    config = {**setup.task, **options}
    try:
        task = task_from_config(config)
    except (TypeError, ValueError) as err:
        raise SettingError(str(err), ("task_options",)) from None
    base = task_from_config(setup.task).config()
    if task.config() == base:  # every option the preset's own value: the preset's task, its rows
        return setup
    scored = tuple(name for name in setup.eval_scored if _can_score(task, name))
    if setup.eval_scored and not scored:
        raise SettingError(f"the task they make has none of the preset's scored position sets "
                           f"{list(setup.eval_scored)}", ("task_options",))
    return dataclasses.replace(setup, task=config, label=labelled(setup.label, base, task.config()),
                               eval_scored=scored)


def _can_score(task: Task, name: str) -> bool:
    """Whether `task` has the positions of the scored set `name` (e.g. a query for 'values+query')."""
    try:
        evaluation_tasks(task, (), (name,))
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------- the command line's jobs

def default_archs(preset: Preset, key: str) -> tuple[str, ...]:
    """The architectures a task runs when none are named: its own defaults, else the preset's (a
    tunnel the preset does not name, registered or outside: the preset's `outside` defaults)."""
    setup = preset.tasks.get(key) or preset.outside
    return (setup.archs if setup is not None else None) or preset.archs


def make_jobs(preset: str, *, tasks: list[str] | None = None, archs: list[str] | None = None,
              seeds: list[int] | None = None, steps: int | None = None, device: str | None = None,
              attention: str | None = None, compile: bool = False, precision: str | None = None,
              checkpoint_every: int | None = None, eval_sequences: int | None = None,
              train: dict | None = None, place: Callable[[str], str] | None = None,
              task_args: dict | None = None, model_args: dict | None = None, name: str | None = None,
              threads: int = 1, setups: dict | None = None) -> list[Job]:
    """Every (task, arch) of the preset, or of the command line's selections, as resolved jobs.

    Without `archs`, each task runs its own default architectures (`default_archs`); a named arch
    (a built-in one or an outside model's spec, `name` its leaderboard name) must be configured for
    every selected task. A task may also be an outside tunnel ('pkg.mod:build', './file.py:build';
    `tasks.outside`), checked before anything else. `train`: TrainConfig fields set for every job
    (`--train-args` and the curve options); `task_args`: the task's fields over the preset's (an
    outside tunnel: its factory's options; `--task-args`); `model_args`: options over the one
    selected architecture's config (`--model-args`). `place` maps the device asked for (`device`,
    else the preset's) to the one the jobs run on (default `resolve_device`). Each selection is a
    point (`POINT`), resolved by `resolve` (`setups`: its cache of task setups, shared by calls
    for the same tasks); errors name the flag. The jobs are checked to fit the device
    (`check_ensemble_fits`, `check_sets_fit`)."""
    p = get_preset(preset)
    keys = list(tasks or p.tasks)
    for selection, names in (("tasks", keys), ("archs", archs or [])):
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise FieldError(selection, f"{{{selection}}} names {', '.join(map(repr, twice))} twice: each job is "
                             "trained and stored once")
    for k in keys:
        if not is_outside_task(k):
            try:
                preset_setup(p, k)  # a task the preset names or any registered tunnel; else the error names them
            except ValueError as err:
                raise field_error(err, "tasks") from None
    known = list_models()
    for a in archs or ():
        if a not in known and not is_outside(a):
            raise FieldError("archs", f"unknown arch {a!r}; available: {', '.join(known)}")
    place = place or resolve_device
    if attention == "triton":
        check_triton(place(device or p.device))
    if model_args and len(archs or []) != 1:
        raise FieldError("model_args", "{model_args} are one architecture's options: name exactly one arch "
                         "({archs} A or {model})")
    if task_args and "task" in task_args:
        for k in keys:
            if k in p.tasks:
                fields = ", ".join(task_settings(task_from_config(p.tasks[k].task)))
                raise FieldError("task_args", f"{{task_args}} for task {k!r}: 'task' is not a setting of task "
                                 f"{p.tasks[k].task['task']!r} (the task is {{task}}'s); its settings: {fields}")
    common = dict(preset=preset, seeds=seeds, steps=steps, train=dict(train or {}), task_options=dict(task_args or {}),
                  device=device, attention=attention, compile=compile, precision=precision,
                  checkpoint_every=checkpoint_every, eval_sequences=eval_sequences, name=name, threads=threads)
    jobs, setups = [], {} if setups is None else setups
    for k in keys:
        for a in archs or default_archs(p, k):
            selected = point(**common, task=k, arch=a, models={a: dict(model_args)} if model_args else {})
            try:
                job = resolve(selected, place, setups)
            except SettingError as err:
                raise _field_error(err, selected) from None
            check_ensemble_fits(job)
            check_sets_fit(job)
            jobs.append(job)
    return jobs


def _field_error(err: SettingError, selected: dict) -> ValueError:
    """A resolver's error as a `FieldError` about the request's field that gave the setting, named
    in front (a plain ValueError for the preset's own settings)."""
    setting = err.fields[0] if err.fields else None
    if setting == "task_options" and selected["task_options"]:
        return field_error(err, "task_args", f"{{task_args}} for task {selected['task']!r}: ")
    given = selected["models"].get(selected["arch"])
    if setting == "models" and given:
        if is_outside(selected["arch"]):
            return field_error(err, "model_args", f"{{model_args}} {' '.join(f'{k}={v}' for k, v in given.items())}: ")
        return field_error(err, "model_args", f"{{model_args}} for {selected['arch']}: ")
    if setting == "train":
        return field_error(err, "train_args", "training settings: ")
    return ValueError(str(err))


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
        cause = (f"the model ({{model_args}} {given}) is too large for this device; make it smaller" if given else
                 "the model is too large for this device; make it smaller ({model_args}, e.g. d_model)")
        raise FieldError("model_args", f"{job.describe()}: one member of {job.params:,} parameters needs at least "
                         f"{format_bytes(one)} {state}, and {job.device} has {format_bytes(free)} free: {cause}")
    raise FieldError("seeds", f"{job.describe()}: an ensemble of {len(job.seeds):,} members of {job.params:,} "
                     f"parameters needs at least {format_bytes(one * len(job.seeds))} {state}, and {job.device} has "
                     f"{format_bytes(free)} free; at most {free // one:,} members fit: use fewer seeds ({{seeds}})")


def check_sets_fit(job: Job) -> None:
    """Refuse, before a run directory is made, an evaluation or learning-curve set too large to
    sample on the job's device, naming the setting that sizes it."""
    sets = [("the evaluation set", "eval_sequences", job.setup.eval_sequences)]
    if job.train.curves:
        sets.append(("the learning-curve set", "curve_sequences", job.train.curve_sequences))
    for what, name, n in sets:
        try:
            check_fits(job.task, n, torch.device(job.device))
        except ValueError as err:
            raise field_error(err, name, f"{job.describe()}: {what} of {n:,} sequences, {name} ({{{name}}}), is "
                              "too large: ") from None


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
    fallback = getattr(model, "cfg").fallback  # each architecture's config (nn.Module's attributes are untyped)
    if model.path == "vmap":
        return f"vmap over its {n} member{'s' if n != 1 else ''} (one batched call)"
    if n == 1:
        return f"one forward call for its 1 member (vmap over members fails: {fallback})"
    return f"a loop over its {n} members, one call each (vmap failed: {fallback})"


