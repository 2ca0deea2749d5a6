"""`bayesbench sweep FILE`: run a sweep file on the local pool (default) or a Ray cluster.

    bayesbench sweep sweeps/quick.toml --dry-run     # the expanded jobs, their cost and state
    bayesbench sweep sweeps/quick.toml               # local processes, results into the store
    bayesbench sweep sweeps/quick.toml --ray auto    # the Ray cluster this machine is part of
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from .args import add_db, add_log, check_folder, progress, progress_lines
from .engine import add_executor_options
from .errors import flag_of

if TYPE_CHECKING:
    from ..sweep.expand import SweepJob


def add_parser(sub) -> None:
    p = sub.add_parser("sweep", help="run a grid of jobs from a sweep file (TOML or Python) on the local pool or "
                                     "on a Ray cluster (--ray); resumable, each result stored once")
    p.add_argument("file", help="sweep file: .toml, or .py setting SWEEP or JOBS (docs/sweeps.md)")
    p.add_argument("--dry-run", action="store_true", help="print the expanded jobs with their estimated cost and "
                   "whether each is stored, has a checkpoint or is new; run nothing")
    add_executor_options(p, jobs_help="local pool: processes in parallel (default: CPU cores / the sweep's cpus per "
                         "job on CPU, 1 on a GPU)")
    p.add_argument("--runs-dir", default="runs", help="run directories, RUNS_DIR/<preset>/<task>-<arch>-...-<key>/ "
                   "(default ./runs); on a cluster a directory every node sees at the same path, so a retried job "
                   "resumes")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print {\"jobs\": [...], \"runs\": [...]} instead of tables")
    add_log(p)
    add_db(p)
    p.set_defaults(handler=cmd_sweep, rerun_resumes=True)  # an interrupted sweep continues by running it again


def _flops(x: float) -> str:
    for unit, scale in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9)):
        if x >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x / 1e6:.2f} MFLOP"


def _dry_run(spec, jobs: list[SweepJob], args, say) -> int:
    from ..sweep.driver import job_state, stored_keys
    from ..sweep.expand import gpu_share

    stored = stored_keys(jobs, args.db)
    states = [job_state(sweep_job, stored, args.runs_dir) for sweep_job in jobs]
    members = sum(len(sweep_job.job.seeds) for sweep_job in jobs)
    if args.json:
        listed = [_job_json(sweep_job, state) for sweep_job, state in zip(jobs, states)]
        print(json.dumps({"sweep": spec.name, "jobs": listed}, indent=2))
        return 0
    say(f"sweep {spec.name!r} ({spec.path}): {len(jobs)} jobs, {members} ensemble members")
    # whole labels: cut at a fixed width, "lr 0.0005" read "lr 0.000"
    width = max([len(sweep_job.label) for sweep_job in jobs] + [3])
    header = f"{'#':>3}  {'key':16}  {'job':{width}}  {'params/member':>13}  {'steps x batch':>13}  " \
             f"{'est. compute':>12}  {'Ray: cpus gpus':>14}  state"
    print(header)
    for i, (sweep_job, state) in enumerate(zip(jobs, states), 1):
        job, ray = sweep_job.job, f"{spec.resources.cpus} {gpu_share(sweep_job, spec.resources):g}"
        print(f"{i:>3}  {sweep_job.key:16}  {sweep_job.label:{width}}  {job.params:>13,}  "
              f"{f'{job.train.steps} x {job.train.batch_size}':>13}  {_flops(sweep_job.flops):>12}  {ray:>14}  {state}")
    total = sum(sweep_job.flops for sweep_job, state in zip(jobs, states) if state != "stored")
    print(f"\nestimated compute = 6 x parameters per member x training tokens (steps x batch x sequence length x "
          f"members); to run: {_flops(total)} over {sum(state != 'stored' for state in states)} jobs "
          f"({states.count('stored')} already stored, {states.count('checkpoint')} would resume from a checkpoint)")
    return 0


def _job_json(sweep_job: SweepJob, state: str, error: str | None = None) -> dict:
    job = sweep_job.job
    out = {"key": sweep_job.key, "task": job.task_key, "task_label": job.setup.label, "arch": sweep_job.arch,
           "model": job.arch if job.name else None, "size": sweep_job.size,
           "lr": job.train.lr, "steps": job.train.steps, "seeds": list(job.seeds), "params": job.params,
           "device": job.device, "est_flops": sweep_job.flops, "state": state}
    if error:
        out["error"] = error
    return out


def _summary(jobs: list[SweepJob], records: list, states: dict[str, str]) -> str:
    by_key: dict[str, list] = {}
    for r in records:
        by_key.setdefault(r.run_id, []).append(r)
    lines = ["| task | arch | size | lr | seeds | params | steps | eval | entropy MAE (bits) per seed | KL (bits) "
             "per seed | this run |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for sweep_job in jobs:
        job, rs = sweep_job.job, sorted(by_key.get(sweep_job.key, []), key=lambda r: r.seed)
        mae = " ".join(r.shown(r.entropy_mae_bits) for r in rs) or "-"
        kl = " ".join(r.shown(r.kl_bits) for r in rs) or "-"
        primary = rs[0].primary if rs else "-"
        done = max((r.steps for r in rs), default=job.train.steps)
        steps = f"{done} of {job.train.steps}" if done != job.train.steps else f"{done}"
        lines.append(f"| {job.setup.label} | {sweep_job.arch} | {sweep_job.size or '-'} | {job.train.lr:g} | "
                     f"{list(job.seeds)} | {job.params:,} | {steps} | {primary} | {mae} | {kl} | "
                     f"{_state(states[sweep_job.key], rs)} |")
    return "\n".join(lines)


def _state(state: str, records: list) -> str:
    """'trained', and how many of its members diverged (a sweep whose members all diverged is not
    simply 'trained')."""
    bad = [r for r in records if r.diverged]
    if not bad or not state.startswith("trained"):
        return state
    every = " (every member)" if len(bad) == len(records) else f" ({len(bad)} of {len(records)} members)"
    return f"{state}; diverged{every}"


def _try_outside(jobs: list[SweepJob], path: str, say) -> None:
    """Build two members of every outside model (once per task and settings) with a trial forward
    and backward, as `bayesbench run --model` does, so a broken model fails before anything runs;
    one line each says its size and forward path."""
    from ..sweep.jobs import trial_forward

    seen = set()
    for sweep_job in jobs:
        job = sweep_job.job
        built = (job.arch, job.setup.label, json.dumps(job.model, sort_keys=True, default=str))
        if not job.name or built in seen:
            continue
        seen.add(built)
        try:
            forward = trial_forward(job)
        except ValueError as err:
            raise ValueError(f"sweep file {path}: {sweep_job.label}: {err}") from None
        say(f"outside model {sweep_job.arch} ({job.arch}) on {job.setup.label}: {job.params:,} parameters per member; "
            f"forward: {forward}")


def _executor(spec, args, jobs: list[SweepJob], ray):
    """The Ray executor (`ray`, connected) or the local pool for `jobs` (`in_process=False`: a
    worker that dies is retried)."""
    if ray is not None:
        return ray
    from ..sweep.local import local_executor

    return local_executor(jobs, workers=args.jobs, threads=spec.resources.cpus, max_retries=args.max_retries,
                          in_process=False)


def _tuned(spec, args, jobs: list[SweepJob], ray, sink):
    """A sweep with `tune`: its points tuned on the engine (`sweep.engine.tune_phases`); returns the
    final jobs and the final pass's outcome."""
    from ..sweep import engine

    outcomes = []

    def run_phase(phase: list[SweepJob]):
        outcomes.append(engine.drive(phase, _executor(spec, args, phase, ray), db=args.db, runs_dir=args.runs_dir,
                                     progress=progress(args), sink=sink, lines=progress_lines(args)))
        return outcomes[-1]

    sink(engine.SELECTING)
    jobs = engine.tune_phases(jobs, spec.tune, group=f"sweep-{spec.name}", db=args.db, run_phase=run_phase, sink=sink,
                              log=args.log, where=f"sweep file {spec.path}: tune:")
    return jobs, outcomes[-1]


