"""`bayesbench run`: the main job. Train every selected architecture on every selected task of a
preset (each an ensemble of seeds), store one row per seed and print the leaderboard.

    bayesbench run --preset quick
    bayesbench run --model ./mine.py:build --name mine --tasks bijection,hmm   # your own nn.Module
"""

from __future__ import annotations

import json
import os
import time
import uuid

from .args import add_training, db_name, line_printer, positive, progress, set_threads, split_list, train_overrides
from .outside_model import add_model_options, model_jobs


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="the main job: train every selected arch on every selected task, store, print the "
                                   "leaderboard")
    add_training(p)
    p.add_argument("--tasks", nargs="+",
                   help="task keys of the preset (default: all, e.g. bijection hmm or bijection,hmm)")
    p.add_argument("--archs", nargs="+", help="architectures (default: the preset's, e.g. transformer mlp)")
    p.add_argument("--seeds", type=positive, help="ensemble members per run, seeds 0..N-1 (default: the preset's)")
    p.add_argument("--jobs", type=positive, help="training processes in parallel (default: one per CPU core on "
                   "CPU, 1 on a GPU)")
    p.add_argument("--json", action="store_true", help="print {\"runs\": [...]} instead of the table")
    add_model_options(p)
    p.set_defaults(handler=cmd_run)


def make_jobs_from_args(args, *, tasks, archs, seeds) -> list:
    """The jobs a `run` or `train` command line selects (built-in archs, or --model's)."""
    from ..sweep.jobs import make_jobs

    tasks = split_list(tasks)
    if getattr(args, "model", None):
        return model_jobs(args, tasks=tasks, seeds=seeds, say=line_printer(args))
    if getattr(args, "name", None):
        raise ValueError("--name names a --model; built-in archs keep their names")
    return make_jobs(args.preset, tasks=tasks, archs=archs, seeds=seeds, steps=args.steps, device=args.device,
                     attention=args.attention, compile=args.compile, precision=args.precision,
                     checkpoint_every=args.checkpoint_every, eval_sequences=args.eval_sequences,
                     train=train_overrides(args))


def _workers(args, jobs) -> int:
    """--jobs, or by default one process per CPU core (CPU runs) and 1 on a GPU."""
    if getattr(args, "jobs", None):
        return min(args.jobs, len(jobs))
    if any(job.device != "cpu" for job in jobs):
        return 1
    return max(1, min(os.cpu_count() or 1, len(jobs)))


def run_jobs_from_args(args, jobs, group_id: str, say) -> list[str]:
    """Announce, train, score and store `jobs`; returns their run ids."""
    from ..sweep.jobs import run_jobs

    workers = _workers(args, jobs)
    for i, job in enumerate(jobs, 1):
        say(f"[{i}/{len(jobs)}] {job.setup.label} / {job.name or job.arch}: {job.params:,} params per member, "
            f"{len(job.seeds)} seeds {list(job.seeds)} as one ensemble, {job.train.steps} steps x batch "
            f"{job.train.batch_size}, lr {job.train.lr:g} ({job.train.schedule}) on {job.device}"
            + (f"; position table sized {job.max_len} for the longest eval (K={max(job.setup.eval_lengths)})"
               if job.setup.eval_lengths else ""))
    if workers > 1:
        say(f"running {len(jobs)} jobs in {workers} processes (one per core, {args.threads or 'cores/processes'} "
            "threads each; --jobs 1 runs them one by one)")

    def done(job, records):
        r0 = records[0]
        maes = " ".join(f"{r.entropy_mae_bits:.4f}" for r in records)
        say(f"done: {job.setup.label} / {job.name or job.arch} in {r0.wall_s:.1f} s ({r0.steps_per_s:.1f} steps/s); "
            f"entropy MAE (bits) per seed: {maes}")
        for r in records:
            if r.status != "ok":
                say(f"      WARNING: {r.status}")

    results = run_jobs(jobs, workers=workers, threads=args.threads, on_done=done, db=args.db, group_id=group_id,
                       run_root=args.runs_dir, resume=args.resume, progress=progress(args))
    return [records[0].run_id for records in results]


def cmd_run(args) -> int:
    from ..store.leaderboard import headline, json_runs, markdown, select_rows

    set_threads(args)
    say = line_printer(args)
    start = time.perf_counter()
    jobs = make_jobs_from_args(args, tasks=args.tasks, archs=args.archs,
                               seeds=list(range(args.seeds)) if args.seeds else None)
    group_id = uuid.uuid4().hex[:12]
    say(f"bayesbench run --preset {args.preset}: {len(jobs)} training jobs (group {group_id})")
    run_jobs_from_args(args, jobs, group_id, say)
    records = select_rows(args.db, group_id=group_id)
    if args.model and not args.json:  # beside the built-in archs stored for the same tasks
        records = [r for r in select_rows(args.db) if r.task_label in {job.setup.label for job in jobs}]
    if args.json:
        print(json.dumps(json_runs(records), indent=2))
        return 0
    scope = "every stored run of these tasks" if args.model else "this run"
    print(f"\nLeaderboard (preset {args.preset}, {scope}; store: {db_name(args.db)})\n")
    print(markdown(records))
    print()
    for line in headline(records):
        print(line)
    print(f"\nTotal wall time {time.perf_counter() - start:.0f} s. `bayesbench plot` draws the per-position curves.")
    return 0
