"""Tasks by name: `get_task("hmm", K=30)`."""

from __future__ import annotations

from typing import Callable

from .base import Task

_TASKS: dict[str, type[Task]] = {}
_UNLISTED: set[str] = set()


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


def get_task(name: str, /, **config) -> Task:
    """Build the task registered as `name` with its configuration (keyword arguments; a key that is
    not one of the task's fields, `name` included, is refused naming the fields there are)."""
    if name not in _TASKS:
        raise ValueError(f"unknown task {name!r}; available: {', '.join(list_tasks())} (or your own: "
                         "'pkg.mod:build', './file.py:build')")
    cls = _TASKS[name]
    import dataclasses
    import difflib

    settings = [f.name for f in dataclasses.fields(cls) if f.init]
    for key in config:
        if key not in settings:  # e.g. `name`: a class attribute, not a setting
            close = difflib.get_close_matches(key, settings, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"{key!r} is not a setting of task {name!r}{hint}; its settings: {', '.join(settings)}")
    return cls(**config)


def task_from_config(config: dict) -> Task:
    """The task a `Task.config()` dict describes ({"task": name, **fields}): its inverse."""
    config = dict(config)
    if "task" not in config:
        raise ValueError(f"a task config needs a 'task' entry (the task's name), got keys {sorted(config)}")
    return get_task(config.pop("task"), **config)


def list_tasks() -> list[str]:
    """The built-in tunnels' names."""
    return sorted(set(_TASKS) - _UNLISTED)
