"""Where `bayesbench run` and `train` put their jobs' run directories, for tests that open one
by hand (import as `from rundirs import run_dirs`): RUNS_DIR/<preset>/<task>-<arch>-lr<lr>-
s<seeds>-<key>/ (`bayesbench.sweep.expand.SweepJob.run_dir`), known before anything runs."""

from __future__ import annotations


def run_dirs(argv: list[str]) -> list[str]:
    """The run directories of the `run` or `train` command line `argv`, in job order."""
    from bayesbench.cli import build_parser, run, train

    args = build_parser().parse_args(argv)
    return [sj.run_dir(args.runs_dir) for sj in {"run": run, "train": train}[args.command].jobs_of(args)]
