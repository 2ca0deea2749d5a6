"""Wind tunnels from outside the package: `--task ./mytask.py:build` or `--task my_pkg.tunnels:build`.

The factory is called with the task's options (`--task-args k=v`, a sweep's task options) and
returns a `Task`: a frozen dataclass subclass of `bayesbench.tasks.Task` with `vocab_size`,
`num_classes`, `seq_len` and `sample(batch_size, generator)` giving a `Batch` with the exact
posterior (docs/tasks.md, "Your own tunnel"). `OutsideTask` carries the name and options, so a
run's stored task config (`{"task": "outside", "spec": ..., "options": ...}`) rebuilds it in a
worker process or a later command, and delegates everything else to the task the factory built.
`check_task` (tasks/check.py) is run on it before any training. A continuous tunnel (issue 41) is
wrapped the same way: its `head` and `header_every_position` are passed on, and what the base Task
lacks (`floor_predictives`, `error_dim`) is read from the inner task.

Its `code()` is the contents of the factory's file and of the modules it imports from its own
folder (`outside_code.contents`), so an edited tunnel is a new tunnel for every key (jobs, evaluation
sets, checkpoints); a class attribute `version` on the user's Task, if set, is recorded too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import torch

from .. import outside_code
from .base import Batch, Task
from .registry import list_tasks, register_task

FORMS = "'package.module:factory' or './file.py:factory'"


def is_outside_task(name: str) -> bool:
    """Whether a --task value names outside code ('pkg.mod:build', './file.py:build')."""
    return ":" in name


def _options(options) -> tuple[tuple[str, object], ...]:
    items = dict(options or {})
    for k, v in items.items():
        try:
            json.dumps(v)
        except TypeError:
            raise ValueError(f"task option {k}={v!r}: options must be JSON values (numbers, strings, lists)") from None
    return tuple(sorted(items.items()))


@register_task("outside", listed=False)
@dataclass(frozen=True, eq=True)
class OutsideTask(Task):
    """The task `factory(**options)` builds, `spec` naming the factory (see the module doc)."""

    spec: str
    options: tuple[tuple[str, object], ...] = ()

    def __post_init__(self) -> None:
        spec = outside_code.normalise(self.spec, "task", FORMS)
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "options", _options(dict(self.options)))
        code = outside_code.contents(spec, "task", FORMS)
        factory = outside_code.load(spec, "task", FORMS, code)
        if not callable(factory):
            raise ValueError(f"task {spec!r}: {spec.rpartition(':')[2]} is a {type(factory).__name__}, not a "
                             "callable factory(**options) -> Task")
        try:
            with outside_code.guarded():
                inner = factory(**dict(self.options))
        except ValueError:
            raise
        except Exception as err:  # the user's factory failing is the user's error
            raise ValueError(f"task {spec!r}: the factory raised {type(err).__name__}: {err}") from err
        if not isinstance(inner, Task) or isinstance(inner, OutsideTask):
            raise ValueError(f"task {spec!r}: the factory must return a bayesbench.tasks.Task (a frozen dataclass "
                             f"subclass with vocab_size, num_classes, seq_len and sample), got {type(inner).__name__}")
        if inner.name in list_tasks() or inner.name == "outside":
            raise ValueError(f"task {spec!r}: its name {inner.name!r} is a built-in tunnel's; give your Task class "
                             "another `name`")
        object.__setattr__(self, "_inner", inner)
        own = type(inner).__dict__.get("version")  # the user's own version, when their class sets one
        object.__setattr__(self, "_code", {**code, **({"version": own} if isinstance(own, int) else {})})

    def __reduce__(self):  # rebuilt from its name in another process (the inner class may live in a file)
        return (OutsideTask, (self.spec, self.options))

    @property
    def inner(self) -> Task:
        return self._inner

    @property
    def name(self) -> str:  # type: ignore[override]  # Task.name is a class attribute; here the inner task's
        return self.inner.name

    @property
    def vocab_size(self) -> int:
        return self.inner.vocab_size

    @property
    def num_classes(self) -> int:
        return self.inner.num_classes

    @property
    def seq_len(self) -> int:
        return self.inner.seq_len

    @property
    def header_dim(self) -> int:
        return self.inner.header_dim

    @property
    def header_len(self) -> int:
        return self.inner.header_len

    @property
    def head(self) -> str:  # a continuous tunnel's "gaussian" / "mixture:M" (issue 41), else "categorical"
        return self.inner.head

    @property
    def header_every_position(self) -> bool:
        return self.inner.header_every_position

    def sample(self, batch_size: int, generator: torch.Generator | None = None, *,
               device: torch.device | str | None = None, dtype: torch.dtype = torch.float32) -> Batch:
        try:
            # without a generator it draws from torch's own, which must then move on as for any task
            with outside_code.guarded(keep=() if generator is not None else ("torch RNG", "CUDA RNG")):
                return self.inner.sample(batch_size, generator, device=device, dtype=dtype)
        except Exception as err:  # the user's sampler failing, e.g. mid-training, is the user's error
            raise ValueError(f"task {self.spec!r}: sample({batch_size}) raised {type(err).__name__}: {err} (an error "
                             "in the tunnel's own code)") from err

    def sequence_bytes(self, dtype: torch.dtype = torch.float32) -> int:
        return self.inner.sequence_bytes(dtype)

    def config(self) -> dict:
        return {"task": "outside", "spec": self.spec, "options": dict(self.options)}

    def code(self) -> dict:
        """The contents of the tunnel's file and its own-folder imports, as imported (see the module doc)."""
        return dict(self._code)

    def describe(self) -> str:
        return self.inner.describe()

    def __getattr__(self, item: str):  # the inner task's own fields (e.g. task.V) and methods that the base
        # Task lacks: a continuous tunnel's floor_predictives and error_dim, brute_force_posterior
        if item.startswith("_"):
            raise AttributeError(item)
        return getattr(self._inner, item)


def outside_task(spec: str, options: dict | None = None) -> OutsideTask:
    """The outside task `spec` names, built with `options`."""
    return OutsideTask(spec, _options(options))
