"""Sweep files: a grid of training jobs as data, read and checked before anything runs.

Two formats (docs/sweeps.md):

- TOML: top-level keys give the grid's axes (`tasks`, `archs`, `sizes`, `lrs`, `seeds`) and the
  shared settings (`preset`, `steps`, `train`, `device`, ...). Every combination of the axes is a
  point; the seeds of a point are trained as one ensemble (`ensemble = N` splits them into
  groups of N, one job each).
- Python (as zoology's configs): a module that sets `SWEEP` (a dict with the TOML keys) or `JOBS`
  (a list of points, each a dict with `task`, `arch`, `seeds` and optionally the per-point keys
  below), plus optionally `NAME` and `RESOURCES`.

An arch may be a model from outside the package, as `bayesbench run --model` takes it
('pkg.mod:build', './file.py:build', 'hf:gpt2'; `bayesbench.models.outside`): file paths are
taken from the sweep file's folder and stored absolute, and the model is imported while the
file is checked.

`load_sweep` returns a `SweepSpec`: the sweep's name, its points (plain dicts of one shape) and
the resources each job asks of a Ray cluster. Every user mistake is a ValueError that names the
file, the key and the rule.
"""

from __future__ import annotations

import difflib
import os
import runpy
from dataclasses import dataclass, field, fields

from ..checks import SettingError, read_toml
from ..models import list_models
from ..models.registry import is_outside
from ..presets import PRESETS, get_preset
from ..training.config import TrainConfig
from ..trust import UntrustedCode

# Keys of the TOML file (and of a Python file's SWEEP dict).
GRID_KEYS = ("name", "preset", "tasks", "archs", "seeds", "ensemble", "lrs", "steps", "sizes", "train",
             "task_options", "device", "attention", "checkpoint_every", "eval_sequences", "resources", "tune")
# Keys of one point (a Python file's JOBS entries; the grid expands into these).
POINT_KEYS = ("preset", "task", "arch", "seeds", "lr", "steps", "size", "models", "train", "task_options", "device",
              "attention", "checkpoint_every", "eval_sequences")
RESOURCE_KEYS = ("cpus", "gpus")
# TrainConfig fields a sweep may set under `train` (lr and steps have their own keys; the sweep
# decides checkpointing and compile is not a sweep axis).
TRAIN_KEYS = tuple(f.name for f in fields(TrainConfig) if f.name not in ("steps", "lr", "checkpoint_every", "compile"))
# The TrainConfig fields left out of `train`, and where a sweep sets them instead.
OWN_KEYS = {"lr": "a grid's learning rates are its top-level `lrs = [...]` (a JOBS point's `lr`)",
            "steps": "it is a key of its own, `steps = N` (top level, or a JOBS point's)",
            "checkpoint_every": "it is a key of its own, `checkpoint_every = N`",
            "compile": "torch.compile is not a sweep setting"}
DEVICES = ("cpu", "cuda", "auto")
OUTSIDE_FORMS = "'pkg.mod:build', './file.py:build' (from the sweep file's folder), 'hf:gpt2'"
ATTENTION = ("sdpa", "eager", "triton")


@dataclass(frozen=True)
class Resources:
    """What one job asks of a Ray cluster: CPU cores (also its torch threads) and GPUs.

    gpus: a number (a fraction below 1 lets several jobs share one GPU) or "auto": by the job's
    size (see `bayesbench.sweep.expand.gpu_share`). Ignored for CPU jobs.
    """

    cpus: int = 1
    gpus: float | str = "auto"


@dataclass(frozen=True)
class SweepSpec:
    name: str
    path: str
    points: tuple[dict, ...]
    resources: Resources = field(default_factory=Resources)
    # a learning-rate search for every point (`sweep/tune.py`: the preset's grid per task with
    # these settings over it), None: the points as they are
    tune: dict | None = None


def _where(path: str, key: str) -> str:
    return f"sweep file {path}: {key}"


