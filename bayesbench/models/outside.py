"""Models from outside the package, named by a string (zoology's convention):

- `my_pkg.my_mod:build`: an importable module and a factory in it (the current directory is
  tried too when the module is not on sys.path);
- `./mine.py:build` (any path ending in .py, or containing a path separator): a file outside the
  package, imported by path;
- `hf:gpt2`, `hf:llama`, `hf:mamba`: a randomly initialised Hugging Face `transformers` model
  built from a config sized to the preset (`bayesbench.models.hf`; `pip install bayesbench[hf]`).

Such a name works wherever an architecture name does (`get_model`, `train`, `bayesbench run
--model`): the registry hands it here and `AdaptedModel` makes the factory an E-seed ensemble.
Worker processes and `load_result` import the factory themselves from the name, so only the
string travels. File paths are made absolute (`normalise`) before they are stored.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Mapping
from typing import Callable

from .adapter import AdaptedModel
from .base import TaskShape
from .registry import is_outside, register_outside  # noqa: F401  (is_outside re-exported: the test of a name)

HF_PREFIX = "hf:"
_FACTORIES: dict[str, Callable] = {}


def _is_file(target: str) -> bool:
    return target.endswith(".py") or "/" in target or os.sep in target


def _split(spec: str) -> tuple[str, str]:
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr or not all(part.isidentifier() for part in attr.split(".")):
        raise ValueError(f"model {spec!r} must be 'package.module:factory', './file.py:factory' or "
                         "'hf:gpt2|llama|mamba' (a factory name after the colon)")
    return target, attr


def normalise(spec: str, base: str | None = None) -> str:
    """The canonical form of an outside model name: file paths absolute, syntax checked.

    A relative file path is taken from the folder `base` (a sweep file's folder), by default
    the current directory."""
    if spec.startswith(HF_PREFIX):
        return spec
    target, attr = _split(spec)
    if _is_file(target):
        target = os.path.expanduser(target)
        if base is not None:
            target = os.path.join(base, target)
        return f"{os.path.abspath(target)}:{attr}"
    if not all(part.isidentifier() for part in target.split(".")):
        raise ValueError(f"model {spec!r}: {target!r} is not a dotted module path (use ./file.py:factory for a file)")
    return spec


def default_name(spec: str) -> str:
    """A leaderboard name for an outside model: 'hf-gpt2', 'mine' (file stem), 'my_mod' (module)."""
    if spec.startswith(HF_PREFIX):
        return "hf-" + spec[len(HF_PREFIX):]
    target, attr = _split(spec)
    stem = os.path.splitext(os.path.basename(target))[0] if _is_file(target) else target.rsplit(".", 1)[-1]
    return stem if attr == "build" else f"{stem}.{attr}"


def _import_file(path: str, spec: str):
    if not os.path.isfile(path):
        raise ValueError(f"model {spec!r}: no such file {path}")
    name = "bayesbench_outside_" + hashlib.sha1(path.encode()).hexdigest()[:10]
    if name in sys.modules:
        return sys.modules[name]
    file_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(file_spec)
    sys.modules[name] = module  # dataclasses and pickling look classes up here
    try:
        file_spec.loader.exec_module(module)
    except Exception as err:
        del sys.modules[name]
        raise ValueError(f"model {spec!r}: importing {path} failed: {type(err).__name__}: {err}") from err
    return module


def _import_module(target: str, spec: str):
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as err:
        cwd = os.getcwd()
        missing = (err.name or "").split(".")[0]
        if cwd not in sys.path and missing == target.split(".")[0]:
            sys.path.append(cwd)  # `bayesbench run --model my_pkg.mod:build` from the folder holding my_pkg
            try:
                return importlib.import_module(target)
            except ModuleNotFoundError:
                sys.path.remove(cwd)
        raise ValueError(f"model {spec!r}: cannot import module {target!r} ({err})") from None
    except Exception as err:
        raise ValueError(f"model {spec!r}: importing module {target!r} failed: {type(err).__name__}: {err}") from err


def load_factory(spec: str) -> Callable:
    """The factory an outside model name points to (imported once per process)."""
    spec = normalise(spec)
    if spec in _FACTORIES:
        return _FACTORIES[spec]
    if spec.startswith(HF_PREFIX):
        from .hf import hf_factory

        factory = hf_factory(spec[len(HF_PREFIX):])
    else:
        target, attr = _split(spec)
        module = _import_file(target, spec) if _is_file(target) else _import_module(target, spec)
        factory = module
        for part in attr.split("."):
            if not hasattr(factory, part):
                raise ValueError(f"model {spec!r}: {target} has no attribute {attr!r}")
            factory = getattr(factory, part)
        if not callable(factory):
            raise ValueError(f"model {spec!r}: {attr} is a {type(factory).__name__}, not a callable "
                             "factory(spec) -> nn.Module")
    _FACTORIES[spec] = factory
    return factory


def preset_options(spec: str, models: Mapping[str, dict]) -> dict:
    """The keyword arguments an outside model's factory gets from a preset's model table (arch ->
    config): for an `hf:` model the sizes of the preset's transformer (`hf.preset_sizes`), then
    the table's own entry for `spec` (a sweep's `models`), which wins."""
    sizes = {}
    if spec.startswith(HF_PREFIX):
        from .hf import preset_sizes

        sizes = preset_sizes(spec[len(HF_PREFIX):], models)
    return {**sizes, **models.get(spec, {})}


@register_outside
def build_outside(spec: str, shape: TaskShape, ensemble: int, **options) -> AdaptedModel:
    """Construct (without initialising) the adapted ensemble of an outside model."""
    spec = normalise(spec)
    return AdaptedModel(shape, ensemble, load_factory(spec), spec=spec, options=options)
