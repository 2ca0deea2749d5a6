"""A stored run being run again (`bayesbench run --replay`, `bayesbench.run(replay=...)`): its
jobs checked to resolve to the stored identity before anything runs, the notes on what differs
(code, package, store), and every number compared with the stored ones after.

The front ends read the run file into settings (`cli/settings.replay_settings`); the engine
(`sweep/engine.py`) checks the jobs (`check_jobs`) and, for a tuned run, the search's choice.
The notes name the run file, the way a front end says `--replay`; errors are `FieldError`s
about the `replay` field.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from ..store.database import db_path
from .request import FieldError


@dataclass
class Replay:
    """A stored run being replayed: its run file and its document."""

    path: str
    doc: dict
    stored: bool = False  # the store already held the run's key: nothing was trained
    said: set = field(default_factory=set)  # the notes given (a tuned run checks its job in each phase)

    @property
    def identity(self) -> dict:
        return self.doc["config"]["identity"]


def check_jobs(replay: Replay, jobs: list, say, db: str | None, runs_dir: str) -> list:
    """The replayed run's one job, checked to resolve to the stored identity (else an error
    naming the first field that differs); says where the code and the package differ from the
    run's, and when the store already holds it or its run directory exists (a finished
    checkpoint there is evaluated again, not trained again)."""
    from ..identity import difference, identity_key
    from ..running.provenance import provenance
    from ..versions import changed

    (sweep_job,) = jobs
    stored = replay.identity
    say = _once(replay, say)
    sweep_job = as_stored(replay, sweep_job)
    differs = difference(stored, sweep_job.job.identity)
    if differs:
        raise FieldError("replay", f"{{replay}} {replay.path}: its settings no longer resolve to the run it was: "
                         f"{differs} (a preset or a default changed since)")
    run_id = replay.doc.get("run_id")
    seeds = replay.doc["config"].get("seeds") or [s["seed"] for s in replay.doc.get("seeds", [])]
    recorded = identity_key(stored, [int(s) for s in seeds])
    if run_id and recorded != run_id:
        say(f"--replay: {replay.path} does not hold together: its run_id {run_id} is not the key of the settings and "
            f"seeds it records ({recorded}); it was edited or written by other code. The replay runs what it records")
    code = changed(replay.doc.get("code") or (replay.doc.get("config") or {}).get("code"), sweep_job.job.code)
    if code:
        new = (f"it is a new result (key {sweep_job.key}, the run's {run_id})" if sweep_job.key != run_id else
               f"its key is the run's ({run_id}), so the run file's record of its code was edited")
        say(f"--replay: the code differs from the run's: {'; '.join(code)}. Its numbers may differ, and {new}")
    then, now = replay.doc.get("environment") or {}, provenance()
    fields = ("bayesbench", "git_commit", "git_dirty")
    if [then.get(f) for f in fields] != [now[f] for f in fields]:
        say(f"--replay: the run was made by bayesbench {then.get('bayesbench')} ({_commit(then)}); this is "
            f"{now['bayesbench']} ({_commit(now)})")
    replay.stored = already_stored(db, sweep_job.key)
    if replay.stored:
        say(f"--replay: the store {db_path(db)} already holds this run (key {sweep_job.key}): its stored rows are "
            "shown and nothing is trained; give another --db and --runs-dir to train it again")
    elif os.path.exists(sweep_job.run_dir(runs_dir)):
        say(f"--replay: its run directory {sweep_job.run_dir(runs_dir)} exists: training continues from its checkpoint "
            "(a finished one is evaluated again, not trained again); give another --runs-dir to train it from the "
            "start")
    return jobs


def _once(replay: Replay, say):
    def once(line: str) -> None:
        if line not in replay.said:
            replay.said.add(line)
            say(line)
    return once


def as_stored(replay: Replay, sweep_job):
    """The job the replayed run was: `sweep_job` itself, or for a tuned run (`--tune` runs the
    search of the untuned `sweep_job` again) the job at the candidate the stored search chose,
    which the new search must choose too (`check_choice`)."""
    tuning = replay.identity.get("tuning")
    if not tuning:
        return sweep_job
    from .expand import SweepJob
    from .tune import TuneSpec, final_job

    try:
        spec = TuneSpec.of_identity(tuning, f"{{replay}} {replay.path}: config.identity.tuning")
    except ValueError as err:
        raise FieldError("replay", str(err)) from None
    final = final_job(sweep_job.job, spec, {"chosen": tuning["chosen"]})
    return SweepJob.of(final, group_id=sweep_job.group_id, size=sweep_job.size)


def check_choice(replay: Replay, jobs: list, say) -> None:
    """After a tuned run's replay: whether its search chose the stored run's candidate."""
    chosen = (replay.identity.get("tuning") or {}).get("chosen")
    if chosen is None:
        return
    for sweep_job in jobs:
        now = (sweep_job.job.tuning or {}).get("chosen")
        if now != chosen:
            say(f"--replay: the search chose {now} this time, the stored run {chosen}: a different run (key "
                f"{sweep_job.key}, the stored run's {replay.doc.get('run_id')}), so its numbers differ")


def _commit(env: dict) -> str:
    commit = env.get("git_commit")
    if not commit:
        return "commit unknown"
    return f"commit {commit[:12]}{' with uncommitted changes' if env.get('git_dirty') else ''}"


def already_stored(db: str | None, key: str) -> bool:
    """Whether the store at `db` holds rows of the run `key` (a missing store holds none)."""
    from .driver import stored_records

    if not os.path.exists(db_path(db)):
        return False
    return bool(stored_records(db, [key]))


def compare(replay: Replay, records: list) -> list[str]:
    """Every number of the replayed run against the stored run's, seed by seed: each metric's
    mean on each evaluation set and the final training loss. Lines to print; the first says
    whether every number is equal to the last digit."""
    from ..store.records import EvalResult

    if replay.stored:
        return ["--replay: nothing was trained (the store held the run), so there is nothing to compare"]
    stored = {s["seed"]: s for s in replay.doc.get("seeds", [])}
    equal, differ = 0, []
    for r in records:
        then = stored.get(r.seed)
        if then is None:
            differ.append(f"seed {r.seed}: not in the stored run")
            continue
        pairs = [("final loss (nats)", then.get("final_loss_nats"), r.final_loss)]
        for name, ev in r.evals.items():
            old = then["evals"].get(name)
            old_metrics = EvalResult.from_json(old).metrics() if old is not None else {}
            for metric, summary in ev.metrics().items():
                before = old_metrics.get(metric)
                pairs.append((f"{name} {metric}", None if before is None else before.mean, summary.mean))
        for what, a, b in pairs:
            if _same(a, b):
                equal += 1
            else:
                differ.append(f"seed {r.seed} {what}: {a!r} stored, {b!r} now")
    n = len(records)
    if not differ:
        return [f"--replay: every number equals the stored run's to the last digit ({equal} numbers: each metric "
                f"on each evaluation set and the final loss, {n} seed{'s' if n != 1 else ''})"]
    return [f"--replay: {len(differ)} of {equal + len(differ)} numbers differ from the stored run's:", *differ[:20]]


def _same(a, b) -> bool:
    """Equal to the last digit (a null in run.json is a non-finite number)."""
    a = math.nan if a is None else float(a)
    b = math.nan if b is None else float(b)
    return a == b or (math.isnan(a) and math.isnan(b))
