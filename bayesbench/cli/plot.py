"""`bayesbench plot`: PNG figures of the stored results (or of a dynamics study).

    bayesbench plot                       # per task: model vs Bayes entropy per position, error curves
    bayesbench plot --curves --metric kl  # per task: the learning curves of every architecture
    bayesbench plot --dynamics STUDY_ID   # a profile study's figures and report, rebuilt from the store
    bayesbench plot --state               # per task: the gap to Bayes against the recurrent state size
"""

from __future__ import annotations

import os

from .args import add_db, bits, check_folder, store_to_read
from .errors import no_rows_message


def add_parser(sub) -> None:
    from ..metric_table import curve_metrics
    from ..report.rows import DEFAULT_THRESHOLD
    p = sub.add_parser("plot", help="PNG figures: model vs Bayes entropy per position, error curves per arch")
    p.add_argument("--task", help="only this task")
    p.add_argument("--out", default=os.path.join("results", "plots"), help="output folder (default results/plots)")
    p.add_argument("--dynamics", metavar="STUDY", help="draw a profile study's curves instead and rebuild its report "
                                                       "from the store (e.g. a profile's id)")
    p.add_argument("--curves", action="store_true",
                   help="draw the learning curves instead: per task, --metric against the training step for every "
                        "architecture (latest run of each), band over seeds, the uniform floor and 0 (Bayes)")
    p.add_argument("--tuning", action="store_true",
                   help="draw the learning-rate searches instead (bayesbench run --tune): per task, each "
                        "architecture's selection score against the rate (mean over selection seeds, range as a "
                        "band), the rate chosen, the uniform floor")
    p.add_argument("--state", action="store_true",
                   help="draw the gap to Bayes against the recurrent state size instead: per task, one point per "
                        "architecture (its mean over seeds and 95%% interval) at the floats it carries per sequence "
                        "at the scored length, log x (rows stored with a state count)")
    p.add_argument("--metric", choices=curve_metrics(),
                   help="with --curves or --state: the metric drawn (default entropy_mae; kl:repeated, kl:new: the "
                        "bijection's KL at repeated and at new keys, --curves only)")
    p.add_argument("--threshold", type=bits,
                   help=f"with --curves: the threshold line, bits (default {DEFAULT_THRESHOLD:g})")
    add_db(p)
    p.set_defaults(handler=cmd_plot)


def _tuning(args) -> int:
    from ..report.tuning import plot_tuning

    paths = plot_tuning(args.db, args.out, task=args.task)
    if not paths:
        raise ValueError("--tuning: no learning-rate search stored" + (f" for task {args.task!r}" if args.task else "")
                         + ": run `bayesbench run --preset quick --tune` first")
    for p in paths:
        print(p)
    return 0


def check_options(args) -> None:
    """Options that go with another one, or exclude it, refused rather than ignored."""
    state = getattr(args, "state", False)
    if state and (args.curves or args.dynamics or getattr(args, "tuning", False)):
        other = "--curves" if args.curves else "--dynamics" if args.dynamics else "--tuning"
        raise ValueError(f"--state draws the gap against the state size; it cannot be combined with {other}")
    if state and args.threshold is not None:
        raise ValueError("--threshold goes with --curves (the learning curves), not --state")
    if getattr(args, "tuning", False) and (args.curves or args.dynamics):
        raise ValueError("--tuning draws the learning-rate searches; it cannot be combined with "
                         + ("--curves" if args.curves else "--dynamics"))
    curve_options = [f"--{k}" for k in ("metric", "threshold") if getattr(args, k) is not None]
    if args.dynamics:
        given = (["--curves"] if args.curves else []) + (["--task"] if args.task else []) + curve_options
        if given:
            raise ValueError(f"--dynamics draws one study; it cannot be combined with {', '.join(given)}")
    elif curve_options and not args.curves and not state:
        verb = "go" if len(curve_options) > 1 else "goes"
        raise ValueError(f"{' and '.join(curve_options)} {verb} with --curves (the learning curves)")


def cmd_plot(args) -> int:
    check_folder("--out", args.out)
    check_options(args)
    store_to_read(args)
    if args.dynamics:
        from ..dynamics.profile.study import plot_study

        for p in plot_study(args.dynamics, args.db, args.out):
            print(p)
        return 0
    if args.curves:
        return _curves(args)
    if getattr(args, "tuning", False):
        return _tuning(args)
    if getattr(args, "state", False):
        return _state(args)
    from ..report.plots import plot

    paths = plot(args.db, args.out, task=args.task)
    if not paths and args.task:
        raise ValueError(no_rows_message(args.db, task=args.task))
    if not paths:
        print("no stored runs to plot: run `bayesbench run --preset quick` first")
    for p in paths:
        print(p)
    return 0


def _state(args) -> int:
    from ..report.rows import final_metrics
    from ..report.state_plot import plot_state

    metric = args.metric or "entropy_mae"
    if metric not in final_metrics():
        raise ValueError(f"--metric {metric} with --state must be a final metric of the leaderboard: "
                         f"{', '.join(final_metrics())}")
    paths = plot_state(args.db, args.out, task=args.task, metric=metric)
    if not paths:
        raise ValueError("--state: no stored row has a state count" + (f" for task {args.task!r}" if args.task else "")
                         + " (rows trained before it was counted have none): run `bayesbench run` first")
    for p in paths:
        print(p)
    return 0


def _curves(args) -> int:
    import sys

    from ..metric_table import METRICS
    from ..report.plots import curve_metrics, plot_learning_curves
    from ..report.rows import DEFAULT_THRESHOLD

    metric = args.metric or "entropy_mae"
    measured = curve_metrics(args.db, task=args.task)
    lacking = {label: ms for label, ms in measured.items() if metric not in ms}
    if measured and len(lacking) == len(measured):  # curves there are, but none of this metric
        said = "; ".join(f"{label} (they measure {', '.join(ms)})" for label, ms in lacking.items())
        meaning = f"; {metric} is {METRICS[metric].description}" if not METRICS[metric].final else ""
        raise ValueError(f"--metric {metric} is not measured by the learning curves of {said}{meaning}")
    paths = plot_learning_curves(args.db, args.out, task=args.task, metric=metric,
                                 threshold=DEFAULT_THRESHOLD if args.threshold is None else args.threshold)
    for label, ms in lacking.items():
        print(f"bayesbench: note: {label} left out: its learning curves do not measure {metric} (they measure "
              f"{', '.join(ms)})", file=sys.stderr)
    if not paths and args.task:
        raise ValueError(no_rows_message(args.db, task=args.task))
    if not paths:
        print("no stored runs with learning curves to plot: train with `bayesbench run --preset quick` (runs stored "
              "before curves existed have none)")
    for p in paths:
        print(p)
    return 0
