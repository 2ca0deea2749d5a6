"""`bayesbench emsgd`: EM-like vs SGD on Paper II's attention toy (arXiv 2512.22473, Sec. 7), many
seeds as one ensemble; stores the study, draws its figures, writes its report (docs/em_vs_sgd.md).

    bayesbench emsgd                          # paper variant, 16 seeds, T = 2000, 1000 steps
    bayesbench emsgd --seeds 16 --length 300  # shorter sequences (what a 2-core CPU affords)
    bayesbench emsgd --variant beta           # Beta-sticky tunnel, exact posterior predictive floor
    bayesbench emsgd --variant deep --steps 2000
"""

from __future__ import annotations

from .args import add_db, positive, progress


def add_parser(sub) -> None:
    from ..dynamics.emsgd import VARIANTS

    p = sub.add_parser("emsgd", help="EM-like vs SGD on Paper II's attention toy, many seeds as one ensemble")
    p.add_argument("--seeds", type=int, default=16, help="number of seeds, >= 2 (default 16; the authors' 5 first)")
    p.add_argument("--variant", default="paper", choices=VARIANTS,
                   help="paper: the authors' sticky chain; beta: Beta-sticky tunnel; deep: 4-layer 4-head AdamW")
    p.add_argument("--steps", type=int, help="full-batch updates (default 1000; deep 2000)")
    p.add_argument("--length", type=int, help="sequence length T (default 2000; beta: L = 50 per sequence)")
    p.add_argument("--sequences", type=int, default=40, help="beta variant: sequences per seed (default 40)")
    p.add_argument("--schedules", help="comma-separated toy schedules (default all: sgd, em and the controls "
                                       "wo10, wqk10, sgd-emtotal, sgd-emnorm, sgd3, sgd10; must include sgd and em)")
    p.add_argument("--means", default="shared", help="symbol means: shared (the authors': one draw for every seed, the "
                                                     "default) or per-seed (each seed its own draw)")
    p.add_argument("--chunk", type=positive, help="members per batched pass (default: a memory budget)")
    p.add_argument("--threads", type=positive, help="torch CPU threads")
    add_db(p)
    p.add_argument("--json", action="store_true", help="print the study's summary as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=cmd_emsgd)


FLAGS = {"as_json": "--json", "progress": "--no-progress"}  # EmsgdConfig fields not named "--" + field


def config_from_args(args):
    """The one place the command line becomes the study's typed config (`EmsgdConfig`)."""
    from ..dynamics.emsgd.study import EmsgdConfig

    return EmsgdConfig(variant=args.variant, seeds=args.seeds, steps=args.steps, length=args.length,
                       sequences=args.sequences, means=args.means, chunk=args.chunk, threads=args.threads, db=args.db,
                       schedules=tuple(s.strip() for s in args.schedules.split(",")) if args.schedules else None,
                       progress=progress(args), as_json=args.json)


def cmd_emsgd(args) -> int:
    """Run, store, plot, report; prints the report's path (or --json)."""
    from ..dynamics.emsgd.study import run_emsgd
    from .study import print_study

    return print_study(args, config_from_args, run_emsgd, FLAGS)
