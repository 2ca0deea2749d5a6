"""The `bayesbench` command: train models on wind tunnels, score them, keep and show results.

    bayesbench run --preset quick            # train every architecture on every task, print the leaderboard
    bayesbench train --task bijection --arch transformer --preset quick --seeds 0,1,2 --steps 500
    bayesbench eval runs/quick/bijection-transformer-s0-1-2
    bayesbench run --model ./mine.py:build --name mine --tasks bijection,hmm   # your own nn.Module
    bayesbench score --model ./mine.py:build --checkpoint mine.pt --task bijection
    bayesbench leaderboard --format md       # or csv, json
    bayesbench plot                          # PNGs: entropy per position vs Bayes, error curves
    bayesbench models                        # architectures and their parameter counts
    bayesbench tunnels                       # the exact posterior entropy curve of every tunnel
    bayesbench profile --preset quick        # routing-law dynamics of attention while it learns (docs/dynamics.md)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid

from ..checks import positive_int
from .errors import add_debug_flag, no_rows_message, run_command
from .own_model import add_model_options, add_score_parser, cmd_score, model_jobs, split_list
from ..store.leaderboard import FORMATS, METRICS

EPILOG = """Results go to an SQLite store (default ./results/bayesbench.sqlite; --db or $BAYESBENCH_DB).
Metrics are in bits over the scored positions of a fixed evaluation set: entropy MAE = mean |H(model) - H(Bayes)|,
positional entropy MAE = mean over positions of |mean H(model) - mean H(Bayes)| (the authors' bijection metric),
KL = mean KL(Bayes || model) (docs/science.md#metrics). Run `bayesbench COMMAND --help` for each command's options."""


def _seed_list(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds must be comma-separated integers like 0,1,2, got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"--seeds must list distinct non-negative integers, got {text!r}")
    return seeds


def _positive(text: str) -> int:
    """argparse type: the text of a positive integer (argparse puts the option's name in front)."""
    try:
        return positive_int("value", int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", help="results store (default: $BAYESBENCH_DB or ./results/bayesbench.sqlite)")


def _training(p: argparse.ArgumentParser) -> None:
    from ..presets import PRESETS

    p.add_argument("--preset", default="quick", choices=sorted(PRESETS), help="sizes, steps and evaluation (default quick)")
    p.add_argument("--steps", type=_positive, help="override the preset's number of training steps")
    p.add_argument("--device", help="cpu, cuda, cuda:1 or auto (default: the preset's; quick=cpu, paper=auto)")
    p.add_argument("--attention", choices=("sdpa", "eager", "triton"), help="transformer attention backend (default sdpa)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--precision", choices=("auto", "fp32", "tf32", "bf16"),
                   help="training matmul precision: auto (TF32 on CUDA, float32 on CPU; the default), fp32, tf32, "
                        "or bf16 (autocast forward); evaluation always runs in float32")
    p.add_argument("--runs-dir", default="runs", help="where checkpoints go (default ./runs)")
    p.add_argument("--resume", action="store_true", help="continue from the run directory's checkpoint if there is one")
    p.add_argument("--checkpoint-every", type=_positive, help="checkpoint every N steps (default: the preset's; always at the end)")
    p.add_argument("--eval-sequences", type=_positive, help="evaluation set size (default: the preset's, 4096)")
    p.add_argument("--threads", type=_positive, help="torch CPU threads per process (default: cores / processes)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _common(p)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bayesbench",
        description="Does your sequence model compute the exact Bayes posterior? Train architectures on "
                    "Bayesian wind tunnels and score them against the exact posterior.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="the main job: train every selected arch on every selected task, store, print the leaderboard")
    _training(run)
    run.add_argument("--tasks", nargs="+", help="task keys of the preset (default: all, e.g. bijection hmm or bijection,hmm)")
    run.add_argument("--archs", nargs="+", help="architectures (default: the preset's, e.g. transformer mlp)")
    run.add_argument("--seeds", type=_positive, help="ensemble members per run, seeds 0..N-1 (default: the preset's)")
    run.add_argument("--jobs", type=_positive, help="training processes in parallel (default: one per CPU core on "
                     "CPU, 1 on a GPU)")
    run.add_argument("--json", action="store_true", help="print {\"runs\": [...]} instead of the table")
    add_model_options(run)

    tr = sub.add_parser("train", help="train one arch on one task (an ensemble of seeds), evaluate and store")
    _training(tr)
    tr.add_argument("--task", required=True, help="task key of the preset (quick: bijection, hmm, sticky)")
    tr.add_argument("--arch", help="architecture (see `bayesbench models`); or --model for your own")
    tr.add_argument("--seeds", type=_seed_list, help="comma-separated seeds, one ensemble member each (default: 0..N-1 of the preset)")
    tr.add_argument("--json", action="store_true", help="print {\"runs\": [...]} (one record per seed)")
    add_model_options(tr)

    ev = sub.add_parser("eval", help="re-evaluate a trained run from its checkpoint and update the store")
    ev.add_argument("run_dir", nargs="+", help="run directories (with checkpoint.pt) or checkpoint files")
    ev.add_argument("--device", default="cpu", help="device to evaluate on (default cpu)")
    ev.add_argument("--eval-sequences", type=_positive, help="evaluation set size (default: as the run was configured)")
    ev.add_argument("--json", action="store_true", help="print {\"runs\": [...]}")
    _common(ev)

    lb = sub.add_parser("leaderboard", help="show stored results (every stored seed of each task, arch and config)")
    lb.add_argument("--task", help="only this task (name like hmm, or label like 'hmm S=5 K=20')")
    lb.add_argument("--arch", help="only this architecture")
    lb.add_argument("--latest", action="store_true", help="only the newest run of each task and arch")
    lb.add_argument("--all", action="store_true", help="one row per stored run (no pooling of seeds across runs)")
    lb.add_argument("--format", default="md", choices=FORMATS, help="output format (default md)")
    lb.add_argument("--metric", default="entropy_mae", choices=tuple(METRICS),
                    help="rank by this metric (default entropy_mae; see docs/science.md, Metrics)")
    lb.add_argument("--json", action="store_true", help="same as --format json")
    _common(lb)

    pl = sub.add_parser("plot", help="PNG figures: model vs Bayes entropy per position, error curves per arch")
    pl.add_argument("--task", help="only this task")
    pl.add_argument("--out", default=os.path.join("results", "plots"), help="output folder (default results/plots)")
    pl.add_argument("--dynamics", metavar="STUDY", help="draw a dynamics study's curves instead (e.g. a profile's id)")
    _common(pl)

    from ..dynamics.profile.study import add_parser as add_profile
    add_profile(sub, _seed_list, _positive, _common)

    md = sub.add_parser("models", help="list the architectures and their parameter counts at a preset's sizes")
    md.add_argument("--preset", default="paper", help="preset whose sizes to count (default paper)")

    add_score_parser(sub)
    from .sweep import add_sweep_parser
    add_sweep_parser(sub)

    tunnels = sub.add_parser("tunnels", help="sample every wind tunnel and print its exact posterior entropy curve")
    tunnels.add_argument("--batch-size", type=_positive, default=2048, help="sequences per tunnel (default 2048)")
    tunnels.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")

    from ..dynamics.emsgd.study import add_parser as add_emsgd
    add_emsgd(sub)
    from ..dynamics.geometry.study import add_parser as add_geometry
    add_geometry(sub)
    add_debug_flag(parser, sub)
    return parser


# ---------------------------------------------------------------- commands

def _setup_torch(args) -> None:
    import torch

    if getattr(args, "threads", None):
        torch.set_num_threads(args.threads)


def _progress(args) -> bool:
    return not args.no_progress and sys.stderr.isatty()


def _jobs(args, *, tasks, archs, seeds):
    from ..sweep.jobs import make_jobs

    tasks = split_list(tasks)
    if getattr(args, "model", None):
        return model_jobs(args, tasks=tasks, seeds=seeds, say=_line_printer(args))
    if getattr(args, "name", None):
        raise ValueError("--name names a --model; built-in archs keep their names")
    return make_jobs(args.preset, tasks=tasks, archs=archs, seeds=seeds, steps=args.steps, device=args.device,
                     attention=args.attention, compile=args.compile, precision=args.precision,
                     checkpoint_every=args.checkpoint_every, eval_sequences=args.eval_sequences)


def _workers(args, jobs) -> int:
    """--jobs, or by default one process per CPU core (CPU runs) and 1 on a GPU."""
    if getattr(args, "jobs", None):
        return min(args.jobs, len(jobs))
    if any(job.device != "cpu" for job in jobs):
        return 1
    return max(1, min(os.cpu_count() or 1, len(jobs)))


def _run_jobs(args, jobs, group_id: str, say) -> list[str]:
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
                       run_root=args.runs_dir, resume=args.resume, progress=_progress(args))
    return [records[0].run_id for records in results]


def _line_printer(args):
    """Progress lines: to stderr when stdout carries --json, else to stdout."""
    stream = sys.stderr if args.json else sys.stdout
    return lambda m: print(m, file=stream, flush=True)


def cmd_run(args) -> int:
    from ..store.leaderboard import headline, json_runs, markdown, select_rows

    _setup_torch(args)
    say = _line_printer(args)
    start = time.perf_counter()
    jobs = _jobs(args, tasks=args.tasks, archs=args.archs,
                 seeds=list(range(args.seeds)) if args.seeds else None)
    group_id = uuid.uuid4().hex[:12]
    say(f"bayesbench run --preset {args.preset}: {len(jobs)} training jobs (group {group_id})")
    _run_jobs(args, jobs, group_id, say)
    records = select_rows(args.db, group_id=group_id)
    if args.model and not args.json:  # beside the built-in archs stored for the same tasks
        records = [r for r in select_rows(args.db) if r.task_label in {job.setup.label for job in jobs}]
    if args.json:
        print(json.dumps(json_runs(records), indent=2))
        return 0
    scope = "every stored run of these tasks" if args.model else "this run"
    print(f"\nLeaderboard (preset {args.preset}, {scope}; store: {_db_name(args.db)})\n")
    print(markdown(records))
    print()
    for line in headline(records):
        print(line)
    print(f"\nTotal wall time {time.perf_counter() - start:.0f} s. `bayesbench plot` draws the per-position curves.")
    return 0


def cmd_train(args) -> int:
    from ..store.leaderboard import json_runs, markdown, select_rows
    from ..store.database import read_records

    _setup_torch(args)
    say = _line_printer(args)
    if (args.arch is None) == (args.model is None):
        raise ValueError("give exactly one of --arch (a built-in architecture) and --model (your own)")
    jobs = _jobs(args, tasks=[args.task], archs=[args.arch] if args.arch else None, seeds=args.seeds)
    run_ids = _run_jobs(args, jobs, uuid.uuid4().hex[:12], say)
    if args.json:
        print(json.dumps(json_runs(read_records(args.db, where="run_id = ?", params=(run_ids[0],))), indent=2))
    else:
        print(markdown(select_rows(args.db, task=jobs[0].setup.label, arch=jobs[0].name or args.arch)))
    return 0


def cmd_eval(args) -> int:
    from ..store.leaderboard import json_runs, markdown
    from ..store.database import prepare_store, read_records
    from ..scoring.rows import record
    from ..training.trainer import CHECKPOINT_NAME, load_result

    prepare_store(args.db)
    results = []
    for path in args.run_dir:  # every checkpoint read (and any damage named) before anything is stored
        ckpt = os.path.join(path, CHECKPOINT_NAME) if os.path.isdir(path) else path
        if not os.path.exists(ckpt):
            raise ValueError(f"no checkpoint at {ckpt}")
        result = load_result(ckpt, args.device)
        if args.eval_sequences:
            result.meta["eval_sequences"] = args.eval_sequences
        results.append(result)
    run_ids = []
    for result in results:
        records = record(result, db=args.db, device=args.device)
        run_ids.append(records[0].run_id)
    records = read_records(args.db, where=f"run_id IN ({', '.join('?' * len(run_ids))})", params=tuple(run_ids))
    print(json.dumps(json_runs(records), indent=2) if args.json else markdown(records))
    return 0


def cmd_leaderboard(args) -> int:
    from ..store.leaderboard import render, select_rows

    if args.latest and args.all:
        raise ValueError("give at most one of --latest and --all")
    records = select_rows(args.db, task=args.task, arch=args.arch, latest=args.latest)
    if not records and (args.task or args.arch):
        raise ValueError(no_rows_message(args.db, task=args.task, arch=args.arch))
    print(render(records, "json" if args.json else args.format, args.metric, per_run=args.all))
    return 0


def cmd_plot(args) -> int:
    from ..store.plots import plot

    if args.dynamics:
        from ..dynamics.profile.study import cmd_plot_dynamics
        for p in cmd_plot_dynamics(args.dynamics, args.db, args.out):
            print(p)
        return 0
    paths = plot(args.db, args.out, task=args.task)
    if not paths and args.task:
        raise ValueError(no_rows_message(args.db, task=args.task))
    if not paths:
        print("no stored runs to plot: run `bayesbench run --preset quick` first")
    for p in paths:
        print(p)
    return 0


def cmd_models(args) -> int:
    from ..models import list_models
    from ..presets import get_preset
    from ..sweep.jobs import make_jobs

    print("Architectures:")
    for name, desc in list_models().items():
        print(f"  {name:17s} {desc}")

    preset = get_preset(args.preset)
    jobs = [job for key, setup in preset.tasks.items()
            for job in make_jobs(args.preset, tasks=[key], archs=[a for a in list_models() if a in setup.models],
                                 device="cpu")]
    print(f"\nParameters per ensemble member at preset {args.preset!r} (every tensor counted once: embeddings, "
          "position table sized for the longest eval length, biases, LayerNorms, head):")
    for job in jobs:
        print(f"  {job.setup.label:16s} {job.arch:17s} {job.params:>12,}  {job.model}")
    return 0


def _db_name(db: str | None) -> str:
    from ..store.database import db_path

    return db_path(db)


def cmd_tunnels(args) -> int:
    from .tunnels import print_tunnel_curves

    print_tunnel_curves(args.batch_size, args.seed)
    return 0


def _cmd_sweep(args) -> int:
    from .sweep import cmd_sweep

    return cmd_sweep(args)


def main(argv: list[str] | None = None) -> int:
    """Run a command; a failure is one line on stderr and a non-zero exit (`cli_errors`).
    Without `argv` (the program itself) an interrupted command exits at once."""
    program, argv = argv is None, sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    commands = {"run": cmd_run, "train": cmd_train, "eval": cmd_eval, "leaderboard": cmd_leaderboard,
                "plot": cmd_plot, "models": cmd_models, "tunnels": cmd_tunnels, "score": cmd_score}
    from ..dynamics.profile.study import cmd_profile
    commands["profile"] = cmd_profile
    from ..dynamics.emsgd.study import cmd_emsgd
    from ..dynamics.geometry.study import cmd_geometry
    commands["emsgd"], commands["geometry"] = cmd_emsgd, cmd_geometry
    commands["sweep"] = _cmd_sweep
    return run_command(commands[args.command], args, argv, exit_now=program)

