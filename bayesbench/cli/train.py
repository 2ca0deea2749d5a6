"""`bayesbench train`: one architecture on one task (an ensemble of seeds), evaluated and stored.

    bayesbench train --task bijection --arch transformer --preset quick --seeds 0,1,2 --steps 500
    bayesbench train --model ./mine.py:build --task hmm --seeds 0,1,2
"""

from __future__ import annotations

import json
import uuid

from .args import add_training, line_printer, seed_list, set_threads
from .outside_model import add_model_options
from .run import make_jobs_from_args, run_jobs_from_args


def add_parser(sub) -> None:
    p = sub.add_parser("train", help="train one arch on one task (an ensemble of seeds), evaluate and store")
    add_training(p)
    p.add_argument("--task", required=True, help="task key of the preset (quick: bijection, hmm, sticky)")
    p.add_argument("--arch", help="architecture (see `bayesbench models`); or --model for your own")
    p.add_argument("--seeds", type=seed_list, help="comma-separated seeds, one ensemble member each (default: 0..N-1 "
                   "of the preset)")
    p.add_argument("--json", action="store_true", help="print {\"runs\": [...]} (one record per seed)")
    add_model_options(p)
    p.set_defaults(handler=cmd_train)


def cmd_train(args) -> int:
    from ..store.database import read_records
    from ..store.leaderboard import json_runs, markdown, select_rows

    set_threads(args)
    say = line_printer(args)
    if (args.arch is None) == (args.model is None):
        raise ValueError("give exactly one of --arch (a built-in architecture) and --model (your own)")
    jobs = make_jobs_from_args(args, tasks=[args.task], archs=[args.arch] if args.arch else None, seeds=args.seeds)
    run_ids = run_jobs_from_args(args, jobs, uuid.uuid4().hex[:12], say)
    if args.json:
        print(json.dumps(json_runs(read_records(args.db, where="run_id = ?", params=(run_ids[0],))), indent=2))
    else:
        print(markdown(select_rows(args.db, task=jobs[0].setup.label, arch=jobs[0].name or args.arch)))
    return 0