def _unknown(path: str, where: str, keys, known) -> None:
    for k in keys:
        if k not in known:
            close = difflib.get_close_matches(str(k), known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"sweep file {path}: unknown key {k!r} in {where}{hint}; known keys: {', '.join(known)}")


def _int(path: str, key: str, value, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{_where(path, key)} must be an integer >= {minimum}, got {value!r}")
    return value


def _str_list(path: str, key: str, value) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{_where(path, key)} must be a list of names, got {value!r}")
    if not value:
        raise ValueError(f"{_where(path, key)} is empty: the grid would have no jobs")
    if len(set(value)) != len(value):
        raise ValueError(f"{_where(path, key)} lists a name twice: {value!r}")
    return list(value)


def _seeds(path: str, key: str, value) -> tuple[int, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(s, int) and not isinstance(s, bool) for s in value):
        raise ValueError(f"{_where(path, key)} must be a list of integers, got {value!r}")
    if not value:
        raise ValueError(f"{_where(path, key)} is empty: the grid would have no jobs")
    if any(s < 0 for s in value):
        raise ValueError(f"{_where(path, key)} must be non-negative, got {value!r}")
    dup = sorted({s for s in value if list(value).count(s) > 1})
    if dup:
        raise ValueError(f"{_where(path, key)} has duplicates {dup}: each seed is one ensemble member, "
                         "trained and stored once")
    return tuple(value)


def _train_rules(path: str, key: str, settings: dict) -> None:
    """TrainConfig's own rules on a sweep's training settings (`TrainConfig.check_settings`), the
    error naming the file and the key: "sweep file s.toml: train.beta1 must be ..."."""
    try:
        TrainConfig.check_settings(settings)
    except SettingError as err:
        raise ValueError(f"{_where(path, key)}.{err}") from None


def _lr(path: str, key: str, value) -> float:
    try:
        TrainConfig.check_settings({"lr": value})
    except SettingError as err:  # "lr must be ..." said of the key that holds it ("lrs must be ...")
        raise ValueError(f"{_where(path, key)} {str(err).removeprefix('lr ')}") from None
    return float(value)


def _choice(path: str, key: str, value, choices) -> str:
    if value not in choices:
        raise ValueError(f"{_where(path, key)} must be one of {', '.join(map(str, choices))}, got {value!r}")
    return value


def _device(path: str, key: str, value) -> str:
    if not isinstance(value, str) or not (value in DEVICES or value.startswith("cuda:")):
        raise ValueError(f"{_where(path, key)} must be cpu, cuda, cuda:N or auto, got {value!r}")
    return value


def _arch(path: str, where: str, name) -> str:
    """A built-in arch, or an outside model in its canonical form (`models.outside.normalise`;
    a relative file path is taken from the sweep file's folder, so the job keys do not depend on
    where the sweep is started). An outside model is imported here, so a missing module, file or
    factory fails before anything runs, with `models.outside`'s message."""
    if is_outside(name):
        from ..models.outside import load_factory, normalise

        try:
            spec = normalise(name, base=os.path.dirname(os.path.abspath(path)))
            load_factory(spec)
        except UntrustedCode:  # it names the sweep file itself
            raise
        except ValueError as err:
            raise ValueError(f"sweep file {path}: {where} entry {name!r}: {err}") from None
        return spec
    known = list(list_models())
    if name not in known:
        close = difflib.get_close_matches(str(name), known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"sweep file {path}: unknown arch {name!r} in {where}{hint}; available: {', '.join(known)} "
                         f"(or your own model: {OUTSIDE_FORMS})")
    return name


def _models(path: str, key: str, value) -> dict[str, dict]:
    """{arch: model-config overrides}: merged into the preset's configuration of each arch (for
    an outside model: keyword arguments of its factory)."""
    if not isinstance(value, dict):
        raise ValueError(f"{_where(path, key)} must be a table of arch = {{model settings}}, got {value!r}")
    out = {}
    for arch, cfg in value.items():
        if not is_outside(arch):
            _unknown(path, key, [arch], list(list_models()))
        if not isinstance(cfg, dict):
            raise ValueError(f"{_where(path, f'{key}.{arch}')} must be a table of model settings, got {cfg!r}")
        out[_arch(path, key, arch)] = dict(cfg)
    return out


def _train(path: str, key: str, value) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"{_where(path, key)} must be a table of training settings, got {value!r}")
    for k, where in OWN_KEYS.items():
        if k in value:
            raise ValueError(f"{_where(path, key)}: {k} is not set under train: {where}")
    _unknown(path, key, value, TRAIN_KEYS)
    _train_rules(path, key, value)
    return dict(value)


