"""Tasks by name: `get_task("hmm", K=30)`.

A tunnel file registers its task class with `@register_task(name)`; every module of
`bayesbench.tasks` is imported when a name is looked up that is not registered yet (and by
`list_tasks`), so adding a tunnel is adding one file (and its oracle): no list of tunnels to
edit. The registry imports no tunnel by statement (they import it to register), so the tasks
package has no import cycle.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import os
import pkgutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Callable

from .base import Task

_TASKS: dict[str, type[Task]] = {}
_UNLISTED: set[str] = set()
_discovered = False


def register_task(name: str, *, listed: bool = True) -> Callable[[type[Task]], type[Task]]:
    """Class decorator adding a task under `name` (one name, one class). `listed=False`: a name
    stored configs use but no tunnel of its own (the wrapper of outside tasks), not in `list_tasks`."""

    def add(cls: type[Task]) -> type[Task]:
        if name in _TASKS and _TASKS[name] is not cls:
            raise ValueError(f"task name {name!r} is already registered to {_TASKS[name].__name__}")
        _TASKS[name] = cls
        if not listed:
            _UNLISTED.add(name)
        return cls

    return add


def unregister_task(name: str) -> None:
    """Remove task `name` from the registry (a test's own tunnel, undone: `registered_tasks`);
    an unknown name is a ValueError."""
    if name not in _TASKS:
        raise ValueError(f"unknown task {name!r}: nothing to unregister")
    del _TASKS[name]
    _UNLISTED.discard(name)


@contextmanager
def registered_tasks() -> Iterator[None]:
    """Undo, on leaving, every task registered inside: the registry is as it was (tests that
    add their own tunnel)."""
    before, unlisted = dict(_TASKS), set(_UNLISTED)
    try:
        yield
    finally:
        for name in set(_TASKS) - set(before):
            unregister_task(name)
        _TASKS.update(before)
        _UNLISTED.clear()
        _UNLISTED.update(unlisted)


def _discover() -> None:
    """Import every module of this package once: each tunnel file registers its task."""
    global _discovered
    if _discovered:
        return
    for info in pkgutil.iter_modules([os.path.dirname(os.path.abspath(__file__))]):
        importlib.import_module(f"{__package__}.{info.name}")
    _discovered = True


def get_task(name: str, /, **config) -> Task:
    """Build the task registered as `name` with its configuration (keyword arguments; a key that is
    not one of the task's fields, `name` included, is refused naming the fields there are)."""
    if name not in _TASKS:
        _discover()
    if name not in _TASKS:
        raise ValueError(f"unknown task {name!r}; available: {', '.join(list_tasks())} (or your own: "
                         "'pkg.mod:build', './file.py:build')")
    cls = _TASKS[name]
    settings = task_settings(cls)
    for key in config:
        if key not in settings:  # e.g. `name`: a class attribute, not a setting
            close = difflib.get_close_matches(key, settings, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"{key!r} is not a setting of task {name!r}{hint}; its settings: {', '.join(settings)}")
    return cls(**config)


def task_settings(task: Task | type[Task]) -> list[str]:
    """The settings of a task (or task class): its dataclass fields set at construction, in order."""
    return [f.name for f in dataclasses.fields(task) if f.init]


def task_from_config(config: dict) -> Task:
    """The task a `Task.config()` dict describes ({"task": name, **fields}): its inverse."""
    config = dict(config)
    if "task" not in config:
        raise ValueError(f"a task config needs a 'task' entry (the task's name), got keys {sorted(config)}")
    return get_task(config.pop("task"), **config)


def list_tasks() -> list[str]:
    """The registered tunnels' names (every tunnel file of this package, and any registered since)."""
    _discover()
    return sorted(set(_TASKS) - _UNLISTED)
