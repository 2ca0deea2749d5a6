"""The identity of a run: everything that decides its numbers, as one dict, and the keys hashed from it.

`RunSpec` holds a run's parts and `RunSpec.identity` is the only definition of the dict. A run's
spec is made once, where the run is resolved, and read everywhere after: a job's when it is
resolved (`sweep/jobs.py` `Job.spec`: the trainer, its checkpoint, the scorer and the rows read
it from there), a model scored without training here (`scoring/trained_elsewhere.py`
`scored_spec`: a model given to `evaluate_model`, a state dict or predictions files given to
`bayesbench score`; a bayesbench checkpoint scored again keeps its own), a Trainer built
without a job (`training/trainer.py`, from its own settings), and a row stored before rows
recorded it (the store's migration, `store/migrations.py` `row_identity`). The identity is used
wherever a run is named:

- a job's key (`sweep/expand.py` `job_key`: `identity_key(identity, seeds)`) is its run
  directory's suffix and the `run_id` of its stored rows, so the same configuration finds its
  rows and its checkpoint whichever command made it;
- the trainer records it (with the seeds) in every checkpoint and refuses to resume one whose
  identity differs, naming the field (`training/checkpoint.py`);
- every stored row keeps it without the seeds (`config["identity"]`) and its hash
  (`config["identity_key"]`), and the leaderboard pools the seeds of rows with equal
  `identity_key` into one row (`store/database.py` `config_key`).

What is in it, and why each part changes a number:

- `task`: the tunnel's configuration (`Task.config()`): the sequences and the posterior;
- `label`: the leaderboard's task column (a task option is said in it): where the rows rank;
- `eval_lengths`, `eval_scored`, `eval_sequences`: what is scored, on how many sequences (the
  first scored set is also the learning curve's);
- `arch`, `model`: the architecture (a built-in name or an outside model's spec) and its
  resolved options (the capacity match applied); `max_len`: its position table's length;
- `train`: `TrainConfig.identity()`, or None for a model only scored here;
- `device_type`: `cpu` or `cuda`: data generators and kernels differ between device types;
- `threads`: the torch threads it ran with: the order of reductions moves the last digits;
- `code`: `versions.keyed(code)`: outside files' contents and raised versions;
- `tuning` (only in a tuned run's): the learning-rate search that chose its settings, or that it
  is a candidate of (`sweep/tune.py` `TuneSpec.identity`: the grid and any other axes, the
  selection seeds, set and rule, the candidate chosen), so a tuned row never shares a key with
  an untuned one, and another grid is another result.

Not in it: the seeds (a key adds them; the leaderboard pools over them), when checkpoints are
written and how often the losses are read back (`checkpoint_every`, `sync_every`: a resumed run
is the uninterrupted one, a read changes nothing), the run directory, the row group and an
outside model's leaderboard name.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass

from . import versions

KEY_CHARS = 16  # hex characters of the SHA-256 kept: 64 bits


@dataclass(frozen=True)
class RunSpec:
    """A run's parts that decide its numbers (see the module docstring for each), as resolved:
    plain data, so that a job, a trainer, a scored model and a stored row give the same identity
    for the same run."""

    task: dict
    label: str
    eval_lengths: tuple[int, ...]
    eval_scored: tuple[str, ...]
    eval_sequences: int | None
    arch: str
    model: dict
    max_len: int | None
    train: dict | None
    device_type: str | None
    threads: int | None
    code: dict | None
    tuning: dict | None = None

    @functools.cached_property
    def identity(self) -> dict:
        """The run's identity, without its seeds: the dict every key hashes (`identity_key`). An
        untuned run's has no `tuning` field at all (its key is what it was before tuning existed)."""
        return {**({"tuning": dict(self.tuning)} if self.tuning else {}),
                "task": self.task, "label": self.label, "eval_lengths": [int(k) for k in self.eval_lengths],
                "eval_scored": list(self.eval_scored), "eval_sequences": self.eval_sequences, "arch": self.arch,
                "model": dict(self.model), "max_len": self.max_len,
                "train": None if self.train is None else dict(self.train), "device_type": self.device_type,
                "threads": self.threads, "code": versions.keyed(self.code)}


def identity_key(identity: dict, seeds: Iterable[int] | None = None) -> str:
    """SHA-256 (first KEY_CHARS hex characters) of `identity`, with `seeds` when given: a job's key
    (with its seeds) or a row's `identity_key` (without)."""
    named = identity if seeds is None else {**identity, "seeds": [int(s) for s in seeds]}
    text = json.dumps(named, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_CHARS]


def difference(there: dict, here: dict, *, skip: Iterable[str] = ("code",)) -> str | None:
    """The first field (in name order, besides `skip`) whose value differs between two identities,
    in words: "train differs ({'lr': 0.001, ...} there, {'lr': 0.01, ...} here)"; None if none does.
    The code is skipped by default: `versions.changed` words what changed in it."""
    skip = set(skip)
    for key in sorted((set(there) | set(here)) - skip):
        if there.get(key) != here.get(key) or (key in there) != (key in here):
            was = repr(there[key]) if key in there else "not recorded"
            now = repr(here[key]) if key in here else "not recorded"
            return f"{key} differs ({was} there, {now} here)"
    return None
