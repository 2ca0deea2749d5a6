"""The `bayesbench` command: train models on wind tunnels, score them, keep and show results.

    bayesbench run --preset quick            # train every architecture on every task, print the leaderboard
    bayesbench train --task bijection --arch transformer --preset quick --seeds 0,1,2 --steps 500
    bayesbench eval runs/quick/bijection-transformer-lr0.001-s0-1-2-<key>   # a run directory
    bayesbench cases runs/quick/bijection-transformer-lr0.0005-s0-1-2-<key>   # the bijection error by case
    bayesbench run --model ./mine.py:build --name mine --tasks bijection,hmm   # your own nn.Module
    bayesbench score --model ./mine.py:build --checkpoint mine.pt --task bijection
    bayesbench leaderboard --format md       # or csv, json
    bayesbench compare RUN_A RUN_B           # two runs' learning curves, the step from which they differ
    bayesbench plot                          # PNGs: entropy per position vs Bayes, error curves
    bayesbench plot --curves                 # PNGs: learning curves per task, every architecture
    bayesbench models                        # architectures and their parameter counts
    bayesbench tunnels                       # the exact posterior entropy curve of every tunnel
    bayesbench profile --preset quick        # routing-law dynamics of attention while it learns (docs/dynamics.md)
    bayesbench completion bash               # a shell completion script (docs/install.md)
    bayesbench --version                     # the version and the commit of the code

One module per command (`cli/run.py`, `cli/train.py`, ...), each with `add_parser(sub)`, which
registers the command and its handler (`set_defaults(handler=...)`); argument types and option
groups they share are in `cli/args.py`, what a failure prints in `cli/errors.py`. Adding a
command is adding its module to COMMANDS. A command imports torch and the training code only in
its handler, so `--help` stays fast.
"""

from __future__ import annotations

from ..running import interrupt as _interrupt

_interrupt.guard_startup()  # a signal during the imports below: one line, exit 130 (`run_command` hands it back)
# The imports below come after the guard on purpose (E402 on each).

import argparse  # noqa: E402
import sys  # noqa: E402

from .. import trust  # noqa: E402
from . import (  # noqa: E402
    belief,
    cases,
    compare,
    completion,
    data,
    emsgd,
    evaluate,
    export,
    geometry,
    leaderboard,
    llm,
    lm_eval_tasks,
    models,
    plot,
    profile,
    run,
    score,
    site,
    sweep,
    tasks,
    train,
    tunnels,
)
from .args import add_trust_flag  # noqa: E402
from .errors import add_debug_flag, run_command  # noqa: E402

# In the order `bayesbench --help` lists them.
COMMANDS = (run, train, evaluate, cases, leaderboard, compare, export, plot, profile, models, tasks, score, sweep,
            tunnels, emsgd, geometry, belief, data, site, llm, lm_eval_tasks, completion)

EPILOG = """Results go to an SQLite store (default ./results/bayesbench.sqlite; --db or $BAYESBENCH_DB).
Metrics are in bits over the scored positions of a fixed evaluation set: entropy MAE = mean |H(model) - H(Bayes)|,
positional entropy MAE = mean over positions of |mean H(model) - mean H(Bayes)| (the authors' bijection metric),
KL = mean KL(Bayes || model) (docs/science.md#metrics). Run `bayesbench COMMAND --help` for each command's options."""


class VersionAction(argparse.Action):
    """`--version`: the package version and commit (running/provenance.py), read only when asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib.util import find_spec

        from ..running.provenance import describe

        built = find_spec("bayesbench._C") is not None  # found, not loaded: no torch import here
        print(describe())
        print("compiled extension bayesbench._C: " + ("installed" if built else
              "not built (the oracle runs on its PyTorch reference; docs/install.md)"))
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bayesbench",
        description="Does your sequence model compute the exact Bayes posterior? Train architectures on "
                    "Bayesian wind tunnels and score them against the exact posterior.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=VersionAction, help="print the version, the commit and whether the "
                        "compiled extension is installed, and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    add_debug_flag(parser, sub)
    add_trust_flag(parser, sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run a command; a failure is one line on stderr and a non-zero exit (`cli/errors.py`).
    Without `argv` (the program itself) an interrupted command exits at once."""
    program, argv = argv is None, sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    with trust.guard(args.trust_code, typed=argv):  # outside code named in a file: only with --trust-code
        return run_command(args.handler, args, argv, exit_now=program)
