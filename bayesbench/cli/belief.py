"""`bayesbench belief-probe RUN`: does a trained run's residual stream carry its tunnel's belief
state linearly? Held-out R^2 per stream against a shuffle control, with intervals over seeds, and
the belief simplex drawn beside its read-out (Shai et al. 2024, arXiv 2405.15943; docs/belief_probe.md).

    bayesbench train --task mess3 --arch transformer --seeds 0,1,2
    bayesbench belief-probe RUN_ID_OR_DIR [--sequences 2048] [--test-fraction 0.25] [--json]
"""

from __future__ import annotations

from .args import add_db


def add_parser(sub) -> None:
    p = sub.add_parser("belief-probe", help="linear probe of every residual stream of a trained run for the exact "
                                            "belief state (belief-state processes, hmm_mixture, hmm)")
    p.add_argument("run", help="run directory (with checkpoint.pt), checkpoint file, or a run_id of the results store")
    p.add_argument("--sequences", type=int, default=2048, help="evaluation sequences (default 2048)")
    p.add_argument("--test-fraction", type=float, default=0.25, help="share of the sequences held out (default 0.25)")
    p.add_argument("--split-seed", type=int, default=0, help="seed of the held-out split and the shuffle (default 0)")
    p.add_argument("--sets", default="per-seed",
                   help="sequences: per-seed (each seed's own, from an evaluation seed derived from it: the "
                        "default) or shared (one set for every seed, as before 2026-12-07)")
    add_db(p)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=cmd_belief_probe)


FLAGS = {"run": "RUN", "as_json": "--json"}  # the flag of each BeliefProbeConfig field not named "--" + field


def config_from_args(args):
    """The one place the command line becomes the study's typed config (`BeliefProbeConfig`)."""
    from ..dynamics.belief_probe.study import BeliefProbeConfig

    return BeliefProbeConfig(run=args.run, sequences=args.sequences, test_fraction=args.test_fraction,
                             split_seed=args.split_seed, sets=args.sets, db=args.db, as_json=args.json)


def cmd_belief_probe(args) -> int:
    """Run, store, plot, report; prints the headline and the report's path (or --json)."""
    from ..dynamics.belief_probe.study import run_belief_probe
    from .study import print_study

    return print_study(args, config_from_args, run_belief_probe, FLAGS)
