"""The `bayesbench` command."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bayesbench",
        description="Does your sequence model compute the exact Bayes posterior?",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    tunnels = sub.add_parser("tunnels", help="sample every wind tunnel and print its exact posterior entropy curve")
    tunnels.add_argument("--batch-size", type=int, default=2048, help="sequences per tunnel (default 2048)")
    tunnels.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "tunnels":
        from .demo import print_tunnel_curves

        print_tunnel_curves(args.batch_size, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
