"""Which sequences a task and a split name: the sets `bayesbench data export` writes and
`bayesbench score --predictions` scores against.

A task is named as `--task` names it elsewhere: a preset's task key (`bijection`, `hmm`,
`sticky`), with `--task-args` over the preset's fields, or an outside tunnel
(`./mine.py:build`, `pkg.mod:build`) with its factory's options (`sweep.jobs.task_setup`). A
split is one of:

- `eval`: the fixed evaluation sets every leaderboard row of that task is scored on
  (`scoring.evaluate.eval_set`: one per evaluation, e.g. the bijection's `values` and
  `values+query`, the HMM's `K=20`, `K=30`, `K=50`), at the preset's size unless given;
- `curve`: the fixed learning-curve set (`training.curves.curve_batch`) of the primary evaluation;
- `train`: fresh training sequences of the training task, from the training-data seed of model
  seed S (`training.seeds.data_seed`), drawn in one call: the same domain the trainer draws
  from, never an evaluation sequence (they are not the trainer's own batches, which it draws
  `batch_size` x 16 at a time).

Every set is identified by `scoring.evaluate.eval_set_id(task, n, seed)`: the tunnel's
configuration and code, the number of sequences and the seed. The same id is the same
sequences and posteriors; an edited tunnel or a raised `Task.version` is another id.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import torch

from ..presets import TaskSetup, get_preset
from ..scoring.evaluate import eval_set, eval_set_id, evaluation_tasks
from ..tasks import Batch, Task, is_outside_task, task_from_config
from ..training.curves import DEFAULT_CURVE_SEQUENCES, curve_batch
from ..training.seeds import MAX_SEED, data_seed, eval_seed
from . import SPLITS


@dataclass(frozen=True)
class SetSpec:
    """One set: its name (an evaluation's, or "curve" / "train"), the task its sequences are
    drawn from, their number and the generator seed."""

    split: str
    name: str
    task: Task
    n: int
    seed: int

    @property
    def set_id(self) -> str:
        return eval_set_id(self.task, self.n, self.seed)

    @property
    def slug(self) -> str:
        """A file and split name: 'values+query' -> 'values_query', 'K=30' -> 'K_30'."""
        return slug(self.name)

    def key(self) -> dict:
        """What a predictions file carries to name this set (docs/data.md): its id, its number of
        sequences, and the tunnel's name and code (`Task.code()` as JSON text)."""
        return {"set_id": self.set_id, "n_sequences": self.n, "tunnel": self.task.name,
                "tunnel_code": tunnel_code(self.task)}

    def draw(self, cache_dir: str | None = None) -> Batch:
        """The set's sequences, as scoring and training draw them."""
        if self.split == "eval":
            return eval_set(self.task, self.n, seed=self.seed, cache_dir=cache_dir)
        if self.split == "curve":
            return curve_batch(self.task, self.n)
        return self.task.sample(self.n, torch.Generator().manual_seed(self.seed))


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_") or "set"


def tunnel_code(task: Task) -> str:
    """A tunnel's code (`Task.code()`: a built-in's version, an outside file's contents) as JSON text."""
    return json.dumps(task.code(), sort_keys=True)


def task_setup(task: str, task_args: dict | None = None, preset: str = "quick") -> TaskSetup:
    """The preset's setup of `task` (a task key or an outside tunnel spec), with `task_args`."""
    from ..checks import SettingError
    from ..sweep.jobs import task_setup as setup_of
    from ..tasks import list_tasks

    p = get_preset(preset)
    if task not in p.tasks and not is_outside_task(task) and task not in list_tasks():  # a registered one runs by name
        raise ValueError(f"task {task!r} is not in preset {preset!r}; available: {', '.join(p.tasks)} (or your own "
                         "tunnel: 'pkg.mod:build', './file.py:build')")
    try:
        return setup_of(p, task, task_args or None)
    except SettingError as err:  # the resolver names the setting; the flag that gave it goes in front
        raise ValueError(f"--task-args for task {task!r}: {err}") from None


def evaluation_sets(setup: TaskSetup, n: int | None = None) -> dict[str, SetSpec]:
    """{evaluation name: SetSpec} of a setup's evaluation sets (the primary first), n sequences
    each (default: the setup's)."""
    n = setup.eval_sequences if n is None else n
    tasks = evaluation_tasks(task_from_config(setup.task), setup.eval_lengths, setup.eval_scored)
    return {name: SetSpec("eval", name, t, n, eval_seed(t)) for name, t in tasks.items()}


def sets_of(setup: TaskSetup, split: str, *, n: int | None = None, evals: list[str] | None = None,
            seed: int = 0) -> list[SetSpec]:
    """The sets `split` names for `setup` (see the module doc). `evals` (eval split): only
    these evaluations; `seed` (train split): the model seed whose training-data domain is drawn."""
    if split not in SPLITS:
        raise ValueError(f"--split must be one of {SPLITS}, got {split!r}")
    if evals and split != "eval":
        raise ValueError(f"--eval names evaluation sets: it goes with --split eval, not --split {split}")
    named = list(evals or ())
    twice = sorted({e for e in named if named.count(e) > 1})
    if twice:
        raise ValueError(f"--eval {twice[0]} is given twice: name each evaluation set once")
    if not (isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed <= MAX_SEED):
        raise ValueError(f"--seed must be an integer in [0, {MAX_SEED}] (a model seed, a non-negative int64), "
                         f"got {seed!r}")
    if split == "eval":
        sets = evaluation_sets(setup, n)
        unknown = [e for e in evals or () if e not in sets]
        if unknown:
            raise ValueError(f"--eval {unknown[0]}: {setup.label} has the evaluation sets {', '.join(sets)}")
        return [sets[e] for e in evals] if evals else list(sets.values())
    if split == "curve":
        primary = next(iter(evaluation_sets(setup).values())).task
        size = n if n is not None else int(setup.train.get("curve_sequences", DEFAULT_CURVE_SEQUENCES))
        return [SetSpec("curve", "curve", primary, size, eval_seed(primary, "curve"))]
    if n is None:
        raise ValueError("--split train needs --sequences N: how many fresh training sequences to draw")
    task = task_from_config(setup.task)
    return [SetSpec("train", "train", task, n, data_seed(seed))]