def _task_options(path: str, key: str, value) -> dict:
    """Settings merged into the preset's task configuration (e.g. {supervise = "authors"}); the
    task is built from them when the jobs are resolved, so a bad value fails before anything runs."""
    if not isinstance(value, dict):
        raise ValueError(f"{_where(path, key)} must be a table of task settings, got {value!r}")
    if "task" in value:
        raise ValueError(f"{_where(path, key)} cannot change which task it is ('task'); use the tasks key")
    return dict(value)


def _check_point(path: str, where: str, point: dict) -> dict:
    """One job's settings, checked: the same rules for TOML grids and Python JOBS lists."""
    _unknown(path, where, point, POINT_KEYS)
    for required in ("task", "arch", "seeds"):
        if required not in point:
            raise ValueError(f"sweep file {path}: {where} has no {required!r}")
    preset = _choice(path, f"{where}.preset", point.get("preset", "quick"), tuple(PRESETS))
    p = get_preset(preset)
    task = point["task"]
    if task not in p.tasks:
        raise ValueError(f"sweep file {path}: unknown task {task!r} in {where} (preset {preset!r} has "
                         f"{', '.join(p.tasks)})")
    arch = _arch(path, where, point["arch"])
    out = {"preset": preset, "task": task, "arch": arch, "seeds": _seeds(path, f"{where}.seeds", point["seeds"]),
           "lr": None if point.get("lr") is None else _lr(path, f"{where}.lr", point["lr"]),
           "steps": None if point.get("steps") is None else _int(path, f"{where}.steps", point["steps"]),
           "size": point.get("size"), "models": _models(path, f"{where}.models", point.get("models", {})),
           "train": _train(path, f"{where}.train", point.get("train", {})),
           "task_options": _task_options(path, f"{where}.task_options", point.get("task_options", {})),
           "device": _device(path, f"{where}.device", point.get("device", p.device)),
           "attention": None if point.get("attention") is None
           else _choice(path, f"{where}.attention", point["attention"], ATTENTION),
           "checkpoint_every": None if point.get("checkpoint_every") is None
           else _int(path, f"{where}.checkpoint_every", point["checkpoint_every"]),
           "eval_sequences": None if point.get("eval_sequences") is None
           else _int(path, f"{where}.eval_sequences", point["eval_sequences"])}
    if out["size"] is not None and not isinstance(out["size"], str):
        raise ValueError(f"{_where(path, where + '.size')} must be a name, got {out['size']!r}")
    return out


def _resources(path: str, value) -> Resources:
    if value is None:
        return Resources()
    if not isinstance(value, dict):
        raise ValueError(f"{_where(path, 'resources')} must be a table (cpus, gpus), got {value!r}")
    _unknown(path, "resources", value, RESOURCE_KEYS)
    cpus = _int(path, "resources.cpus", value.get("cpus", 1))
    gpus = value.get("gpus", "auto")
    if gpus != "auto" and (isinstance(gpus, bool) or not isinstance(gpus, (int, float)) or not gpus > 0
                           or (gpus > 1 and gpus != int(gpus))):
        raise ValueError(f"{_where(path, 'resources.gpus')} must be \"auto\", a fraction in (0, 1] or a whole "
                         f"number of GPUs, got {gpus!r}")
    return Resources(cpus, gpus)


