"""Models by name: `get_model("transformer", task, seeds=[0, 1, 2], n_layer=2, d_model=64)`.

A model file registers a builder `(shape: TaskShape, ensemble: int, **cfg) -> EnsembleModel`
with `@register_model(name, description, config=ItsConfig)` (the config dataclass its **cfg go
to, so an unknown option is named with the options there are: `model_options`); every module of
`bayesbench.models` is imported on first lookup, so adding an architecture is adding one file.
A module whose import fails raises, except for a missing optional package (not bayesbench's
own), which skips it with a warning naming the package. A name with a ':' is a model from
outside the package ('pkg.mod:build', './file.py:build', 'hf:gpt2'), built through the adapter
by the builder that `bayesbench.models.outside` registers (`register_outside`).

The registry imports no model module by statement: it loads them by name (`importlib`) when a
name is looked up, and they import the registry to register, so the models package has no
import cycle. Looking up a name imports the file named after it alone (`home_candidates`:
'mlp-prefix' is looked for in mlp_prefix.py, then mlp.py), and every file only when that file
does not register it; where each architecture lives is what registration records (`homes`).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
import os
import pkgutil
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import torch

from ..checks import positive_int
from .base import EnsembleModel, TaskLike, TaskShape
from .capacity import meta_params

Builder = Callable[..., EnsembleModel]


def is_outside(name) -> bool:
    """Whether `name` names an outside model (`bayesbench.models.outside`): it has a ':'."""
    return isinstance(name, str) and ":" in name


@dataclass(frozen=True)
class ModelEntry:
    name: str
    description: str
    build: Builder
    config: type | None = None  # the dataclass the builder's **cfg go to
    # raised whenever a change to the architecture's code changes what a seed trains to: part of
    # every job key (`bayesbench.versions`)
    version: int = 1
    module: str = ""  # the module its builder lives in (where registration found it: `homes`)


_MODELS: dict[str, ModelEntry] = {}
_discovered = False
OUTSIDE_HOME = "outside"  # the module that registers the builder of outside models
_outside: Builder | None = None


def register_model(name: str, description: str = "", *, config: type | None = None,
                   version: int = 1, module: str | None = None) -> Callable[[Builder], Builder]:
    """Decorator adding a builder under `name` (one name, one builder); `config`: the dataclass
    its **cfg go to (for `model_options`); `version`: the architecture's code version
    (`ModelEntry.version`); `module`: where the architecture is defined (default: the builder's
    module; `adapter.register_module` gives its factory's)."""

    def add(build: Builder) -> Builder:
        if name in _MODELS and _MODELS[name].build is not build:
            raise ValueError(f"model name {name!r} is already registered")
        home = module if module is not None else getattr(build, "__module__", "")
        _MODELS[name] = ModelEntry(name, description, build, config, version, home)
        return build

    return add


def register_outside(build: Builder) -> Builder:
    """Decorator setting the builder `(name, shape, ensemble, **options)` of every outside model
    (`models.outside.build_outside`)."""
    global _outside
    _outside = build
    return build


def _outside_builder() -> Builder:
    if _outside is None:
        importlib.import_module(f"{__package__}.{OUTSIDE_HOME}")  # it registers its builder
    if _outside is None:
        raise RuntimeError(f"bayesbench.models.{OUTSIDE_HOME} registered no builder of outside models")
    return _outside


def model_code(name: str) -> dict:
    """The code behind architecture `name` (`bayesbench.versions`): a built-in one's version, an
    outside one's contents (`models.outside.code`)."""
    if is_outside(name):
        return importlib.import_module(f"{__package__}.{OUTSIDE_HOME}").code(name)
    _load(name)
    if name not in _MODELS:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(sorted(_MODELS))}")
    return {"version": _MODELS[name].version}


def unregister_model(name: str) -> None:
    """Remove architecture `name` from the registry (a test's or a session's own architecture,
    undone: `registered_models`); an unknown name is a ValueError."""
    if name not in _MODELS:
        raise ValueError(f"unknown model {name!r}: nothing to unregister")
    del _MODELS[name]


@contextmanager
def registered_models() -> Iterator[None]:
    """Undo, on leaving, every architecture registered inside (`register_model`, `register_module`,
    importing a module that registers): the registry is as it was (tests that add their own)."""
    before = dict(_MODELS)
    try:
        yield
    finally:
        for name in set(_MODELS) - set(before):
            unregister_model(name)
        _MODELS.update(before)


def _package_modules() -> list[str]:
    """The module names of the files of this package (no import)."""
    return [info.name for info in pkgutil.iter_modules([os.path.dirname(os.path.abspath(__file__))])]


def home_candidates(name: str) -> list[str]:
    """The model files that may register architecture `name`, most specific first: its name with
    '-' as '_', then each shorter '-' prefix ('mlp-prefix': mlp_prefix, mlp), among the files
    there are. Looking a name up imports these alone (not every model file, and not what they
    import); tests/models/test_registry.py checks every built-in architecture is found so."""
    parts = name.split("-")
    present = set(_package_modules())
    return [mod for mod in ("_".join(parts[:n]) for n in range(len(parts), 0, -1)) if mod in present]


