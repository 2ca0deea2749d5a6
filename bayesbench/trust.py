"""Outside code named in a file the user was handed runs only when the user trusts it (as Hugging
Face's `trust_remote_code`).

A run.json (`run --replay`), a `--config` file, a sweep file, a checkpoint (`eval RUN_DIR`,
`profile --run`, `score --checkpoint`) or a stored row can name outside code: a model or tunnel
'pkg.mod:build' or '/any/path/file.py:build'. Importing it runs it. While a `guard` is active
(every CLI command; `bayesbench.run(config=..., replay=...)`), outside code is imported only when
the user named it on the command line (the same spec, or the same file or module), or passed
`--trust-code` (`trust_code=True`); otherwise `UntrustedCode` says which file names which code,
before anything of it is imported. `source(path)` says which file the names being resolved come
from. Without a guard (a Python caller naming code itself) nothing is checked.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator

FLAG = "--trust-code"


class UntrustedCode(ValueError):
    """Outside code named in a file the user was handed, refused without --trust-code."""


_GUARDS: list[tuple[bool, frozenset[str]]] = []  # (trusted, the targets the user named), innermost last
_SOURCES: list[str] = []  # the files whose names are being resolved, innermost last


def target(spec: str) -> str:
    """The file (absolute) or module an outside spec 'target:attr' names; '' for another string."""
    name, sep, _ = str(spec).rpartition(":")
    if not sep or not name or name == "hf":  # hf:gpt2, a transformers architecture, is no file of code
        return ""
    if name.endswith(".py") or "/" in name or os.sep in name:
        return os.path.abspath(os.path.expanduser(name))
    return name


def named(values: Iterable) -> frozenset[str]:
    """The targets of every outside spec among `values` (command-line words, keyword values:
    'a,b' lists and '--opt=value' words are split)."""
    out: set[str] = set()
    for value in values:
        if isinstance(value, (list, tuple, set)):
            out |= named(value)
            continue
        if not isinstance(value, str):
            continue
        for word in value.split(","):
            for part in (word, word.partition("=")[2]):
                found = target(part.strip())
                if found:
                    out.add(found)
    return frozenset(out)


@contextlib.contextmanager
def guard(trusted: bool, typed: Iterable = ()) -> Iterator[None]:
    """Within the block, outside code is imported only when `trusted` or named in `typed` (the
    user's own words: command-line arguments, keyword values)."""
    _GUARDS.append((bool(trusted), named(typed)))
    try:
        yield
    finally:
        _GUARDS.pop()


@contextlib.contextmanager
def source(path: str | os.PathLike | None) -> Iterator[None]:
    """Within the block, the outside code being resolved is named in the file `path`."""
    _SOURCES.append(os.fspath(path) if path is not None else "")
    try:
        yield
    finally:
        _SOURCES.pop()


def check(spec: str, kind: str) -> None:
    """Refuse to import the outside `kind` ("model", "task") `spec` unless the innermost guard
    trusts it (`UntrustedCode` naming the file that names it and the code)."""
    if not _GUARDS:
        return
    trusted, typed = _GUARDS[-1]
    if trusted or target(spec) in typed:
        return
    where = next((s for s in reversed(_SOURCES) if s), None)
    named_in = f"{where} names" if where else "a file or store this command read names"
    raise UntrustedCode(f"{named_in} outside {kind} code {spec!r}; code named in a file is imported only when you "
                        f"trust it: pass {FLAG} (trust_code=True in Python) to import it, or name it yourself "
                        f"on the command line")
