"""Draw curves written by scripts/case_curves.py: per run, the positional entropy MAE at the value
positions and the KL at repeated and at new keys against the training step, one line per seed,
with the uniform floor and the 0.1-bit threshold (docs/reproducing.md).

    PYTHONPATH=. python scripts/plot_case_curves.py --out docs/img/bijection_authors_training.png \\
        --title "6000 steps of 64, lr 5e-4" "plain transformer=plain.json" "their head and targets=authors.json"
"""

from __future__ import annotations

import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PANELS = (("entropy_mae_positional", "positional entropy MAE, value positions"),
          ("kl:repeated", "KL at repeated keys (retrieval)"), ("kl:new", "KL at new keys (elimination)"))
FLOORS = {"entropy_mae_positional": 1.2502, "kl:repeated": 3.0, "kl:new": 0.464}  # uniform predictor, 4096 seqs


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="LABEL=FILE.json, one per run")
    p.add_argument("--out", required=True)
    p.add_argument("--title", default="", help="what the runs share (e.g. their training), put in the title")
    a = p.parse_args(argv)
    fig, axes = plt.subplots(1, len(PANELS), figsize=(4.6 * len(PANELS), 3.8), constrained_layout=True)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, spec in enumerate(a.runs):
        label, _, path = spec.rpartition("=")
        with open(path) as f:
            run = json.load(f)
        steps = [row["step"] for row in run["curve"]]
        for ax, (metric, _) in zip(axes, PANELS):
            for j, seed in enumerate(run["seeds"]):
                ys = [row["members"][j][metric] for row in run["curve"]]
                ax.plot(steps, ys, color=colours[i % len(colours)], marker="o", ms=2.5, lw=1.2,
                        label=label if j == 0 else None, alpha=0.9)
    for ax, (metric, title) in zip(axes, PANELS):
        ax.axhline(FLOORS[metric], color="grey", ls=":", lw=1, label="uniform predictor")
        if metric == "entropy_mae_positional":
            ax.axhline(0.1, color="black", ls="--", lw=0.8, label="0.1 bits")
        ax.set_yscale("symlog", linthresh=0.05)
        ax.set_ylim(0, None)
        ax.set_xlabel("training step")
        ax.set_ylabel("bits")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("quick bijection (V = 8, 7 pairs), 2-layer d = 64 transformer, seeds 0-2 (one line each)"
                 + (f", {a.title}" if a.title else "") + "; 1024 evaluation sequences; 0 is Bayes", fontsize=9)
    fig.savefig(a.out, dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