def expand_grid(path: str, grid: dict) -> list[dict]:
    """A TOML-style grid -> its points, in a stable order (task, size, arch, lr, seed group)."""
    _unknown(path, "the sweep", grid, GRID_KEYS)
    preset = _choice(path, "preset", grid.get("preset", "quick"), tuple(PRESETS))
    p = get_preset(preset)
    tasks = _str_list(path, "tasks", grid.get("tasks", list(p.tasks)))
    for t in tasks:
        if t not in p.tasks:
            raise ValueError(f"sweep file {path}: unknown task {t!r} in tasks (preset {preset!r} has "
                             f"{', '.join(p.tasks)})")
    explicit_archs = "archs" in grid
    archs = _str_list(path, "archs", grid["archs"]) if explicit_archs else \
        sorted({a for t in tasks for a in (p.tasks[t].archs or p.archs)})
    archs = [_arch(path, "archs", a) for a in archs]
    if len(set(archs)) != len(archs):
        raise ValueError(f"{_where(path, 'archs')} names one model twice (relative paths are taken from the sweep "
                         f"file's folder): {archs!r}")
    lrs = grid.get("lrs", [None])
    if lrs != [None]:
        if not isinstance(lrs, list) or not lrs:
            raise ValueError(f"{_where(path, 'lrs')} must be a non-empty list of learning rates, got {lrs!r}")
        lrs = [_lr(path, "lrs", v) for v in lrs]
        if len(set(lrs)) != len(lrs):
            raise ValueError(f"{_where(path, 'lrs')} lists a learning rate twice: {lrs!r}")
    sizes = grid.get("sizes")
    if sizes is None:
        size_items: list[tuple[str | None, dict]] = [(None, {})]
    else:
        if not isinstance(sizes, dict) or not sizes:
            raise ValueError(f"{_where(path, 'sizes')} must be a non-empty table of named sizes "
                             f"([sizes.NAME] with arch = {{model settings}}), got {sizes!r}")
        size_items = [(name, _models(path, f"sizes.{name}", cfg)) for name, cfg in sizes.items()]
    ensemble = grid.get("ensemble")
    if ensemble is not None:
        ensemble = _int(path, "ensemble", ensemble)
    shared = {k: grid[k] for k in ("steps", "train", "task_options", "device", "attention", "checkpoint_every",
                                   "eval_sequences") if k in grid}
    for k in ("steps", "checkpoint_every", "eval_sequences"):  # checked here so errors name the grid's key
        if k in shared:
            _int(path, k, shared[k])
    if "train" in shared:
        _train(path, "train", shared["train"])
    if "task_options" in shared:
        _task_options(path, "task_options", shared["task_options"])
    if "device" in shared:
        _device(path, "device", shared["device"])
    if "attention" in shared:
        _choice(path, "attention", shared["attention"], ATTENTION)
    points = []
    def task_archs(task: str) -> list[str]:  # without `archs`, each task runs its preset defaults (as `run` does)
        return archs if explicit_archs else list(p.tasks[task].archs or p.archs)

    combos = [(task, size_item, arch, lr) for task in tasks for size_item in size_items
              for arch in task_archs(task) for lr in lrs]
    for task, (size, models), arch, lr in combos:
        seeds = _seeds(path, "seeds", grid["seeds"]) if "seeds" in grid else tuple(range(p.tasks[task].seeds))
        group = ensemble or len(seeds)
        for i in range(0, len(seeds), group):
            points.append({**shared, "preset": preset, "task": task, "arch": arch, "seeds": list(seeds[i:i + group]),
                           "lr": lr, "size": size, "models": models})
    return points


