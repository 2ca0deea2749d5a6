"""`bayesbench export`: the store's rows as CSV, JSON or Parquet, with every interval.

    bayesbench export --format csv --out results.csv            # one row per (run, seed, evaluation set)
    bayesbench export --pooled --format json                   # the leaderboard's rows, seeds pooled
    bayesbench export --format parquet --out results.parquet   # needs pyarrow (bayesbench[export])
"""

from __future__ import annotations

import os

from .args import add_db, check_folder, db_name, store_to_read
from .errors import no_rows_message


def add_parser(sub) -> None:
    from ..report.export import FORMATS

    p = sub.add_parser("export", help="the store's rows as CSV, JSON or Parquet, with intervals (per seed, or "
                                      "pooled as the leaderboard pools them)")
    p.add_argument("--format", default="csv", choices=FORMATS, help="output format (default csv)")
    p.add_argument("--out", help="file to write (default: stdout; parquet needs a file)")
    p.add_argument("--pooled", action="store_true", help="the leaderboard's rows: seeds pooled per task, evaluation "
                   "set, architecture and configuration, with intervals over seeds")
    p.add_argument("--task", help="only this task (name or label)")
    p.add_argument("--arch", help="only this architecture")
    add_db(p)
    p.set_defaults(handler=cmd_export)


def cmd_export(args) -> int:
    import sys

    from ..report.export import export
    from ..report.selection import select_rows

    if args.out and os.path.isdir(args.out):
        raise ValueError(f"--out {args.out} is a folder; give a file name")
    folder = os.path.dirname(args.out) if args.out else ""
    if folder:
        check_folder("--out", folder)  # a missing folder is made, one that is a file named
    store_to_read(args)
    records = select_rows(args.db, task=args.task, arch=args.arch)
    if not records and (args.task or args.arch):
        raise ValueError(no_rows_message(args.db, task=args.task, arch=args.arch))
    if not records:  # a mistyped --db: say so rather than write an empty file
        raise ValueError(f"no results in the store {db_name(args.db)} (--db): nothing to export")
    if folder:
        os.makedirs(folder, exist_ok=True)
    text = export(records, args.format, pooled=args.pooled, path=args.out)
    if text is not None:
        sys.stdout.write(text)
    else:
        print(f"wrote {args.out}", file=sys.stderr)
    return 0
