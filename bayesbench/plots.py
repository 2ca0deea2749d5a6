"""Figures from the results store (matplotlib, Agg backend: PNG files, no display needed).

One PNG per (task, evaluation): left, each architecture's predictive entropy per scored
position (mean over sequences, one thin line per seed) against the Bayes entropy; right, the
entropy error |H(model) - H(Bayes)| per position on a log scale.
"""

from __future__ import annotations

import os
import re

from .leaderboard import select_rows


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9=.-]+", "_", text).strip("_")


def plot(db: str | None = None, out_dir: str = "results/plots", *, task: str | None = None,
         group_id: str | None = None) -> list[str]:
    """Write the figures of the latest run of each (task, arch); returns the PNG paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = select_rows(db, task=task, group_id=group_id)
    panels: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        for name in (r["curves"] or {}):
            panels.setdefault((r["task_label"], name), []).append(r)
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for (label, name), group in sorted(panels.items()):
        fig, (ax_h, ax_e) = plt.subplots(1, 2, figsize=(11, 4.2))
        archs = sorted({r["arch"] for r in group})
        bayes = None
        for i, arch in enumerate(archs):
            color = colors[i % len(colors)]
            for j, r in enumerate(x for x in group if x["arch"] == arch):
                c = r["curves"][name]
                x = list(range(1, len(c["position"]) + 1))
                bayes = (x, c["bayes_entropy"])
                lab = arch if j == 0 else None
                ax_h.plot(x, c["model_entropy"], color=color, lw=1.2, alpha=0.8, label=lab)
                ax_e.semilogy(x, [max(v, 1e-6) for v in c["entropy_mae"]], color=color, lw=1.2, alpha=0.8, label=lab)
        if bayes is not None:
            ax_h.plot(*bayes, "k--", lw=2, label="Bayes (exact)")
        ax_h.set(xlabel="scored position (1 = first prediction)", ylabel="entropy (bits)",
                 title=f"{label}, eval {name}: predictive entropy")
        ax_e.set(xlabel="scored position", ylabel="|H(model) - H(Bayes)| (bits)",
                 title="entropy error per position (one line per seed)")
        for ax in (ax_h, ax_e):
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(out_dir, f"{_slug(label)}_{_slug(name)}.png")
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths
