"""Code from outside the package, named by a string (zoology's convention), for models and tasks:

- `my_pkg.my_mod:build`: an importable module and an attribute in it (the current directory is
  tried too when the module is not on sys.path);
- `./mine.py:build` (any path ending in .py, or containing a path separator): a file outside the
  package, imported by path (made absolute by `normalise` before it is stored, so worker
  processes and later commands import the same file), its folder first on sys.path while it
  is imported, as for `python mine.py`: it may import modules that sit beside it.

`kind` ("model", "task") names what the string is in every error message.

`contents(spec)` says which code a spec names: a hash of its file (or module's file) and of the
modules it imports from its own folder, so that a result is keyed by what ran, not by a path
(`bayesbench.versions`). `load` imports that code, and imports it again when the contents have
changed since this process last imported it, so the code that runs is the code that was hashed.
A module the code loads while it is imported (by `import_module`, `__import__`, or any other way)
is keyed too when its file lies under that folder: `contents` imports the code to see them.

`guarded()` is put around every import and every call of outside code (its import here, a
model's factory in `models/adapter.py`, a tunnel's factory and sampler in `tasks/outside.py`):
what a job's numbers depend on of torch's (and Python's, numpy's) process-wide state is put back
as it was after the outside code ran, so a file that calls `torch.set_default_dtype(float64)`
or `torch.manual_seed` at import changes no other job of the same process (`GLOBAL_STATE`).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import importlib
import importlib.util
import os
import random
import sys
from collections.abc import Callable
from typing import Any

import torch

from .trust import check as check_trust  # code named in a file the user was handed: only when trusted


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


def _set_cudnn_flags(flags: tuple[bool, bool, bool, bool]) -> None:
    for k, x in zip(("enabled", "benchmark", "deterministic", "allow_tf32"), flags):
        setattr(torch.backends.cudnn, k, x)


def _set_cuda_rng(states: list[torch.Tensor] | None) -> None:
    if states is not None:  # None: CUDA was not initialised when it was read
        torch.cuda.set_rng_state_all(states)


def _set_numpy_rng(state) -> None:
    if state is not None:  # None: numpy was not imported when it was read
        _numpy_random().set_state(state)


#: The process-wide settings a job's numbers depend on, which `guarded` puts back after outside
#: code ran: (name, read, write). Torch's interop thread count is not here: it cannot be set again
#: once set, so outside code cannot change it after the first parallel work either.
GLOBAL_STATE: tuple[tuple[str, Callable[[], Any], Callable[[Any], object]], ...] = (
    ("default dtype", torch.get_default_dtype, torch.set_default_dtype),
    ("default device", torch.get_default_device,
     lambda v: torch.set_default_device(None if v == torch.device("cpu") else v)),
    ("threads", torch.get_num_threads, torch.set_num_threads),
    ("grad mode", torch.is_grad_enabled, torch.set_grad_enabled),
    ("anomaly detection", torch.is_anomaly_enabled, torch.set_anomaly_enabled),
    ("deterministic algorithms",
     lambda: (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()),
     lambda v: torch.use_deterministic_algorithms(v[0], warn_only=v[1])),
    ("float32 matmul precision", torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
    ("cuDNN flags", lambda: (torch.backends.cudnn.enabled, torch.backends.cudnn.benchmark,
                             torch.backends.cudnn.deterministic, torch.backends.cudnn.allow_tf32),
     _set_cudnn_flags),
    ("CUDA matmul TF32", lambda: torch.backends.cuda.matmul.allow_tf32,
     lambda v: setattr(torch.backends.cuda.matmul, "allow_tf32", v)),
    ("torch RNG", torch.get_rng_state, torch.set_rng_state),
    ("CUDA RNG", lambda: torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None,
     _set_cuda_rng),
    ("Python RNG", random.getstate, random.setstate),
    ("numpy RNG", lambda: _numpy_random() and _numpy_random().get_state(),
     _set_numpy_rng),
)


def _numpy_random():
    numpy = sys.modules.get("numpy")  # only when it is imported: outside code cannot have changed it otherwise
    return getattr(numpy, "random", None)


@contextlib.contextmanager
def guarded(keep: tuple[str, ...] = ()):
    """Run outside code (an import, a factory, a sampler) and put back every process-wide setting
    of `GLOBAL_STATE` it changed (but those named in `keep`), on success and on error alike."""
    saved = [(read(), read, write) for name, read, write in GLOBAL_STATE if name not in keep]
    try:
        yield
    finally:
        for value, read, write in saved:
            if not _same(read(), value):  # written only when changed: setting some (the device) has a cost
                write(value)


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and bool(torch.equal(a, b))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if type(a).__module__ == "numpy" or type(b).__module__ == "numpy":
        import numpy

        return bool(numpy.array_equal(a, b))
    return a == b


CONTENTS_CHARS = 16  # hex characters of the SHA-256 kept, as in job keys


def _imports(path: str) -> list[tuple[int, str]]:
    """(level, dotted name) of every import statement in the Python file `path` (level > 0: a
    relative import); [] when it cannot be parsed (its bytes are hashed all the same)."""
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), filename=path)
    except (SyntaxError, ValueError, OSError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(0, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            out.append((node.level, base))
            out += [(node.level, f"{base}.{alias.name}" if base else alias.name) for alias in node.names]
    return out


def _module_files(root: str, dotted: str) -> list[str]:
    """The files under `root` that importing `dotted` runs: each package's __init__.py on the way
    and the module's own file (nothing when `dotted` does not live under `root`)."""
    parts = [p for p in dotted.split(".") if p]
    files, here = [], root
    for i, part in enumerate(parts):
        here = os.path.join(here, part)
        if os.path.isfile(here + ".py"):
            files.append(here + ".py")
            break
        init = os.path.join(here, "__init__.py")
        if not os.path.isdir(here):
            break
        if os.path.isfile(init):
            files.append(init)
    return files


