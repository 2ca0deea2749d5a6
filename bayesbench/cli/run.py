"""`bayesbench run`: the main job. Train every selected architecture on every selected task of a
preset (each an ensemble of seeds), store one row per seed and print the leaderboard.

    bayesbench run --preset quick
    bayesbench run --model ./mine.py:build --name mine --tasks bijection,hmm   # your own nn.Module

The preset and the selections expand into sweep jobs, run by the sweep engine (`cli/engine.py`):
running the same command again skips every job whose rows are stored (and prints the
leaderboard), and a stopped run continues from its checkpoints.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable

from .args import (
    add_training,
    check_folder,
    db_name,
    line_printer,
    positive,
    progress,
    progress_lines,
    split_list,
    task_and_model_args,
    train_overrides,
    with_log,
)
from .engine import DEFAULT_THREADS, add_executor_options, drive
from .errors import CommandFailed
from .model_option import add_model_options, model_jobs
from .replay import add_config_options, check_choice, check_jobs, compare, config_text, start_replay
from .settings import merge_file_tables


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="the main job: train every selected arch on every selected task, store, print the "
                                   "leaderboard")
    add_training(p)
    p.add_argument("--tasks", nargs="+",
                   help="task keys of the preset (default: all, e.g. bijection hmm or bijection,hmm)")
    p.add_argument("--archs", nargs="+", help="architectures (default: the preset's, e.g. transformer mlp)")
    p.add_argument("--seeds", type=positive, help="ensemble members per run, seeds 0..N-1 (default: the preset's)")
    add_executor_options(p, jobs_help="training processes in parallel (default: on CPU one per core at --threads 1, "
                         "cores / threads in general; 1 on a GPU); 1 trains the jobs one by one in this process")
    p.add_argument("--json", action="store_true", help="print {\"runs\": [...]} instead of the table")
    add_model_options(p)
    add_config_options(p)
    from .tune import add_tune_options

    add_tune_options(p)
    p.set_defaults(handler=cmd_run, rerun_resumes=True)  # a stopped run continues by running it again


def preset_jobs(args, *, tasks, archs, seeds, place: Callable[[str], str] | None = None) -> list:
    """The sweep jobs a `run` or `train` command line selects (built-in archs, or --model's),
    stored with group `run-<preset>`: one point per selected (task, arch), each resolved as a
    sweep file's is (`sweep.jobs.make_jobs`)."""
    from ..sweep.expand import SweepJob
    from ..sweep.jobs import make_jobs

    tasks = split_list(tasks)
    threads = getattr(args, "threads", None) or DEFAULT_THREADS
    if getattr(args, "model", None):
        jobs = model_jobs(args, tasks=tasks, seeds=seeds, say=line_printer(args), place=place, threads=threads)
    elif getattr(args, "name", None):
        raise ValueError("--name names a --model; built-in archs keep their names")
    else:
        jobs = make_jobs(args.preset, tasks=tasks, archs=archs, seeds=seeds, steps=args.steps, device=args.device,
                         attention=args.attention, compile=args.compile, precision=args.precision,
                         checkpoint_every=args.checkpoint_every, eval_sequences=args.eval_sequences,
                         train=train_overrides(args), place=place, threads=threads, **task_and_model_args(args))
    return with_log(args, [SweepJob.of(job, group_id=f"run-{args.preset}") for job in jobs])


def jobs_of(args, place: Callable[[str], str] | None = None) -> list:
    """The sweep jobs of a parsed `bayesbench run` command line."""
    return preset_jobs(args, tasks=args.tasks, archs=args.archs, seeds=seed_selection(args.seeds), place=place)


def seed_selection(seeds) -> list[int] | None:
    """`--seeds N` (seeds 0..N-1), or a configuration's list of seeds (`--config`, `--replay`)."""
    if seeds is None:
        return None
    return list(seeds) if isinstance(seeds, (list, tuple)) else list(range(seeds))


def _announce(jobs: list, say) -> None:
    from ..sweep.expand import seeds_text

    for i, sweep_job in enumerate(jobs, 1):
        job = sweep_job.job
        say(f"[{i}/{len(jobs)}] {job.setup.label} / {sweep_job.arch}: {job.params:,} params per member, "
            f"{len(job.seeds)} seeds {seeds_text(job.seeds)} as one ensemble, {job.train.steps} steps x batch "
            f"{job.train.batch_size}, {_rates(job.train)} ({job.train.schedule}) on {job.device}"
            + (f"; position table sized {job.max_len} for the longest eval (K={max(job.setup.eval_lengths)})"
               if job.setup.eval_lengths else ""))


def _rates(train) -> str:
    """'lr 0.0005', or a tuning grid's members' rates: 'lr 0.0001 .. 0.01 per member (5 rates)'."""
    rates = train.member_lrs
    if rates is None:
        return f"lr {train.lr:g}"
    return f"lr {min(rates):g} .. {max(rates):g} per member ({len(set(rates))} rates)"


def run_preset(args, select: Callable, say) -> list:
    """Expand the command line into jobs (`select(place)`), run them on the engine and return
    them; a job that failed ends the command with its own error once the others are stored."""
    from ..sweep.local import local_executor
    from ..sweep.ray_executor import on_ray
    from ..sweep.sweep_file import Resources

    check_folder("--runs-dir", args.runs_dir)
    threads = args.threads or DEFAULT_THREADS
    if getattr(args, "ray", None):
        executor, jobs = on_ray(args.ray, Resources(cpus=threads), args.max_retries, select)
    else:
        jobs = select(None)
        executor = local_executor(jobs, workers=getattr(args, "jobs", None), threads=threads,
                                  max_retries=getattr(args, "max_retries", 2), in_process=True)
    _announce(jobs, say)
    outcome = drive(jobs, executor, db=args.db, runs_dir=args.runs_dir, progress=progress(args), say=say,
                    lines=progress_lines(args))
    for key in outcome.failed:  # the job's own error, as a one-job command would raise it
        if key in outcome.errors:
            raise outcome.errors[key]
    if outcome.failed:
        labels = {sweep_job.key: sweep_job.label for sweep_job in jobs}
        first = next(iter(outcome.failed))
        raise CommandFailed(f"{len(outcome.failed)} job(s) failed ({labels[first]}: {outcome.failed[first]}); the "
                            "others are stored: fix the cause and run the same command again")
    return jobs


def _checked(replay, jobs: list, say, args) -> list:
    """The jobs, checked against the replayed run's identity when replaying (`cli/replay.py`)."""
    return jobs if replay is None else check_jobs(replay, jobs, say, args.db, args.runs_dir)


def _search_text(args, jobs: list) -> str:
    """With --tune: each job's learning-rate search as TOML comments (the jobs listed above are
    what the searches start from; their rate is the one a search chooses), checked as `run --tune`
    checks it, so a bad --tune-args fails here as it would when running. Empty without --tune."""
    from .tune import tune_given

    given = tune_given(args)
    if given is None:
        return ""
    from ..store.tuning import rates_text
    from ..sweep.tune import selection_jobs, spec_for

    lines = ["# --tune: each job above trains at the rate its search chooses, not at the lr shown:"]
    for sweep_job in jobs:
        spec = spec_for(sweep_job.job, given)
        lines.append(f"#   {sweep_job.job.setup.label} / {sweep_job.job.arch}: {len(spec.lrs)} rates "
                     f"{rates_text(spec.lrs)}, {spec.selection_seeds} selection seed(s) each, chosen by the "
                     f"{spec.rule} {spec.metric} on {spec.selection_sequences} held-out sequences "
                     f"({len(selection_jobs(sweep_job.job, spec))} selection job(s)), then re-trained on the "
                     "job's seeds")
    return "\n".join(lines) + "\n"


def cmd_run(args) -> int:
    from ..trust import source

    with source(getattr(args, "replay", None) or getattr(args, "config", None)):  # the file naming any outside code
        return _cmd_run(args)


def _cmd_run(args) -> int:
    from ..report.headline import headline
    from ..report.leaderboard import json_runs, markdown
    from ..report.selection import select_rows
    say = line_printer(args)
    merge_file_tables(args)
    replay = start_replay(args) if getattr(args, "replay", None) is not None else None
    if getattr(args, "print_config", False):
        notes = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731  (stdout is the TOML)
        with contextlib.redirect_stdout(sys.stderr):  # notes of building the jobs (an outside model's capacity)
            jobs = _checked(replay, jobs_of(args), notes, args)
        search = _search_text(args, jobs)  # checked before anything is printed
        print(config_text(args, jobs, replay), end="")
        print(search, end="")
        return 0
    start = time.perf_counter()
    say(f"bayesbench run --preset {args.preset} -> store {db_name(args.db)}, run directories under "
        f"{args.runs_dir}/{args.preset}/")
    from .tune import run_tuned, tune_given

    if tune_given(args) is not None:  # each (task, arch) at its best rate, chosen on held-out data
        jobs = run_tuned(args, lambda place: _checked(replay, jobs_of(args, place), say, args), say, run_preset)
        if replay is not None:
            check_choice(replay, jobs, say)
    else:
        jobs = run_preset(args, lambda place: _checked(replay, jobs_of(args, place), say, args), say)
    records = select_rows(args.db, run_ids=[sweep_job.key for sweep_job in jobs])
    if replay is not None:
        for line in compare(replay, records):
            say(line)
    if args.model and not args.json:  # beside the built-in archs stored for the same tasks
        records = [r for r in select_rows(args.db) if r.task_label in {sweep_job.job.setup.label for sweep_job in jobs}]
    if args.json:
        print(json.dumps(json_runs(records), indent=2))
        return 0
    scope = "every stored run of these tasks" if args.model else "this run's jobs"
    print(f"\nLeaderboard (preset {args.preset}, {scope}; store: {db_name(args.db)})\n")
    print(markdown(records))
    print()
    for line in headline(records):
        print(line)
    print(f"\nTotal wall time {time.perf_counter() - start:.0f} s. `bayesbench plot` draws the per-position curves.")
    return 0
