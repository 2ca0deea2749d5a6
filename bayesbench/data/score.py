"""`bayesbench score --predictions`: predictions made anywhere, checked, scored and stored as a row.

Each file is matched to the evaluation set its key names (`data.predictions`): the set whose id
(`scoring.evaluate.eval_set_id`) it carries, among the evaluation sets of the preset's tasks at
the file's number of sequences (or of `--task`, with `--task-args`: another configuration of
a preset's task, or your own tunnel). A file is refused, and nothing stored, when:

- its key names no such set ("another set": exported with other task options, another preset,
  another size, or the curve or training split, which are not scored), or a tunnel whose code
  has changed since (an older tunnel version: the sets it was made on are not the sets now);
- it breaks a rule of `data.predictions.check` (shape, finite, normalised);
- the files of one call are not of one task's evaluations, name one set twice, or lack the
  task's primary evaluation (the set the leaderboard ranks by).

What passes is scored by the code every model is scored by (`scoring.rows.score_run`, on a
`scoring.predictions.GivenPredictions` standing for the model): every metric with its 95%
interval over sequences, the floors on the same sequences, per-position curves; one row per
call, stored under `--name` like any other (the steps `--steps` states, else 0: not stated; no
training configuration; the HMM's label-permutation check needs the model itself and is left
out). The run id is a hash of the files, the name, the task and the seed label, so scoring the
same files again replaces the row.
"""

from __future__ import annotations

import hashlib
import json

from ..presets import get_preset
from ..store.database import cache_dir_for, prepare_store
from ..store.records import RunRecord
from ..tasks import task_from_config
from .predictions import Predictions, check, read, sidecar
from .sets import SetSpec, evaluation_sets, task_setup


def candidate_sets(preset: str, sizes: set[int], task: str | None = None,
                   task_args: dict | None = None) -> list[tuple[str, object, SetSpec]]:
    """(task key, TaskSetup, SetSpec) of every evaluation set a predictions file may name: the
    preset's tasks (or `task` alone, with `task_args`) at each size in `sizes`."""
    keys = [task] if task is not None else list(get_preset(preset).tasks)
    out: list[tuple[str, object, SetSpec]] = []
    for key in keys:
        setup = task_setup(key, task_args if task is not None else None, preset)
        for n in sorted(sizes):
            out += [(key, setup, spec) for spec in evaluation_sets(setup, n).values()]
    return out


def match(pred: Predictions, candidates: list, preset: str, task: str | None) -> tuple:
    """The (task key, setup, SetSpec) the file's key names; a one-line refusal otherwise."""
    key = pred.key
    for found in candidates:
        spec = found[2]
        if spec.set_id == key["set_id"]:
            if spec.key() != key:
                raise ValueError(f"{pred.where()}: its key {json.dumps(key)} does not describe the set "
                                 f"{key['set_id']} (its key is {json.dumps(spec.key())}) (rule: copy a set's key as "
                                 "the export wrote it)")
            return found
    same_tunnel = [c for c in candidates if c[2].task.name == key["tunnel"]]
    changed = [c for c in same_tunnel if c[2].key()["tunnel_code"] != key["tunnel_code"]]
    if changed:
        now = changed[0][2].key()["tunnel_code"]
        raise ValueError(f"{pred.where()}: made for tunnel {key['tunnel']} code {key['tunnel_code']}, which is "
                         f"{now} now (rule: predictions are scored only on the sets of the tunnel's current version; "
                         "export the set again and predict it)")
    where = f"--task {task}" if task is not None else f"preset {preset!r}"
    n = key["n_sequences"]
    known = ", ".join(f"{c[1].label} {c[2].name} {c[2].set_id}" for c in candidates if c[2].n == n) or "none"
    raise ValueError(f"{pred.where()}: set {key['set_id']} is not an evaluation set of {where} with {n} sequences "
                     f"(rule: a file is scored against the set it was made for; those sets: {known}; a set exported "
                     "with --task-args or of your own tunnel needs the same --task and --task-args here; curve and "
                     "train splits are not scored)")