def source_files(path: str, root: str) -> list[str]:
    """`path` and, recursively, every module it imports that lives under the folder `root`
    (absolute imports resolved from `root`, relative ones from the importing file's folder),
    sorted. Modules elsewhere (the standard library, installed packages) are not included: the
    environment's versions are recorded with every result instead."""
    root = os.path.abspath(root)
    seen, todo = set(), [os.path.abspath(path)]
    while todo:
        file = todo.pop()
        if file in seen or not os.path.isfile(file):
            continue
        seen.add(file)
        for level, dotted in _imports(file):
            if level == 0:
                found = _module_files(root, dotted)
            else:
                base = os.path.dirname(file)
                for _ in range(level - 1):
                    base = os.path.dirname(base)
                found = _module_files(base, dotted) if base.startswith(root) else []
                if not dotted:
                    init = os.path.join(base, "__init__.py")
                    found = [init] if os.path.isfile(init) and base.startswith(root) else []
            todo += [f for f in found if os.path.abspath(f).startswith(root + os.sep)]
    return sorted(seen)


def _hash_files(files: list[str], root: str) -> dict:
    digest = hashlib.sha256()
    names = []
    for file in files:
        name = os.path.relpath(file, root)
        names.append(name)
        with open(file, "rb") as f:
            data = f.read()
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return {"contents": digest.hexdigest()[:CONTENTS_CHARS], "files": names}


def _module_origin(target: str, spec: str, kind: str) -> tuple[str, str] | None:
    """(source file, folder of its top-level package's parent) of an importable module, or None
    when it has no Python source (a compiled or built-in module)."""
    try:
        with guarded():  # finding a submodule imports its parent packages: outside code
            found = importlib.util.find_spec(target)
    except (ImportError, ValueError):
        found = None
    if found is None:
        cwd = os.getcwd()  # as `_import_module` does: the folder holding the package
        candidate = _module_files(cwd, target)
        if candidate and candidate[-1].endswith(".py"):
            return candidate[-1], cwd
        return None
    origin = found.origin
    if not origin or not origin.endswith(".py") or not os.path.isfile(origin):
        return None
    root = os.path.dirname(origin)
    for _ in range(target.count(".") + (1 if os.path.basename(origin) == "__init__.py" else 0)):
        root = os.path.dirname(root)
    return origin, root


