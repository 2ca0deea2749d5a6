"""`bayesbench data export`: the tunnels as datasets (docs/data.md).

    bayesbench data export bijection --split eval --format parquet          # data/bijection-eval/
    bayesbench data export hmm --split train --sequences 10000 --format hf   # data/hmm-train-hf/: fresh sequences
    bayesbench data export ./mine.py:build --task-args L=12 --split eval
"""

from __future__ import annotations

import os

from .args import check_folder, key_values, positive


def add_parser(sub) -> None:
    from ..data import FORMATS, SPLITS
    from ..presets import PRESETS

    p = sub.add_parser("data", help="the tunnels as datasets: export the fixed evaluation sets, the curve set or fresh "
                                    "training sequences with their exact posteriors")
    verbs = p.add_subparsers(dest="data_command", required=True, metavar="VERB")
    e = verbs.add_parser("export", help="write a task's sets (tokens, scored mask, exact posterior, latents, seed, set "
                                        "id) as parquet or a Hugging Face dataset, with a dataset card")
    e.add_argument("task", metavar="TASK", help="a preset task key (quick: bijection, hmm, sticky) or your own tunnel: "
                   "'pkg.mod:build' or './file.py:build' (docs/tasks.md)")
    e.add_argument("--task-args", nargs="+", type=key_values("--task-args"), metavar="KEY=VALUE",
                   help="the task's fields over the preset's (e.g. V=6), or your own tunnel's factory options")
    e.add_argument("--preset", default="quick", choices=sorted(PRESETS), help="whose task and evaluation (default "
                   "quick)")
    e.add_argument("--split", default="eval", choices=SPLITS,
                   help="eval: the fixed evaluation sets the leaderboard scores on (default); curve: the "
                        "learning-curve set; train: fresh training sequences (needs --sequences)")
    e.add_argument("--sequences", type=positive, help="sequences per set (default: the preset's evaluation size, 4096; "
                   "the curve set's, 256)")
    e.add_argument("--eval", action="append", metavar="NAME",
                   help="with --split eval: only this evaluation set (e.g. values, values+query, K=30); repeatable")
    e.add_argument("--seed", type=int, default=0, help="with --split train: the model seed whose training-data stream "
                   "is drawn (default 0)")
    e.add_argument("--format", default="parquet", choices=FORMATS,
                   help="parquet (one file per set, pyarrow) or hf (a datasets.DatasetDict saved to disk)")
    e.add_argument("--out", help="output folder (default data/<task>-<split>, data/<task>-<split>-hf for --format "
                                 "hf; an earlier export there is replaced)")
    e.set_defaults(verb_handler=cmd_data_export)
    p.set_defaults(handler=cmd_data)


def cmd_data(args) -> int:
    """`bayesbench data VERB`: the verb's handler (argparse requires a verb)."""
    return args.verb_handler(args)


def cmd_data_export(args) -> int:
    from ..data.export import export
    from ..data.sets import slug
    from ..outside_code import stem
    from ..tasks import is_outside_task
    from ..tasks.base import format_bytes
    from .args import as_dict

    if args.seed != 0 and args.split != "train":
        raise ValueError(f"--seed picks a training-data stream: it goes with --split train, not --split {args.split}")
    name = stem(args.task, "task", "'pkg.mod:build' or './file.py:build'") if is_outside_task(args.task) else args.task
    default = f"{slug(name)}-{args.split}" + ("-hf" if args.format == "hf" else "")  # one folder per format
    out = args.out if args.out is not None else os.path.join("data", default)
    check_folder("--out", out)
    manifest = export(args.task, out=out, task_args=as_dict("--task-args", args.task_args) or None,
                      preset=args.preset, split=args.split, sequences=args.sequences, evals=args.eval,
                      seed=args.seed, fmt=args.format)
    print(f"wrote {out} ({args.format}, {format_bytes(manifest['bytes'])}): {manifest['label']}, {args.split} split")
    for s in manifest["sets"]:
        print(f"  {s['name']}: {s['n_sequences']} sequences of {s['seq_len']} tokens, {s['num_classes']} classes, "
              f"set id {s['set_id']}, seed {s['seed']}" + (f" -> {s['file']}" if args.format == "parquet" else
                                                          f" -> split {s['file']}"))
    print(f"  what each column is: {os.path.join(out, 'README.md')}; set ids and keys: "
          f"{os.path.join(out, 'bayesbench.json')}")
    return 0
