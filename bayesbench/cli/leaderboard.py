"""`bayesbench leaderboard`: the stored results as a table (Markdown, CSV or JSON).

    bayesbench leaderboard --format md
    bayesbench leaderboard --metric kl --task hmm
    bayesbench leaderboard --metric auc --curve-metric entropy_mae_positional --threshold 0.05
"""

from __future__ import annotations

from .args import add_db, bits, store_to_read
from .errors import no_rows_message


def add_parser(sub) -> None:
    from ..metric_table import curve_metrics
    from ..report.leaderboard import FORMATS
    from ..report.rows import DEFAULT_THRESHOLD, rankings
    p = sub.add_parser("leaderboard", help="show stored results (every stored seed of each task, arch and config)")
    p.add_argument("--task", help="only this task (name like hmm, or label like 'hmm S=5 K=20')")
    p.add_argument("--arch", help="only this architecture")
    p.add_argument("--latest", action="store_true", help="only the newest run of each task and arch")
    p.add_argument("--all", action="store_true", help="one row per stored run (no pooling of seeds across runs)")
    p.add_argument("--format", choices=FORMATS, help="output format (default md)")
    p.add_argument("--metric", default="entropy_mae", choices=rankings(),
                   help="rank by this metric (default entropy_mae; see docs/science.md, Metrics), or by the area "
                        "under the learning curve against log(step) (auc, of --curve-metric)")
    p.add_argument("--threshold", type=bits, default=DEFAULT_THRESHOLD,
                   help=f"bits: the 'steps to' column counts the steps to reach it (default {DEFAULT_THRESHOLD:g})")
    p.add_argument("--curve-metric", choices=curve_metrics(),
                   help="the learning-curve metric of the curve columns and of --metric auc (default: the ranked "
                        "metric; entropy_mae with auc)")
    p.add_argument("--json", action="store_true", help="same as --format json")
    add_db(p)
    p.set_defaults(handler=cmd_leaderboard)


def cmd_leaderboard(args) -> int:
    from ..report.leaderboard import render
    from ..report.selection import select_rows
    if args.latest and args.all:
        raise ValueError("give at most one of --latest and --all")
    if args.json and args.format not in (None, "json"):
        raise ValueError(f"--json is --format json: give one of --json and --format {args.format}")
    store_to_read(args)
    records = select_rows(args.db, task=args.task, arch=args.arch, latest=args.latest)
    if not records and (args.task or args.arch):
        raise ValueError(no_rows_message(args.db, task=args.task, arch=args.arch))
    print(render(records, "json" if args.json else args.format or "md", args.metric, per_run=args.all,
                 threshold=args.threshold, curve_metric=args.curve_metric))
    return 0
