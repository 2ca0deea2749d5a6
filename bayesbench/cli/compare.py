"""`bayesbench compare RUN_A RUN_B`: two stored runs' learning curves, step by step, and the step
from which their difference is significant (`report/compare.py`: Welch's t-test over seeds at each
step, in a fixed-sequence test from the last step backwards).

    bayesbench compare 3f1c0a9e2b7d 8d2a9347c1e0 --metric entropy_mae_positional --plot cmp.png
"""

from __future__ import annotations

import json
import os

from .args import add_db, store_to_read


def add_parser(sub) -> None:
    from ..metric_table import curve_metrics
    p = sub.add_parser("compare", help="two stored runs' learning curves and the step from which they differ "
                                       "significantly (Welch's t over seeds per step, fixed-sequence test)")
    p.add_argument("run_a", metavar="RUN_A", help="a stored run id (or a prefix naming one run), e.g. from "
                   "`bayesbench leaderboard --all --json`")
    p.add_argument("run_b", metavar="RUN_B", help="the other run (same task and evaluation)")
    p.add_argument("--metric", default="entropy_mae", choices=curve_metrics(),
                   help="the curve metric compared (default entropy_mae; or the bijection's kl:repeated, kl:new)")
    p.add_argument("--plot", metavar="PNG", help="also draw both curves (mean, band over seeds) to this file")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    add_db(p)
    p.set_defaults(handler=cmd_compare)


def run_records(db: str | None, run: str) -> list:
    """The stored records of the run whose id is `run` or starts with it (exactly one run)."""
    from ..store.database import db_path, read_records

    # a prefix by substr, not LIKE: '_' and '%' in what the user typed are characters, not wildcards
    records = read_records(db, where="substr(run_id, 1, ?) = ?", params=(len(run), run))
    exact = [r for r in records if r.run_id == run]
    ids = sorted({r.run_id for r in records})
    if exact:
        return exact
    if not ids:
        raise ValueError(f"no stored run {run!r} in {db_path(db)} (`bayesbench leaderboard --all --json` lists the "
                         "run ids)")
    if len(ids) > 1:
        raise ValueError(f"run {run!r} names several stored runs: {', '.join(ids[:5])}{' ...' if len(ids) > 5 else ''}"
                         "; give more of its id")
    return records


def _describe(records: list) -> str:
    r = records[0]
    c = r.learning_curve
    curve = f"curve on {c.n_sequences} sequences of eval {c.eval}" if c else "no learning curve"
    return (f"{r.run_id}: {r.task_label} / {r.arch}, {len(records)} seeds {sorted(x.seed for x in records)}, "
            f"{r.steps} steps, {curve}")


def cmd_compare(args) -> int:
    from ..report.compare import compare

    if args.plot and (os.path.isdir(args.plot) or args.plot.endswith(("/", os.sep))):
        raise ValueError(f"--plot {args.plot} is a folder; give a file name (e.g. cmp.png)")
    store_to_read(args)
    a, b = run_records(args.db, args.run_a), run_records(args.db, args.run_b)
    if a[0].run_id == b[0].run_id:
        raise ValueError(f"RUN_A and RUN_B are the same run ({a[0].run_id}): compare two different runs")
    ca, cb = a[0].learning_curve, b[0].learning_curve
    if a[0].task_label != b[0].task_label or (ca and cb and (ca.eval, ca.task) != (cb.eval, cb.task)):
        raise ValueError(f"runs {a[0].run_id} ({a[0].task_label}) and {b[0].run_id} ({b[0].task_label}) are not on "
                         "the same task and evaluation: their curves are not comparable")
    if ca and cb and ca.n_sequences != cb.n_sequences:
        raise ValueError(f"runs {a[0].run_id} and {b[0].run_id} measured their curves on different sets "
                         f"({ca.n_sequences} and {cb.n_sequences} sequences): not comparable")
    missing = [r.run_id for r in (a[0], b[0]) if r.learning_curve is not None
               and args.metric not in r.learning_curve.values]
    if missing:
        raise ValueError(f"run {missing[0]} has no learning curve of {args.metric} (kl:repeated and kl:new are the "
                         "bijection's cases; other tasks have none)")
    result = compare(a, b, args.metric)
    if args.plot:
        from ..report.plots import plot_comparison

        args.plot = plot_comparison(a, b, result, args.plot)  # the file written (.png added if none)
    if args.json:
        print(json.dumps(_as_json(a, b, result), indent=2, allow_nan=False))
        return 0
    print(f"A = {_describe(a)}\nB = {_describe(b)}\n")
    print(f"| step | A: {args.metric} (bits), mean [95% CI over seeds] | B: mean [95% CI] | A - B | p (Welch) |\n"
          "|---|---|---|---|---|")
    for sd in result.steps:
        mark = " *" if result.significant_from is not None and sd.step >= result.significant_from else ""
        print(f"| {sd.step} | {_ci(sd.a)} | {_ci(sd.b)} | {sd.difference:+.4f} | {_p(sd.p)}{mark} |")
    print()
    if result.significant_from is not None:
        print(f"The difference is significant from step {result.significant_from} on (* above; "
              f"{'A' if result.steps[-1].difference < 0 else 'B'} lower at the end).")
    else:
        print("No step from which the difference stays significant.")
    print(f"Test: {result.note}.")
    if args.plot:
        print(args.plot)
    return 0


def _ci(x: tuple[float, float, float]) -> str:
    import math

    return f"{x[0]:.4f}" + (f" [{x[1]:.4f}, {x[2]:.4f}]" if math.isfinite(x[1]) else "")


def _p(p: float) -> str:
    import math

    return "n/a" if math.isnan(p) else f"{p:.2g}"


def _as_json(a: list, b: list, result) -> dict:
    import math

    def num(x: float) -> float | None:
        return x if math.isfinite(x) else None

    return {"run_a": a[0].run_id, "run_b": b[0].run_id, "metric": result.metric, "seeds": [result.a_seeds,
                                                                                           result.b_seeds],
            "significant_from": result.significant_from, "test": result.note,
            "steps": [{"step": sd.step, "a": [num(v) for v in sd.a], "b": [num(v) for v in sd.b],
                       "difference": num(sd.difference), "p": num(sd.p)}
                      for sd in result.steps]}
