"""`bayesbench geometry RUN`: a trained transformer's geometry (Paper I, arXiv 2512.22471, Sec. 5):
key orthogonality, attention entropy by layer, the value manifold, head and layer ablations;
stored, drawn and reported (docs/geometry.md).

    bayesbench train --task bijection --arch transformer --preset quick --seeds 0,1,2,3,4
    bayesbench geometry RUN_ID_OR_DIR [--sequences 1024] [--json]
"""

from __future__ import annotations

from .args import add_db


def add_parser(sub) -> None:
    p = sub.add_parser("geometry", help="Paper I section 5 geometry of a trained transformer run: key orthogonality, "
                                        "attention entropy by layer, value manifold, head and layer ablations")
    p.add_argument("run", help="run directory (with checkpoint.pt), checkpoint file, or a run_id of the results store "
                   "(`bayesbench leaderboard --json` lists them)")
    p.add_argument("--sequences", type=int, default=1024, help="evaluation sequences (default 1024)")
    p.add_argument("--min-seeds", type=int, default=5, help="refuse runs with fewer seeds (default 5: the intervals "
                                                            "are over seeds)")
    p.add_argument("--sets", default="per-seed",
                   help="evaluation sequences: per-seed (each seed's own, from an evaluation seed derived from it: "
                        "the default) or shared (one set for every seed, as before 2026-12-07)")
    add_db(p)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=cmd_geometry)


FLAGS = {"run": "RUN", "as_json": "--json"}  # the flag of each GeometryConfig field not named "--" + field


def config_from_args(args):
    """The one place the command line becomes the study's typed config (`GeometryConfig`)."""
    from ..dynamics.geometry.study import GeometryConfig

    return GeometryConfig(run=args.run, sequences=args.sequences, min_seeds=args.min_seeds, sets=args.sets, db=args.db,
                          as_json=args.json)


def cmd_geometry(args) -> int:
    """Run, store, plot, report; prints the report's path (or --json)."""
    from ..dynamics.geometry.study import run_geometry
    from .study import print_study

    return print_study(args, config_from_args, run_geometry, FLAGS)