def cmd_sweep(args) -> int:
    """Check the sweep file, then run it (or with --dry-run, show it); exit 1 if a job failed."""
    from ..trust import source

    with source(args.file):  # outside code it names is imported only with --trust-code
        return _cmd_sweep(args)


def _cmd_sweep(args) -> int:
    from ..sweep.expand import expand
    from ..sweep.sweep_file import load_sweep

    stream = sys.stderr if args.json else sys.stdout

    def say(message: str) -> None:
        from tqdm.auto import tqdm

        tqdm.write(message, file=stream)

    check_folder("--runs-dir", args.runs_dir)
    spec = load_sweep(args.file)
    jobs = expand(spec)  # every check that needs no cluster, before anything starts
    _try_outside(jobs, spec.path, say)  # the dry run checks what the run checks
    if args.dry_run:
        return _dry_run(spec, jobs, args, say)
    from ..sweep.request import FieldError

    try:
        jobs, ray = _placed(spec, args)
        try:
            return _drive(spec, args, jobs, ray, say)
        finally:
            if ray is not None:
                ray.close()
    except FieldError as err:
        raise ValueError(err.phrase(flag_of("sweep"))) from None


def _placed(spec, args):
    """(the sweep's jobs for where they run, the Ray executor or None)."""
    from ..sweep.engine import with_log
    from ..sweep.expand import expand
    from ..sweep.jobs import resolve_device

    if args.ray:
        from ..sweep.ray_executor import connect

        ray, place = connect(args.ray, spec.resources, args.max_retries)
        try:
            return with_log(args.log, expand(spec, device=place)), ray
        except BaseException:
            ray.close()
            raise
    return with_log(args.log, expand(spec, device=resolve_device)), None