def _run_id(paths: list[str], name: str, label: str, seed: int) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        if path.endswith(".npy"):
            with open(sidecar(path), "rb") as f:
                digest.update(f.read())
    digest.update(f"\0{name}\0{label}\0{seed}".encode())
    return "predictions-" + digest.hexdigest()[:12]


def score_predictions(paths: list[str], *, name: str, preset: str = "quick", task: str | None = None,
                      task_args: dict | None = None, seed: int = 0, params: int = 0, steps: int = 0,
                      db: str | None = None, store: bool = True) -> list[RunRecord]:
    """Check, score and store the predictions files `paths` (the evaluation sets of one task)
    as one row named `name` (module doc); returns its record."""
    from ..checks import int_at_least
    from ..scoring.predictions import GivenPredictions
    from ..scoring.rows import score_run
    from ..scoring.trained_elsewhere import check_name, scored_result, scored_spec

    check_name(name)
    int_at_least("--params", params, 0, "the model's parameter count; 0: not given")
    int_at_least("--steps", steps, 0, "the steps the model was trained, as stated; 0: not stated")
    int_at_least("--seed", seed, 0, "the seed label of the model that made the predictions")
    if task_args and task is None:
        raise ValueError("--task-args go with --task: the task whose options they change")
    preds = [read(p) for p in paths]  # every file read, and its form checked, before any set is drawn
    candidates = candidate_sets(preset, {p.key["n_sequences"] for p in preds}, task, task_args)
    matched = [match(p, candidates, preset, task) for p in preds]
    keys = {m[1].label for m in matched}
    if len(keys) > 1:
        raise ValueError(f"--predictions: the files are of the sets of {len(keys)} tasks ({', '.join(sorted(keys))}) "
                         "(rule: one call scores one task's evaluations, one row)")
    names = [m[2].name for m in matched]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"--predictions: two files of the set {twice[0]} (rule: one file per evaluation set)")
    setup = matched[0][1]
    order = list(evaluation_sets(setup))
    if order[0] not in names:
        raise ValueError(f"--predictions: no file of {setup.label}'s primary evaluation set {order[0]!r} (rule: a row "
                         f"holds its task's primary evaluation, the one the leaderboard ranks by; its sets: "
                         f"{', '.join(order)})")
    sizes = {m[2].n for m in matched}
    if len(sizes) > 1:
        raise ValueError(f"--predictions: the sets have {sorted(sizes)} sequences (rule: one row, one set size)")
    if store:  # a store or cache that cannot be written is named (--db) before any set is drawn
        prepare_store(db)
    cache_dir = cache_dir_for(db)
    given, scored = [], sorted(names, key=order.index)
    for pred, (_, _, spec) in sorted(zip(preds, matched), key=lambda x: order.index(x[1][2].name)):
        batch = spec.draw(cache_dir)
        given.append((batch, check(pred, batch, spec.set_id)))  # every file checked before anything is scored or stored
    model = GivenPredictions(given, seed=seed, params=params)
    train_task = task_from_config(setup.task)
    lengths = tuple(int(n[2:]) for n in scored) if setup.eval_lengths else ()
    scored_sets = tuple(scored) if setup.eval_scored else ()
    max_len = max(b.seq_len for b, _ in given)
    n_sequences = sizes.pop()
    code = {"task": train_task.code(), "model": {"contents": "not recorded: predictions given in a file"}}
    spec = scored_spec(train_task, setup.label, lengths, scored_sets, n_sequences, arch=name, model={},
                       max_len=max_len, device_type="cpu", code=code)
    result = scored_result(spec, _run_id(paths, name, setup.label, seed), model, [seed], steps, preset=preset,
                           name=name)
    return score_run(result, db=db, device="cpu", write=store)