#: target -> (contents, files of the modules its import loaded under its folder), for the code
#: imported by this process: what `contents` keys beside the files its source names.
_IMPORTED: dict[str, tuple[str, list[str]]] = {}


def contents(spec: str, kind: str, forms: str) -> dict:
    """{"contents": 16 hex characters, "files": [relative paths]}: a hash of the code a
    normalised `spec` names. A file: the file, the modules it imports from its own folder
    (`source_files`) and the modules its import loaded from under that folder however it
    imported them (`importlib.import_module`, `__import__`: the code is imported to see them).
    A module: the same within its own package."""
    target, _ = split(spec, kind, forms)
    check_trust(spec, kind)  # finding a module imports its packages
    if is_file(target):
        if not os.path.isfile(target):
            raise ValueError(f"{kind} {spec!r}: no such file {target}")
        root = scope = os.path.dirname(os.path.abspath(target))
        named = source_files(target, root)
    else:
        origin = _module_origin(target, spec, kind)
        if origin is None:
            module = _import_module(target, spec, kind)
            version = getattr(module, "__version__", None)
            return {"contents": f"module {target} {version or 'without source'}", "files": []}
        path, root = origin
        package = os.path.join(root, target.split(".")[0])
        scope = package if os.path.isdir(package) else root
        named = [f for f in source_files(path, root) if f == os.path.abspath(path) or f.startswith(scope + os.sep)]
    seen = _IMPORTED.get(target)
    files = sorted({*named, *(f for f in (seen[1] if seen else []) if os.path.isfile(f))})
    code = _hash_files(files, root)
    if seen is None or seen[0] != code["contents"] or _module_of(target) is None:
        loaded = _import(target, spec, kind, files, root, scope)  # its contents changed, or not imported yet
        files = sorted({*named, *loaded})
        code = _hash_files(files, root)
        _IMPORTED[target] = (code["contents"], loaded)
    _KEYED[target] = (scope, frozenset(files))
    return code


#: target -> (its folder, the files its content key holds), for `_watched`
_KEYED: dict[str, tuple[str, frozenset[str]]] = {}


def _module_name(target: str) -> str:
    """The name in sys.modules of the module `target` (a file's: a name made from its path)."""
    return "bayesbench_outside_" + hashlib.sha1(target.encode()).hexdigest()[:10] if is_file(target) else target


def _module_of(target: str):
    return sys.modules.get(_module_name(target))


def _loaded_under(module, before: set[str] | None, scope: str) -> list[str]:
    """The files under `scope` of the modules loaded since `before` (the names in sys.modules
    then; None: not known) and of those `module`'s namespace refers to (a module, or an object
    defined in one)."""
    names = set(sys.modules) - before if before is not None else set()
    for value in list(vars(module).values()):
        names.add(value.__name__ if isinstance(value, type(sys)) else getattr(value, "__module__", None) or "")
    return _files_of(names, scope)


def _files_of(names, scope: str) -> list[str]:
    """The source files under `scope` of the modules `names` (those in sys.modules)."""
    out = set()
    for name in names:
        file = getattr(sys.modules.get(name), "__file__", None)
        if file and file.endswith(".py") and os.path.abspath(file).startswith(scope + os.sep):
            out.add(os.path.abspath(file))
    return sorted(out)


def _forget(files: list[str]) -> None:
    """Drop from sys.modules every module loaded from one of `files`, so they are imported anew."""
    wanted = {os.path.abspath(f) for f in files}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and os.path.abspath(file) in wanted:
            del sys.modules[name]


