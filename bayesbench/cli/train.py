"""`bayesbench train`: one architecture on one task (an ensemble of seeds), evaluated and stored.

    bayesbench train --task bijection --arch transformer --preset quick --seeds 0,1,2 --steps 500
    bayesbench train --model ./mine.py:build --task hmm --seeds 0,1,2

A one-job `bayesbench run`, on the same engine (`cli/engine.py`), in this process: a job already
stored is not trained again, a stopped one continues from its checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from .args import add_training, line_printer, seed_list
from .model_option import add_model_options
from .run import preset_jobs, run_preset


def add_parser(sub) -> None:
    p = sub.add_parser("train", help="train one arch on one task (an ensemble of seeds), evaluate and store")
    add_training(p)
    p.add_argument("--task", required=True, help="task key of the preset (quick: bijection, hmm, sticky), or your "
                   "own tunnel: 'pkg.mod:build' or './file.py:build' (docs/tasks.md)")
    p.add_argument("--arch", help="architecture (see `bayesbench models`); or --model for your own")
    p.add_argument("--seeds", type=seed_list, help="comma-separated seeds, one ensemble member each (default: 0..N-1 "
                   "of the preset)")
    p.add_argument("--json", action="store_true", help="print {\"runs\": [...]} (one record per seed)")
    add_model_options(p)
    p.set_defaults(handler=cmd_train, rerun_resumes=True)  # a stopped job continues by running it again


def jobs_of(args, place: Callable[[str], str] | None = None) -> list:
    """The one sweep job of a parsed `bayesbench train` command line."""
    if (args.arch is None) == (args.model is None):
        raise ValueError("give exactly one of --arch (a built-in architecture) and --model (your own)")
    return preset_jobs(args, tasks=[args.task], archs=[args.arch] if args.arch else None, seeds=args.seeds,
                       place=place)


def cmd_train(args) -> int:
    from ..report.leaderboard import json_runs, markdown
    from ..report.selection import select_rows
    (sweep_job,) = run_preset(args, lambda place: jobs_of(args, place), line_printer(args))
    if args.json:
        print(json.dumps(json_runs(select_rows(args.db, run_ids=[sweep_job.key])), indent=2))
    else:
        print(markdown(select_rows(args.db, task=sweep_job.job.setup.label, arch=sweep_job.arch)))
    return 0
