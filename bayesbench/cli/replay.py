"""Configurations that replay: `bayesbench run --config FILE`, `--replay RUN`, `--print-config`.

    bayesbench run --tasks bijection --archs mlp --steps 20 --print-config > tiny.toml
    bayesbench run --config tiny.toml                       # the same jobs, the same keys
    bayesbench run --replay runs/quick/bijection-mlp-lr0.0005-s0-<key>/run.json --db again.sqlite

`--replay` rebuilds the stored run's settings from its run.json (`settings.replay_settings`),
checks before anything runs that they resolve to the run's identity (`bayesbench.identity`),
says where the code or the package differs from the run's, runs it, and compares every number
of every seed with the stored ones. A store that already holds the run's key (the same
configuration and code) gives its stored rows without training: give another `--db` and
`--runs-dir` to train it again.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .settings import (
    ConfigAction,
    checked,
    command_parser,
    given,
    read_run_file,
    replay_settings,
    to_toml,
)

if TYPE_CHECKING:
    from ..sweep.replay import Replay


def add_config_options(p: argparse.ArgumentParser) -> None:
    """--config, --replay and --print-config (`bayesbench run`)."""
    p.add_argument("--config", action=ConfigAction, metavar="FILE",
                   help="read settings from a TOML file: the options' names as keys (eval_sequences = 64), tables "
                        "for train_args, task_args, model_args, tune_args; flags after it override it "
                        "(docs/cli.md#configuration-files)")
    p.add_argument("--replay", metavar="RUN", help="run again exactly what a stored run ran: its run.json (or run "
                   "directory); says where the code differs and compares every number with the stored ones")
    p.add_argument("--print-config", action="store_true",
                   help="print the resolved settings as TOML that --config reads, and the jobs they make, without "
                        "running")


def start_replay(args: argparse.Namespace) -> Replay:
    """Set `args` to the stored run's settings (`settings.replay_settings`). Only settings that
    change no number may be given beside --replay (--db, --runs-dir, --jobs, ...)."""
    if getattr(args, "config", None):
        raise ValueError("give one of --config and --replay: --replay runs the stored run's own settings")
    parser = command_parser("run")
    changes = given(args, parser, placement=False)
    if changes:
        flag = "--" + next(iter(changes)).replace("_", "-")
        raise ValueError(f"--replay runs exactly what the stored run ran, and {flag} would change it; for a variant, "
                         f"write its settings (--replay {args.replay} --print-config > run.toml), edit them and run "
                         "--config run.toml")
    from ..sweep.replay import Replay

    doc = read_run_file(args.replay)
    settings = replay_settings(doc, args.replay)
    for dest, value in checked(parser, settings, lambda key: f"--replay {args.replay}: {key}",
                               f"--replay {args.replay}").items():
        setattr(args, dest, value)
    return Replay(args.replay, doc)


def config_text(args: argparse.Namespace, jobs: list, replay: Replay | None = None) -> str:
    """--print-config: the command's settings as TOML (`settings.to_toml`; the preset always, every
    other setting where it is not the default) and, as comments, the jobs they make."""
    from ..running.provenance import describe
    from ..sweep.expand import seeds_text

    settings = {"preset": args.preset, **given(args, command_parser("run"))}
    settings = {k: v for k, v in settings.items() if k not in {"replay"}}
    head = ["bayesbench run settings: `bayesbench run --config THIS_FILE` runs them (docs/cli.md#configuration-files)",
            f"printed by {describe()}"]
    if replay is not None:
        head.append(f"the settings of {replay.path} (run {replay.doc.get('run_id')})")
    lines = ["", f"The jobs they make ({len(jobs)}; key = the run's identity and seeds, docs/results.md):"]
    for sweep_job in jobs:
        job = sweep_job.job
        lines.append(f"  {job.setup.label} / {sweep_job.arch}: key {sweep_job.key}, {job.params:,} params per member, "
                     f"seeds {seeds_text(job.seeds)}, {job.train.steps} steps x batch {job.train.batch_size}, "
                     f"lr {job.train.lr:g} ({job.train.schedule}), on {job.device}")
    return to_toml(settings, head) + "\n" + "\n".join(f"# {line}" if line else "#" for line in lines) + "\n"

