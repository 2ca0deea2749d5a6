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
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import os
import sys

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


def contents(spec: str, kind: str, forms: str) -> dict:
    """{"contents": 16 hex characters, "files": [relative paths]}: a hash of the code a
    normalised `spec` names. A file: the file and the modules it imports from its own folder
    (`source_files`). A module: its file and the modules it imports from its own package."""
    target, _ = split(spec, kind, forms)
    check_trust(spec, kind)  # finding a module imports its packages
    if is_file(target):
        if not os.path.isfile(target):
            raise ValueError(f"{kind} {spec!r}: no such file {target}")
        root = os.path.dirname(os.path.abspath(target))
        return _hash_files(source_files(target, root), root)
    origin = _module_origin(target, spec, kind)
    if origin is None:
        module = _import_module(target, spec, kind)
        version = getattr(module, "__version__", None)
        return {"contents": f"module {target} {version or 'without source'}", "files": []}
    path, root = origin
    package = os.path.join(root, target.split(".")[0])
    scope = package if os.path.isdir(package) else root
    files = [f for f in source_files(path, root) if f == os.path.abspath(path) or f.startswith(scope + os.sep)]
    return _hash_files(files, root)


def _forget(files: list[str]) -> None:
    """Drop from sys.modules every module loaded from one of `files`, so they are imported anew."""
    wanted = {os.path.abspath(f) for f in files}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and os.path.abspath(file) in wanted:
            del sys.modules[name]


def _import_file(path: str, spec: str, kind: str, code: dict):
    if not os.path.isfile(path):
        raise ValueError(f"{kind} {spec!r}: no such file {path}")
    name = "bayesbench_outside_" + hashlib.sha1(path.encode()).hexdigest()[:10]
    module = sys.modules.get(name)
    if module is not None and getattr(module, "__bayesbench_contents__", None) == code["contents"]:
        return module
    _forget(code["files"] and [os.path.join(os.path.dirname(path), f) for f in code["files"]])
    sys.modules.pop(name, None)
    file_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(file_spec)
    module.__bayesbench_contents__ = code["contents"]
    sys.modules[name] = module  # dataclasses and pickling look classes up here
    folder = os.path.dirname(path)
    sys.path.insert(0, folder)  # its own folder's modules import as they would for `python path`
    try:
        file_spec.loader.exec_module(module)
    except (Exception, SystemExit) as err:  # sys.exit() at import too: the command's error, not its exit
        del sys.modules[name]
        raise ValueError(f"{kind} {spec!r}: importing {path} failed: {_failure(err)}") from err
    finally:
        sys.path.remove(folder)
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
    except (Exception, SystemExit) as err:
        raise ValueError(f"{kind} {spec!r}: importing module {target!r} failed: {_failure(err)}") from err


def _failure(err: BaseException) -> str:
    if isinstance(err, SystemExit):
        return f"it exited with {err.code!r} (sys.exit)"
    return f"{type(err).__name__}: {err}"


_LOADED: dict[str, str] = {}  # module name -> the contents it was imported with (dotted modules)


def _import_current_module(target: str, spec: str, kind: str, code: dict):
    """The module `target`, imported again (with its own package's modules) when its contents
    changed since this process imported it."""
    if target in sys.modules and _LOADED.get(target) not in (None, code["contents"]):
        origin = _module_origin(target, spec, kind)
        if origin is not None:
            _forget([os.path.join(origin[1], f) for f in code["files"]])
        sys.modules.pop(target, None)
    module = _import_module(target, spec, kind)
    _LOADED[target] = code["contents"]
    return module


def load(spec: str, kind: str, forms: str, code: dict | None = None):
    """The attribute a normalised `spec` names, imported; imported anew when its contents
    (`contents`, or `code` when the caller computed them) changed since this process imported it."""
    target, attr = split(spec, kind, forms)
    check_trust(spec, kind)
    code = code or contents(spec, kind, forms)
    obj = _import_file(target, spec, kind, code) if is_file(target) else \
        _import_current_module(target, spec, kind, code)
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{kind} {spec!r}: {target} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj
