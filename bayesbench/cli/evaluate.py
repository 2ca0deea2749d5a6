"""`bayesbench eval RUN_DIR...`: re-score trained runs from their checkpoints and update the store.

    bayesbench eval runs/quick/bijection-transformer-lr0.001-s0-1-2-<key> --eval-sequences 8192
"""

from __future__ import annotations

import json
import os

from .args import add_db, positive


def add_parser(sub) -> None:
    p = sub.add_parser("eval", help="re-evaluate a trained run from its checkpoint and update the store")
    p.add_argument("run_dir", nargs="+", help="run directories (with checkpoint.pt) or checkpoint files")
    p.add_argument("--device", default="cpu", help="device to evaluate on: cpu, cuda, cuda:N or auto (default cpu)")
    p.add_argument("--eval-sequences", type=positive, help="evaluation set size (default: as the run was configured)")
    p.add_argument("--json", action="store_true", help="print {\"runs\": [...]}")
    add_db(p)
    p.set_defaults(handler=cmd_eval)


def cmd_eval(args) -> int:
    from ..report.leaderboard import json_runs, markdown
    from ..scoring.rows import score_run
    from ..store.database import prepare_store, read_records
    from ..sweep.jobs import resolve_device
    from ..training.checkpoint import CHECKPOINT_NAME, load_result

    device = resolve_device(args.device)  # a device that is not here is named as such, not as a damaged checkpoint
    prepare_store(args.db)
    results = []
    for path in args.run_dir:  # every checkpoint read (and any damage named) before anything is stored
        ckpt = os.path.join(path, CHECKPOINT_NAME) if os.path.isdir(path) else path
        if not os.path.exists(ckpt):
            raise ValueError(f"no checkpoint at {ckpt}")
        result = load_result(ckpt, device)
        if args.eval_sequences:
            result.meta["eval_sequences"] = args.eval_sequences
        results.append(result)
    run_ids = []
    for result in results:
        records = score_run(result, db=args.db, device=device)
        run_ids.append(records[0].run_id)
    records = read_records(args.db, where=f"run_id IN ({', '.join('?' * len(run_ids))})", params=tuple(run_ids))
    print(json.dumps(json_runs(records), indent=2) if args.json else markdown(records))
    return 0