def _drive(spec, args, jobs: list[SweepJob], ray, say) -> int:
    from ..report.leaderboard import json_runs
    from ..report.selection import select_rows
    from ..store.database import db_path
    from ..sweep import engine
    from ..sweep.events import line

    def sink(event) -> None:
        text = line(event)
        if text is not None:
            say(text)

    say(f"bayesbench sweep {spec.name!r} ({spec.path}) -> store {db_path(args.db)}, run directories under "
        f"{args.runs_dir}")
    if spec.tune is not None:  # each point at its best learning rate, chosen on held-out data
        jobs, outcome = _tuned(spec, args, jobs, ray, sink)
    else:
        outcome = engine.drive(jobs, _executor(spec, args, jobs, ray), db=args.db, runs_dir=args.runs_dir,
                               progress=progress(args), sink=sink, lines=progress_lines(args))
    states = {sweep_job.key: "skipped (stored)" for sweep_job in jobs if sweep_job.key in outcome.skipped}
    for key in outcome.trained:
        states[key] = "trained" + (f" (resumed at step {outcome.resumed[key]})" if key in outcome.resumed else "") \
            + (f", {outcome.retried[key]} retries" if key in outcome.retried else "")
    for key, why in outcome.failed.items():
        states[key] = f"FAILED: {why}"
    records = select_rows(args.db, run_ids=[sweep_job.key for sweep_job in jobs])
    if args.json:
        print(json.dumps({"sweep": spec.name, "wall_s": outcome.wall_s,
                          "jobs": [_job_json(sweep_job, states[sweep_job.key].split(" ")[0].rstrip(":,").lower(),
                                             outcome.failed.get(sweep_job.key)) for sweep_job in jobs],
                          **json_runs(records)}, indent=2))
    else:
        print(f"\nSweep {spec.name!r}: {len(outcome.trained)} trained, {len(outcome.skipped)} already stored, "
              f"{len(outcome.failed)} failed in {outcome.wall_s:.0f} s (store {db_path(args.db)}, group "
              f"sweep-{spec.name}). Entropy MAE and KL in bits on each task's primary evaluation.\n")
        print(_summary(jobs, records, states))
        print("\n`bayesbench leaderboard --all` and `bayesbench plot` read the same store.")
    if outcome.failed:
        say(f"bayesbench sweep: {len(outcome.failed)} job(s) failed; fix the cause and run the same command again "
            "(stored jobs are skipped)")
        return 1
    return 0