def homes() -> dict[str, str]:
    """{architecture: the file of this package that registers it} for every built-in
    architecture, as registration recorded it (`ModelEntry.module`); discovers every file."""
    _discover()
    return {name: entry.module.rsplit(".", 1)[1] for name, entry in sorted(_MODELS.items())
            if entry.module.rsplit(".", 1)[0] == __package__}


def _load(name: str) -> None:
    """Make `name` registered: import the files named after it (`home_candidates`), else every file."""
    if name in _MODELS:
        return
    for module in home_candidates(name):
        importlib.import_module(f"{__package__}.{module}")
        if name in _MODELS:
            return
    _discover()


def known_model(name: str) -> bool:
    """Whether `name` is a registered architecture (its file imported if it is not yet)."""
    _load(name)
    return name in _MODELS


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    for module in _package_modules():
        try:
            importlib.import_module(f"{__package__}.{module}")
        except ModuleNotFoundError as err:
            # a model needing an optional package that is not installed is skipped, by name; a
            # broken model file (any other error, or a missing bayesbench module) is a bug and raises
            if err.name is None or err.name.split(".")[0] == "bayesbench":
                raise
            warnings.warn(f"bayesbench.models.{module} needs the optional package {err.name!r}, which is "
                          "not installed: its architectures are not available", RuntimeWarning, stacklevel=3)
    _discovered = True


def list_models() -> dict[str, str]:
    """{name: one-line description} of every registered architecture."""
    _discover()
    return {name: _MODELS[name].description for name in sorted(_MODELS)}


def build_model(name: str, task_or_shape: TaskLike | TaskShape, *, ensemble: int = 1, max_len: int | None = None,
                **cfg) -> EnsembleModel:
    """Construct (without initialising) the architecture `name` for a task or TaskShape."""
    if not is_outside(name):
        _load(name)
    outside = name not in _MODELS and is_outside(name)  # 'pkg.mod:build', './file.py:build', 'hf:gpt2'
    if name not in _MODELS and not outside:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(sorted(_MODELS))} "
                         "(or your own: 'pkg.mod:build', './file.py:build', 'hf:gpt2')")
    if not outside and cfg.get("match_params") is not None:  # every builder that matches reads it as a count
        positive_int("match_params", cfg["match_params"], "the parameter count to match")
    try:
        if outside:
            return _outside_builder()(name, TaskShape.of(task_or_shape, max_len), ensemble, **cfg)
        return _MODELS[name].build(TaskShape.of(task_or_shape, max_len), ensemble, **cfg)
    except TypeError as err:
        # an unknown or missing config field (the builders pass **cfg to a config dataclass) is the
        # user's; any other TypeError is a bug and keeps its traceback
        if "unexpected keyword argument" not in str(err) and "required" not in str(err):
            raise
        unknown = re.search(r"unexpected keyword argument '(\w+)'", str(err))
        if unknown and not outside:
            options = model_options(name)
            close = difflib.get_close_matches(unknown.group(1), options, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"bad configuration for model {name!r}: unknown option {unknown.group(1)!r}{hint}; "
                             f"options: {', '.join(options)}") from err
        raise ValueError(f"bad configuration for model {name!r}: {err}") from err


def model_options(name: str) -> list[str]:
    """The options a built-in architecture takes: its builder's keyword parameters, then the
    fields of its config dataclass."""
    _load(name)
    entry = _MODELS[name]
    params = inspect.signature(entry.build).parameters
    out = [p for p in list(params)[2:] if params[p].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    if entry.config is not None:
        out += [f.name for f in dataclasses.fields(entry.config) if f.name not in out]
    return out


def get_model(name: str, task_or_shape: TaskLike | TaskShape, *, ensemble: int | None = None,
              seeds: list[int] | None = None, max_len: int | None = None, device: torch.device | str | None = None,
              **cfg) -> EnsembleModel:
    """Build and initialise an ensemble: member e from seeds[e] (default seeds 0..E-1).

    `max_len` sizes the position embeddings (default: the task's seq_len); give the longest
    evaluation length when the model will be scored on longer sequences than it trains on.
    """
    if seeds is None:
        seeds = list(range(1 if ensemble is None else ensemble))
    if ensemble is not None and ensemble != len(seeds):
        raise ValueError(f"ensemble ({ensemble}) must equal the number of seeds ({len(seeds)})")
    model = build_model(name, task_or_shape, ensemble=len(seeds), max_len=max_len, **cfg)
    model.init_members(list(seeds))
    return model.to(device) if device is not None else model


def count_params(name: str, task_or_shape: TaskLike | TaskShape, *, max_len: int | None = None, **cfg) -> int:
    """Parameters of one member of the registered model `name` with this configuration."""
    return meta_params(lambda: build_model(name, task_or_shape, ensemble=1, max_len=max_len, **cfg))