def _load_python(path: str) -> tuple[str | None, list[dict], dict | None, dict | None]:
    from ..outside_code import guarded

    try:
        with guarded():  # the user's code: torch's process-wide settings as they were after it ran
            module = runpy.run_path(path)
    except SystemExit as err:  # sys.exit() in it: the command's error, not its exit
        raise ValueError(f"sweep file {path}: running it exited with {err.code!r} (sys.exit)") from None
    except Exception as err:  # the user's code: say which file failed and how
        raise ValueError(f"sweep file {path}: running it raised {type(err).__name__}: {err}") from err
    has_sweep, has_jobs = "SWEEP" in module, "JOBS" in module
    if has_sweep == has_jobs:
        raise ValueError(f"sweep file {path}: a Python sweep file must set exactly one of SWEEP (a dict of grid "
                         "keys, as in a TOML sweep) or JOBS (a list of job dicts)")
    name = module.get("NAME")
    if has_sweep:
        grid = module["SWEEP"]
        if not isinstance(grid, dict):
            raise ValueError(f"sweep file {path}: SWEEP must be a dict, got {type(grid).__name__}")
        return (grid.get("name", name), expand_grid(path, grid), grid.get("resources", module.get("RESOURCES")),
                grid.get("tune", module.get("TUNE")))
    jobs = module["JOBS"]
    if not isinstance(jobs, (list, tuple)) or not all(isinstance(j, dict) for j in jobs):
        raise ValueError(f"sweep file {path}: JOBS must be a list of dicts (one per job)")
    return name, [dict(j) for j in jobs], module.get("RESOURCES"), module.get("TUNE")


def load_sweep(path: str) -> SweepSpec:
    """Read and check a sweep file (.toml or .py); raises ValueError naming the mistake."""
    if not os.path.isfile(path):
        raise ValueError(f"sweep file {path}: no such file")
    ext = os.path.splitext(path)[1].lower()
    if ext == ".toml":
        try:
            grid = read_toml(path)
        except ValueError as err:
            raise ValueError(f"sweep file {path} {err}") from None
        name, points, resources = grid.get("name"), expand_grid(path, grid), grid.get("resources")
        tune = grid.get("tune")
    elif ext == ".py":
        name, points, resources, tune = _load_python(path)
    else:
        raise ValueError(f"sweep file {path}: must end in .toml or .py, got {ext or 'no extension'!r}")
    if not points:
        raise ValueError(f"sweep file {path}: the grid is empty (no jobs)")
    name = name if name is not None else os.path.splitext(os.path.basename(path))[0]
    if not isinstance(name, str) or not name:
        raise ValueError(f"{_where(path, 'name')} must be a non-empty string, got {name!r}")
    checked = tuple(_check_point(path, f"job {i + 1}", point) for i, point in enumerate(points))
    return SweepSpec(name, path, checked, _resources(path, resources), _tune(path, tune, checked))


def _tune(path: str, value, points) -> dict | None:
    """A sweep's `tune` table: the search's settings over each task's default grid
    (`sweep.tune.TuneSpec.of`), checked here; a point with its own `lr` cannot also be tuned."""
    if value is None:
        return None
    if value is True:
        value = {}
    if not isinstance(value, dict):
        raise ValueError(f"{_where(path, 'tune')} must be a table of search settings (lrs, selection_seeds, rule, "
                         f"metric, selection_sequences, axes, packed, prune) or true, got {value!r}")
    from .tune import TuneSpec

    TuneSpec.of({"lrs": [1e-3, 1e-2], **value}, f"sweep file {path}: tune:")
    fixed = [i for i, point in enumerate(points) if point.get("lr") is not None]
    if fixed:
        raise ValueError(f"sweep file {path}: job {fixed[0] + 1} sets its own lr (the lrs axis, or a JOBS point's lr) "
                         "and the sweep tunes it (tune): give the rates as tune.lrs instead")
    return dict(value)
