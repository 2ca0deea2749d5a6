"""`bayesbench run`: the main job. Train every selected architecture on every selected task of a
preset (each an ensemble of seeds), store one row per seed and print the leaderboard.

    bayesbench run --preset quick
    bayesbench run --model ./mine.py:build --name mine --tasks bijection,hmm   # your own nn.Module

The command line becomes a `RunRequest` (`request_of`), run by the engine (`sweep/engine.py`):
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
    as_dict,
    db_name,
    event_printer,
    line_printer,
    positive,
    progress,
    progress_lines,
    split_list,
)
from .engine import add_executor_options
from .model_option import add_model_options
from .replay import add_config_options, config_text, start_replay
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


def request_of(args, replay=None):
    """The `RunRequest` of a parsed `run` or `train` command line (`sweep/request.py`); `replay`:
    the stored run a `--replay` runs again."""
    from ..sweep.request import RunRequest

    train = args.command == "train"
    tune_args = as_dict("--tune-args", getattr(args, "tune_args", None))
    tuning = dict(tune_args) if getattr(args, "tune", False) or tune_args else None
    return RunRequest(
        preset=args.preset, tasks=_tuple([args.task] if train else split_list(args.tasks)),
        archs=_tuple([args.arch] if train and args.arch else None if train else args.archs),
        seeds=_tuple(seed_selection(args.seeds)), steps=args.steps,
        train_args=as_dict("--train-args", args.train_args), task_args=as_dict("--task-args", args.task_args),
        model_args=as_dict("--model-args", args.model_args), until=args.until, until_metric=args.until_metric,
        curve_every=args.curve_every, curve_sequences=args.curve_sequences, no_curves=args.no_curves, tuning=tuning,
        db=args.db, runs_dir=args.runs_dir, jobs=getattr(args, "jobs", None), ray=getattr(args, "ray", None),
        max_retries=getattr(args, "max_retries", 2), threads=args.threads, device=args.device,
        attention=args.attention, compile=args.compile, precision=args.precision,
        checkpoint_every=args.checkpoint_every, eval_sequences=args.eval_sequences, model=args.model, name=args.name,
        log=args.log, progress=progress(args), lines=progress_lines(args), replay=replay, command=args.command)


def _tuple(values) -> tuple | None:
    return None if values is None else tuple(values)


def jobs_of(args, place: Callable[[str], str] | None = None) -> list:
    """The sweep jobs of a parsed `bayesbench run` or `train` command line (untuned)."""
    from ..sweep.engine import plan

    return plan(request_of(args), place, event_printer(args))


def seed_selection(seeds) -> list[int] | None:
    """`--seeds N` (seeds 0..N-1), or a configuration's list of seeds (`--config`, `--replay`)."""
    if seeds is None:
        return None
    return list(seeds) if isinstance(seeds, (list, tuple)) else list(range(seeds))


def _search_text(request, jobs: list) -> str:
    """With --tune: each job's learning-rate search as TOML comments (the jobs listed above are
    what the searches start from; their rate is the one a search chooses), checked as `run --tune`
    checks it, so a bad --tune-args fails here as it would when running. Empty without --tune."""
    if request.tuning is None:
        return ""
    from ..store.tuning import rates_text
    from ..sweep.engine import searches
    from ..sweep.tune import selection_jobs

    lines = ["# --tune: each job above trains at the rate its search chooses, not at the lr shown:"]
    for sweep_job, spec in searches(jobs, request.tuning):
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
    from ..sweep import engine
    from ..sweep.events import line
    from ..sweep.replay import compare

    say = line_printer(args)
    merge_file_tables(args)
    replay = start_replay(args) if getattr(args, "replay", None) is not None else None
    request = request_of(args, replay)
    if getattr(args, "print_config", False):
        def notes(event) -> None:  # stdout is the TOML: notes of building the jobs (an outside model's capacity)
            text = line(event)
            if text is not None:
                print(text, file=sys.stderr, flush=True)

        with contextlib.redirect_stdout(sys.stderr):
            jobs = engine.plan(request, None, notes)
        search = _search_text(request, jobs)  # checked before anything is printed
        print(config_text(args, jobs, replay), end="")
        print(search, end="")
        return 0
    start = time.perf_counter()
    say(f"bayesbench run --preset {args.preset} -> store {db_name(args.db)}, run directories under "
        f"{args.runs_dir}/{args.preset}/")
    jobs = list(engine.run(request, event_printer(args)).jobs)
    records = select_rows(args.db, run_ids=[sweep_job.key for sweep_job in jobs])
    if replay is not None:
        for text in compare(replay, records):
            say(text)
    if args.model and not args.json:  # beside the built-in archs stored for the same tasks
        records = [r for r in select_rows(args.db) if r.task_label in {sweep_job.job.setup.label for sweep_job in jobs}]
    if args.json:
        print(json.dumps(json_runs(records), indent=2))
        return 0
    scope = "every stored run of these tasks" if args.model else "this run's jobs"
    print(f"\nLeaderboard (preset {args.preset}, {scope}; store: {db_name(args.db)})\n")
    print(markdown(records))
    print()
    for text in headline(records):
        print(text)
    print(f"\nTotal wall time {time.perf_counter() - start:.0f} s. `bayesbench plot` draws the per-position curves.")
    return 0
