"""Code from outside the package, named by a string (zoology's convention), for models and tasks:

- `my_pkg.my_mod:build`: an importable module and an attribute in it (the current directory is
  tried too when the module is not on sys.path);
- `./mine.py:build` (any path ending in .py, or containing a path separator): a file outside the
  package, imported by path (made absolute by `normalise` before it is stored, so worker
  processes and later commands import the same file).

`kind` ("model", "task") names what the string is in every error message.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys


def is_file(target: str) -> bool:
    return target.endswith(".py") or "/" in target or os.sep in target


def split(spec: str, kind: str, forms: str) -> tuple[str, str]:
    """(module or file, attribute) of 'target:attr'; `forms` lists the accepted forms for the error."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr or not all(part.isidentifier() for part in attr.split(".")):
        raise ValueError(f"{kind} {spec!r} must be {forms} (a factory name after the colon)")
    return target, attr


def normalise(spec: str, kind: str, forms: str, base: str | None = None) -> str:
    """The canonical form: file paths absolute (a relative one taken from `base`, by default the
    current directory), syntax checked."""
    target, attr = split(spec, kind, forms)
    if is_file(target):
        target = os.path.expanduser(target)
        if base is not None:
            target = os.path.join(base, target)
        return f"{os.path.abspath(target)}:{attr}"
    if not all(part.isidentifier() for part in target.split(".")):
        raise ValueError(f"{kind} {spec!r}: {target!r} is not a dotted module path (use ./file.py:factory for a file)")
    return spec


def stem(spec: str, kind: str, forms: str) -> str:
    """A short name: the file's stem or the module's last part, then '.attr' unless it is 'build'."""
    target, attr = split(spec, kind, forms)
    base = os.path.splitext(os.path.basename(target))[0] if is_file(target) else target.rsplit(".", 1)[-1]
    return base if attr == "build" else f"{base}.{attr}"


def _import_file(path: str, spec: str, kind: str):
    if not os.path.isfile(path):
        raise ValueError(f"{kind} {spec!r}: no such file {path}")
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
        raise ValueError(f"{kind} {spec!r}: importing {path} failed: {type(err).__name__}: {err}") from err
    return module


def _import_module(target: str, spec: str, kind: str):
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as err:
        cwd = os.getcwd()
        missing = (err.name or "").split(".")[0]
        if cwd not in sys.path and missing == target.split(".")[0]:
            sys.path.append(cwd)  # `--model my_pkg.mod:build` from the folder holding my_pkg
            try:
                return importlib.import_module(target)
            except ModuleNotFoundError:
                sys.path.remove(cwd)
        raise ValueError(f"{kind} {spec!r}: cannot import module {target!r} ({err})") from None
    except Exception as err:
        raise ValueError(f"{kind} {spec!r}: importing module {target!r} failed: {type(err).__name__}: {err}") from err


def load(spec: str, kind: str, forms: str):
    """The attribute a normalised `spec` names, imported (once per process: Python's module cache)."""
    target, attr = split(spec, kind, forms)
    obj = _import_file(target, spec, kind) if is_file(target) else _import_module(target, spec, kind)
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{kind} {spec!r}: {target} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj
