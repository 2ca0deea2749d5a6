"""`bayesbench score`: score a model of yours, trained anywhere, on the fixed evaluation sets and
store it (no training).

    bayesbench score --model ./mine.py:build --checkpoint mine.pt --task bijection
"""

from __future__ import annotations

import json

from .args import add_db


def add_parser(sub) -> None:
    from ..presets import PRESETS

    sc = sub.add_parser("score", help="score an already trained model of yours on the fixed evaluation sets and "
                        "store it (no training)")
    sc.add_argument("--model", required=True, metavar="SPEC", help="'pkg.mod:build', './file.py:build' or hf:NAME")
    sc.add_argument("--checkpoint", required=True, help="a state_dict() of one module the factory builds, or a "
                    "bayesbench checkpoint.pt of this model (every member)")
    sc.add_argument("--task", help="task key of the preset (required for a plain state dict; e.g. bijection, hmm)")
    sc.add_argument("--name", help="leaderboard name (default: the file or module name)")
    sc.add_argument("--preset", default="quick", choices=sorted(PRESETS),
                    help="whose task and evaluation (default quick)")
    sc.add_argument("--seed", type=int, default=0, help="seed label of a plain state dict's model (default 0)")
    sc.add_argument("--eval-sequences", type=int, help="evaluation set size (default: the preset's, 4096)")
    sc.add_argument("--device", default="cpu", help="device to evaluate on (default cpu)")
    sc.add_argument("--json", action="store_true", help="print {\"runs\": [...]}")
    add_db(sc)
    sc.set_defaults(handler=cmd_score)


def cmd_score(args) -> int:
    from ..checks import positive_int
    from ..scoring.outside import score_checkpoint
    from ..store.database import read_records
    from ..store.leaderboard import json_runs, markdown
    from ..sweep.jobs import resolve_device

    if args.eval_sequences is not None:
        positive_int("--eval-sequences", args.eval_sequences)
    device = resolve_device(args.device)
    scored = score_checkpoint(args.model, args.checkpoint, task=args.task, name=args.name, preset=args.preset,
                              seed=args.seed, db=args.db, eval_sequences=args.eval_sequences, device=device)
    records = read_records(args.db, where="run_id = ?", params=(scored[0].run_id,))
    print(json.dumps(json_runs(records), indent=2) if args.json else markdown(records))
    return 0
