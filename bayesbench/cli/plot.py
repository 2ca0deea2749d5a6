"""`bayesbench plot`: PNG figures of the stored results (or of a dynamics study).

    bayesbench plot                       # per task: model vs Bayes entropy per position, error curves
    bayesbench plot --dynamics STUDY_ID   # a profile study's figures and report, rebuilt from the store
"""

from __future__ import annotations

import os

from .args import add_db
from .errors import no_rows_message


def add_parser(sub) -> None:
    p = sub.add_parser("plot", help="PNG figures: model vs Bayes entropy per position, error curves per arch")
    p.add_argument("--task", help="only this task")
    p.add_argument("--out", default=os.path.join("results", "plots"), help="output folder (default results/plots)")
    p.add_argument("--dynamics", metavar="STUDY", help="draw a profile study's curves instead and rebuild its report "
                                                       "from the store (e.g. a profile's id)")
    add_db(p)
    p.set_defaults(handler=cmd_plot)


def cmd_plot(args) -> int:
    if args.dynamics:
        from ..dynamics.profile.study import plot_study

        for p in plot_study(args.dynamics, args.db, args.out):
            print(p)
        return 0
    from ..store.plots import plot

    paths = plot(args.db, args.out, task=args.task)
    if not paths and args.task:
        raise ValueError(no_rows_message(args.db, task=args.task))
    if not paths:
        print("no stored runs to plot: run `bayesbench run --preset quick` first")
    for p in paths:
        print(p)
    return 0
