"""The identity of a run: everything that decides its numbers, as one dict, and the keys hashed from it.

`run_identity` is the only definition, used wherever a run is named:

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
- `code`: `versions.keyed(code)`: outside files' contents and raised versions.

Not in it: the seeds (a key adds them; the leaderboard pools over them), when checkpoints are
written and how often the losses are read back (`checkpoint_every`, `sync_every`: a resumed run
is the uninterrupted one, a read changes nothing), the run directory, the row group and an
outside model's leaderboard name.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence

from . import versions

KEY_CHARS = 16  # hex characters of the SHA-256 kept: 64 bits


def run_identity(*, task: dict, label: str, eval_lengths: Sequence[int], eval_scored: Sequence[str],
                 eval_sequences: int | None, arch: str, model: dict, max_len: int | None, train: dict | None,
                 device_type: str | None, threads: int | None, code: dict | None) -> dict:
    """The identity of a run (see the module docstring), from its parts: plain data, so that a
    job, a trainer, a scored model and a stored row give the same dict for the same run."""
    return {"task": task, "label": label, "eval_lengths": [int(k) for k in eval_lengths],
            "eval_scored": list(eval_scored), "eval_sequences": eval_sequences, "arch": arch, "model": dict(model),
            "max_len": max_len, "train": None if train is None else dict(train), "device_type": device_type,
            "threads": threads, "code": versions.keyed(code)}


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
