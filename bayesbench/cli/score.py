"""`bayesbench score`: score a model of yours, trained anywhere, on the fixed evaluation sets and
store it (no training); or a file of its predictions on an exported set (docs/data.md).

    bayesbench score --model ./mine.py:build --checkpoint mine.pt --task bijection
    bayesbench score --predictions values_pred.parquet values_query_pred.parquet --name mine
"""

from __future__ import annotations

import json

from .args import add_db


def add_parser(sub) -> None:
    from ..presets import PRESETS

    sc = sub.add_parser("score", help="score an already trained model of yours on the fixed evaluation sets and "
                        "store it (no training)")
    sc.add_argument("--model", metavar="SPEC", help="'pkg.mod:build', './file.py:build' or hf:NAME")
    sc.add_argument("--checkpoint", help="a state_dict() of one module the factory builds, or a "
                    "bayesbench checkpoint.pt of this model (every member)")
    sc.add_argument("--task", help="task key of the preset (required for a plain state dict; e.g. bijection, hmm)")
    sc.add_argument("--name", help="leaderboard name (default: the file or module name)")
    sc.add_argument("--preset", default="quick", choices=sorted(PRESETS),
                    help="whose task and evaluation (default quick)")
    sc.add_argument("--seed", type=int, default=0, help="seed label of a plain state dict's model (default 0)")
    sc.add_argument("--eval-sequences", type=int, help="evaluation set size (default: the preset's, 4096)")
    sc.add_argument("--device", default="cpu", help="device to evaluate on (default cpu)")
    sc.add_argument("--json", action="store_true", help="print {\"runs\": [...]}")
    add_predictions(sc)
    add_db(sc)
    sc.set_defaults(handler=cmd_score)


def add_predictions(sc) -> None:
    """`--predictions`: a file of predictions made anywhere, instead of a model (docs/data.md)."""
    from .args import key_values

    g = sc.add_argument_group("predictions made elsewhere (instead of --model and --checkpoint; docs/data.md)")
    g.add_argument("--predictions", nargs="+", metavar="FILE",
                   help="log-probabilities (column log_probs) or probabilities (probs) of an exported evaluation set "
                        "(bayesbench data export), parquet or .npy with its key beside it; several files: the "
                        "evaluation sets of one task, one row; checked (shape, finite, normalised within 1e-4, the "
                        "set's id, the tunnel's current version) before anything is stored")
    g.add_argument("--task-args", nargs="+", type=key_values("--task-args"), metavar="KEY=VALUE",
                   help="with --predictions and --task: the task options the set was exported with")
    g.add_argument("--params", type=int, default=0, help="with --predictions: the model's parameter count, shown on "
                   "the leaderboard (default 0: not given)")
    g.add_argument("--steps", type=int, default=0, help="with --predictions or a plain state dict: how many steps the "
                   "model was trained, as you state it, shown on the leaderboard (default 0: not stated, shown as '-')")


def cmd_score(args) -> int:
    from ..checks import positive_int
    from ..report.leaderboard import json_runs, markdown
    from ..scoring.trained_elsewhere import score_checkpoint
    from ..store.database import read_records
    from ..sweep.jobs import resolve_device

    if args.predictions:
        return cmd_score_predictions(args)
    if not (args.model and args.checkpoint):
        raise ValueError("score needs --model SPEC and --checkpoint FILE (a model's weights), or --predictions FILE "
                         "(a model's predictions on an exported set)")
    if args.task_args or args.params:
        raise ValueError(f"{'--task-args' if args.task_args else '--params'} goes with --predictions")
    if args.eval_sequences is not None:
        positive_int("--eval-sequences", args.eval_sequences)
    device = resolve_device(args.device)
    scored = score_checkpoint(args.model, args.checkpoint, task=args.task, name=args.name, preset=args.preset,
                              seed=args.seed, db=args.db, eval_sequences=args.eval_sequences, device=device,
                              steps=args.steps)
    records = read_records(args.db, where="run_id = ?", params=(scored[0].run_id,))
    print(json.dumps(json_runs(records), indent=2) if args.json else markdown(records))
    return 0


def cmd_score_predictions(args) -> int:
    """`score --predictions`: a file's predictions checked, scored and stored (`data.score`)."""
    from ..data.score import score_predictions
    from ..report.leaderboard import json_runs, markdown
    from ..store.database import read_records
    from .args import as_dict

    why = {"model": "the predictions stand for the model", "checkpoint": "the predictions stand for the weights",
           "eval_sequences": "the set's size is the file's", "device": "nothing runs a model"}
    given = [k for k in why if getattr(args, k) is not None and (k != "device" or args.device != "cpu")]
    if given:
        raise ValueError(f"--predictions are scored as given: {', '.join('--' + k.replace('_', '-') for k in given)} "
                         f"cannot go with them ({'; '.join(why[k] for k in given)})")
    if not args.name:
        raise ValueError("--predictions needs --name NAME: the leaderboard name of the model that made them")
    scored = score_predictions(args.predictions, name=args.name, preset=args.preset, task=args.task,
                               task_args=as_dict("--task-args", args.task_args) or None, seed=args.seed,
                               params=args.params, steps=args.steps, db=args.db)
    records = read_records(args.db, where="run_id = ?", params=(scored[0].run_id,))
    print(json.dumps(json_runs(records), indent=2) if args.json else markdown(records))
    return 0