def _import(target: str, spec: str, kind: str, files: list[str], root: str, scope: str) -> list[str]:
    """Import `target` anew (the modules of `files` with it), guarded; the files under `scope`
    its import loaded (`_loaded_under`). A dotted module this process imported before bayesbench
    saw it is used as it is (its objects may be held elsewhere): the modules it refers to are keyed."""
    if not is_file(target) and target in sys.modules and target not in _IMPORTED:
        return _loaded_under(sys.modules[target], None, scope)
    _forget(files)
    sys.modules.pop(_module_name(target), None)
    before = set(sys.modules)
    with guarded():
        module = _import_file(target, spec, kind) if is_file(target) else _import_module(target, spec, kind)
    return _loaded_under(module, before, scope)


def _import_file(path: str, spec: str, kind: str):
    name = _module_name(path)
    file_spec = importlib.util.spec_from_file_location(name, path)
    if file_spec is None or file_spec.loader is None:  # a path that is not a Python source file
        raise ValueError(f"{kind} {spec!r}: {path} cannot be imported as a Python module")
    loader = file_spec.loader
    module = importlib.util.module_from_spec(file_spec)
    sys.modules[name] = module  # dataclasses and pickling look classes up here
    folder = os.path.dirname(path)
    sys.path.insert(0, folder)  # its own folder's modules import as they would for `python path`
    try:
        loader.exec_module(module)
    except (Exception, SystemExit) as err:  # sys.exit() at import too: the command's error, not its exit
        del sys.modules[name]
        raise ValueError(f"{kind} {spec!r}: importing {path} failed: {_failure(err)}") from err
    finally:
        sys.path.remove(folder)
    return module


def _import_module(target: str, spec: str, kind: str):
    try:
        with guarded():
            return importlib.import_module(target)
    except ModuleNotFoundError as err:
        cwd = os.getcwd()
        missing = (err.name or "").split(".")[0]
        if cwd not in sys.path and missing == target.split(".")[0]:
            sys.path.append(cwd)  # `--model my_pkg.mod:build` from the folder holding my_pkg
            try:
                with guarded():
                    return importlib.import_module(target)
            except ModuleNotFoundError:
                sys.path.remove(cwd)
        raise ValueError(f"{kind} {spec!r}: cannot import module {target!r} ({err})") from None
    except (Exception, SystemExit) as err:
        raise ValueError(f"{kind} {spec!r}: importing module {target!r} failed: {_failure(err)}") from err


def _failure(err: BaseException) -> str:
    if isinstance(err, SystemExit):
        return f"it exited with {err.code!r} (sys.exit)"
    return f"{type(err).__name__}: {err}"


def load(spec: str, kind: str, forms: str, code: dict | None = None):
    """The attribute a normalised `spec` names, imported; imported anew when its contents
    (`contents`, or `code` when the caller computed them) changed since this process imported it."""
    target, attr = split(spec, kind, forms)
    check_trust(spec, kind)
    now = contents(spec, kind, forms)  # imports it when it changed or is not imported yet
    if code is not None and code["contents"] != now["contents"]:
        raise ValueError(f"{kind} {spec!r}: its code changed while it was being loaded (contents "
                         f"{code['contents']}, now {now['contents']}); run the command again")
    obj = _module_of(target) or _import_module(target, spec, kind)  # (a module without source: imported)
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{kind} {spec!r}: {target} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return _watched(obj, spec, kind, *_KEYED[target]) if callable(obj) and target in _KEYED else obj


def _watched(factory, spec: str, kind: str, scope: str, keyed: frozenset[str]):
    """`factory`, refusing to return what it built when the call imported a module from its
    folder that its content key does not hold (imported first inside the factory: `contents`,
    which imports the file, cannot see it), rather than store results under a key that misses it."""
    @functools.wraps(factory)
    def call(*args, **kwargs):
        before = set(sys.modules)
        out = factory(*args, **kwargs)
        late = [f for f in _files_of(set(sys.modules) - before, scope) if f not in keyed]
        if late:
            names = ", ".join(os.path.relpath(f, scope) for f in late)
            raise ValueError(f"{kind} {spec!r}: calling it imported {names} from its folder, which its content key "
                             "does not hold (rule: import the modules it uses when its file is imported, e.g. at the "
                             "top, so that editing them is a new key)")
        return out

    return call
