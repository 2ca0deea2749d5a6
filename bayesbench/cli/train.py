"""`bayesbench train`: one architecture on one task (an ensemble of seeds), evaluated and stored.

    bayesbench train --task bijection --arch transformer --preset quick --seeds 0,1,2 --steps 500
    bayesbench train --model ./mine.py:build --task hmm --seeds 0,1,2

A one-job `bayesbench run`, on the same engine (`sweep/engine.py`), in this process: a job already
stored is not trained again, a stopped one continues from its checkpoint.
"""

from __future__ import annotations

import json

from .args import add_training, event_printer, seed_list
from .model_option import add_model_options
from .run import jobs_of, request_of


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


__all__ = ["add_parser", "cmd_train", "jobs_of"]  # jobs_of: `run`'s, which reads --task and --arch here


def cmd_train(args) -> int:
    from ..report.leaderboard import json_runs, markdown
    from ..report.selection import select_rows
    from ..sweep import engine

    (sweep_job,) = engine.run(request_of(args), event_printer(args)).jobs
    if args.json:
        print(json.dumps(json_runs(select_rows(args.db, run_ids=[sweep_job.key])), indent=2))
    else:
        print(markdown(select_rows(args.db, task=sweep_job.job.setup.label, arch=sweep_job.arch)))
    return 0
