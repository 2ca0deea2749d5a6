"""Write the small summaries of profile studies that docs/dynamics.md quotes (docs/data/dynamics_*.json).

    python scripts/dynamics_numbers.py STUDY --db STORE --out docs/data/dynamics_X.json \\
        [--before BEFORE.json] [--command "..."] [--wall-s S]
    python scripts/dynamics_numbers.py self-term 16=STUDY@STORE 64=STUDY@STORE --out FILE [--command "..."]

The numbers come from `bayesbench.dynamics.profile.numbers` (what each file holds is said there).
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str]) -> int:
    from bayesbench.dynamics.profile.numbers import write_self_term, write_study_numbers

    if argv[:1] == ["self-term"]:
        p = argparse.ArgumentParser(description="the self-influence at several batch sizes")
        p.add_argument("runs", nargs="+", help="BATCH=STUDY@STORE")
        p.add_argument("--out", required=True)
        p.add_argument("--command", default="")
        opts = p.parse_args(argv[1:])
        runs = {}
        for item in opts.runs:
            batch, _, rest = item.partition("=")
            study, _, db = rest.partition("@")
            runs[int(batch)] = (study, db or None)
        write_self_term(runs, opts.out, opts.command)
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("study")
    p.add_argument("--db", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--before", help="a JSON list of the same study's verdicts under the previous instruments")
    p.add_argument("--command", default="")
    p.add_argument("--wall-s", type=float)
    opts = p.parse_args(argv)
    write_study_numbers(opts.study, opts.db, opts.out, before=opts.before, command=opts.command, wall_s=opts.wall_s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
