"""Write the summary of a store that docs/leaderboard.md quotes (docs/numbers/*.json).

    python scripts/docs_numbers.py --db results/bayesbench.sqlite --measured 2026-12-03 \\
        --command "make run" --out docs/numbers/quick_2026-12-03.json

The file holds, per ranking metric (entropy MAE, positional entropy MAE), the leaderboard's rows as
`bayesbench.leaderboard` returns them (the schema of `bayesbench leaderboard --json`'s "rows",
docs/results.md#the-leaderboard-as-json), cut to the keys the docs quote: the task, evaluation,
architecture and the settings that set a row apart, the parameters, the state size, steps and seeds,
every metric's mean over seeds, the ranked metric's per-seed values and its 95% interval over seeds.
tests/test_docs_numbers.py checks that every number the tables of docs/leaderboard.md quote equals
the file's, so a re-run of the quick leaderboard refreshed with this script either leaves the docs
true or fails that test, naming each number to update.
"""

from __future__ import annotations

import argparse
import json
import sys

KEYS = ("task", "eval", "arch", "settings", "params", "state_floats", "steps", "seeds", "entropy_mae_bits",
        "entropy_mae_positional_bits", "kl_bits", "metric", "per_seed_bits", "ci_bits", "at_floor")
METRICS = ("entropy_mae", "entropy_mae_positional")


def summary(db: str, *, measured: str, command: str) -> dict:
    """The store's leaderboard rows per metric, cut to `KEYS`, with when and how they were measured."""
    import bayesbench

    boards = {m: [{k: row[k] for k in KEYS} for row in bayesbench.leaderboard(db, metric=m)] for m in METRICS}
    return {"measured": measured, "command": command, "written_by": "scripts/docs_numbers.py",
            "bayesbench": bayesbench.__version__, "boards": boards}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--db", required=True, help="the results store of the run the docs quote")
    p.add_argument("--measured", required=True, help="when the run was made (YYYY-MM-DD), as the docs name it")
    p.add_argument("--command", default="make run", help="the command that made it (default: make run)")
    p.add_argument("--out", required=True, help="the JSON file to write (docs/numbers/<run>.json)")
    args = p.parse_args(argv)
    try:
        doc = summary(args.db, measured=args.measured, command=args.command)
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    except ValueError as err:
        print(f"docs_numbers.py: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"docs_numbers.py: --out {args.out}: {err.strerror}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}: {sum(len(rows) for rows in doc['boards'].values())} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
