"""The sweep driver: skip what the store holds, run the rest on an executor, store results.

The one engine of `bayesbench sweep`, `run` and `train`. Exactly once: a job's rows are keyed
(run_id = the job's stable key, seed), a job whose every seed is stored is skipped, and storing
is an upsert on that key, so a result that arrives twice (a retried task, a rerun after the
driver was killed between a job's end and its write) replaces itself instead of adding a row.
The driver is the store's only writer. Jobs that were interrupted resume from their checkpoints
(the workers look for them). A job that fails does not stop the others; it is reported, and
`SweepOutcome.errors` keeps its exception where the executor could hand it back.

Executors (`sweep/local.py`, `sweep/ray_executor.py`) have `describe()` and
`run(jobs, runs_dir, on_event, cache_dir)`, which runs every job through the worker body
(`sweep/one_job.py`) and reports its typed events (`sweep/events.py`: `Started`, `Stepped`,
`Retried`, `Finished`, `Failed`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..running import interrupt
from ..store.database import cache_dir_for, connect, db_path, prepare_store, write_records
from ..training.checkpoint import CHECKPOINT_NAME
from .events import Event, Failed, Finished, JobDone, JobEvent, Retried, Say, Started, Stepped, line
from .expand import SweepJob


@dataclass
class SweepOutcome:
    """What a sweep run did: keys skipped (already stored), trained, failed (key -> why; `errors`:
    key -> the exception, where the executor handed it back), retried (key -> retries), resumed
    (key -> the step its checkpoint had reached), and its wall time."""

    jobs: list[SweepJob]
    skipped: list[str] = field(default_factory=list)
    trained: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    errors: dict[str, BaseException] = field(default_factory=dict)
    retried: dict[str, int] = field(default_factory=dict)
    resumed: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0


def stored_keys(jobs: list[SweepJob], db: str | None) -> set[str]:
    """Keys of the jobs whose every seed has a row in the store."""
    if not jobs or not os.path.exists(db_path(db)):
        return set()
    conn = connect(db)
    try:
        keys = [sweep_job.key for sweep_job in jobs]
        have: dict[str, set[int]] = {}
        for i in range(0, len(keys), 500):  # SQLite's bound-parameter limit
            chunk = keys[i:i + 500]
            rows = conn.execute(f"SELECT run_id, seed FROM runs WHERE run_id IN ({', '.join('?' * len(chunk))})",
                                chunk).fetchall()
            for run_id, seed in rows:
                have.setdefault(run_id, set()).add(seed)
    finally:
        conn.close()
    return {sweep_job.key for sweep_job in jobs if set(sweep_job.job.seeds) <= have.get(sweep_job.key, set())}


def stored_records(db: str | None, keys: list[str], *, selection: bool = False) -> list:
    """The stored records of the runs `keys` (a tuning's selection rows with `selection`, else
    the others), as stored: what the engine reads back (a search's choice, a replay's run)."""
    from ..store.database import read_records
    from ..store.tuning import is_selection

    if not keys:
        return []
    records = read_records(db, where=f"run_id IN ({', '.join('?' * len(keys))})", params=tuple(keys))
    return [r for r in records if is_selection(r) == selection]


def job_state(sweep_job: SweepJob, stored: set[str], runs_dir: str) -> str:
    """"stored", "checkpoint" (interrupted: will resume) or "new"."""
    if sweep_job.key in stored:
        return "stored"
    return "checkpoint" if os.path.exists(os.path.join(sweep_job.run_dir(runs_dir), CHECKPOINT_NAME)) else "new"


def run_sweep(jobs: list[SweepJob], executor, *, db: str | None, runs_dir: str, progress: bool = True,
              sink: Callable[[Event], None] | None = None, on_event: Callable[[JobEvent], None] | None = None,
              lines: bool = False) -> SweepOutcome:
    """Run the jobs not yet stored on `executor`, writing each job's rows as it finishes.

    `progress`: a progress bar (a terminal); `lines`: instead, one line per job each time it
    reports a checkpoint (a tenth of its steps), for logs and terminals that show no bar.
    `sink(event)` gets what happened as typed events (`sweep/events.py`: `Say` lines, `JobDone`);
    without one, the lines go to the terminal above the bar.

    The store and its evaluation cache are opened, created and checked first, before any
    training (`store.database.prepare_store`). `on_event(event)` sees every event of the
    executor (tests use it to kill a worker mid-job)."""
    from tqdm.auto import tqdm

    if sink is None:
        sink = _terminal
    def say(text: str) -> None:
        sink(Say(text))
    runs_dir = os.path.abspath(runs_dir)  # workers may start elsewhere (Ray): one absolute path for all
    start = time.perf_counter()
    out = SweepOutcome(jobs)
    prepare_store(db)
    stored = stored_keys(jobs, db)
    out.skipped = [sweep_job.key for sweep_job in jobs if sweep_job.key in stored]
    todo = [sweep_job for sweep_job in jobs if sweep_job.key not in stored]
    by_key = {sweep_job.key: sweep_job for sweep_job in todo}
    resuming = sum(job_state(sweep_job, stored, runs_dir) == "checkpoint" for sweep_job in todo)
    say(f"{len(jobs)} job{'s' if len(jobs) != 1 else ''}: {len(out.skipped)} already stored (skipped), "
        f"{len(todo)} to run"
        + (f" ({resuming} resume from checkpoints)" if resuming else "")
        + (f" on {executor.describe()}" if todo else ""))
    logged = sorted({sj.log for sj in jobs if sj.log and sj.key in stored})
    if logged:
        say(f"--log {', '.join(logged)}: the {len(out.skipped)} stored job(s) are not trained again, so nothing is "
            "logged for them (their results are in the store; another --db, or their rows removed, trains them anew)")
    if not todo:
        out.wall_s = time.perf_counter() - start
        return out
    bar = tqdm(total=sum(sweep_job.job.train.steps for sweep_job in todo), unit="step", desc="sweep",
               disable=not progress, dynamic_ncols=True)
    steps: dict[str, int] = {}
    running: set[str] = set()
    finished: set[str] = set()

    def advance(key: str, step: int) -> None:
        if step > steps.get(key, 0):
            bar.update(step - steps.get(key, 0))
            steps[key] = step

    def handle(event: JobEvent) -> None:
        key = event.key
        sweep_job = by_key[key]
        if isinstance(event, Started) and key not in finished:
            running.add(key)
            if event.step > 0:
                out.resumed[key] = max(out.resumed.get(key, 0), event.step)
                say(f"resuming {sweep_job.label} from its checkpoint at step {event.step}")
            advance(key, event.step)
        elif isinstance(event, Stepped) and key not in finished:
            advance(key, event.step)
            if lines:
                total = sweep_job.job.train.steps
                say(f"  {sweep_job.label}: step {event.step:,} of {total:,} ({100 * event.step / total:.0f}%), "
                    f"{time.perf_counter() - start:.0f} s since the start")
        elif isinstance(event, Retried):
            out.retried[key] = out.retried.get(key, 0) + 1
            running.discard(key)
            say(f"retrying {sweep_job.label} (attempt {event.attempt}): {event.why}")
        elif isinstance(event, Finished):
            write_records(event.records, db)
            finished.add(key)
            running.discard(key)
            out.trained.append(key)
            advance(key, sweep_job.job.train.steps)
            r0, maes = event.records[0], " ".join(r.shown(r.entropy_mae_bits) for r in event.records)
            say(f"done: {sweep_job.label} ({r0.wall_s:.1f} s training, {r0.steps_per_s:.1f} steps/s); entropy MAE "
                f"(bits) per seed: {maes}")
            for r in event.records:
                if r.status != "ok":
                    say(f"      WARNING: {r.status}")
            sink(JobDone(key, sweep_job.label, event.records))
        elif isinstance(event, Failed):
            finished.add(key)
            running.discard(key)
            out.failed[key] = event.error
            if event.exception is not None:
                out.errors[key] = event.exception
            say(f"FAILED: {sweep_job.label}: {event.error}")
        bar.set_postfix(done=len(out.trained), running=len(running), failed=len(out.failed), refresh=False)
        bar.refresh()
        if on_event is not None:
            on_event(event)

    try:
        executor.run(todo, runs_dir, handle, cache_dir_for(db))
    except KeyboardInterrupt as err:  # Interrupted, or Ray's own KeyboardInterrupt
        stop = err if isinstance(err, interrupt.Interrupted) else interrupt.Interrupted("SIGINT")
        bar.close()
        report_stop(stop, [by_key[k] for k in sorted(running)], todo, runs_dir, say)
        if stop is err:
            raise
        raise stop from None
    finally:
        bar.close()
    out.wall_s = time.perf_counter() - start
    return out


def _terminal(event: Event) -> None:
    """The default sink: each line above the progress bar."""
    from tqdm.auto import tqdm

    text = line(event)
    if text is not None:
        tqdm.write(text)


def report_stop(stop: interrupt.Interrupted, running: list[SweepJob], jobs: list[SweepJob], runs_dir: str,
                say: Callable[[str], None]) -> None:
    """One line per job a stop request cut short: where it stopped and the checkpoint a rerun
    resumes from. Jobs the executor did not name (Ray cancels its tasks) but that were running
    are added to `stop` with their last periodic checkpoint."""
    named = {s.get("run") for s in stop.stopped}
    for sweep_job in running:
        if sweep_job.label not in named:
            stop.stopped.append({"run": sweep_job.label, "phase": "killed", "why": "cancelled"})
    by_label = {sweep_job.label: sweep_job for sweep_job in jobs}
    for s in stop.stopped:
        cut = by_label.get(str(s.get("run")))
        if not s.get("checkpoint") and cut is not None:
            path = os.path.join(cut.run_dir(runs_dir), CHECKPOINT_NAME)
            s["checkpoint"] = path if os.path.exists(path) else None
        phase, ckpt = s.get("phase"), s.get("checkpoint")
        where = {"training": f"at step {s.get('step')} of {s.get('steps')}",
                 "evaluation": "while evaluating (its training had finished)",
                 "killed": f"({s.get('why')}; its last periodic checkpoint stays)"}.get(str(phase), "before training")
        say(f"stopped {s.get('run')} {where}: " + (f"checkpoint {ckpt}, a rerun resumes from it" if ckpt else
                                                   "no checkpoint yet, a rerun starts it from step 0"))
