"""Writing figures: matplotlib with the Agg backend (PNG files, no display needed) and the one
tail every figure of the package ends with (`save`)."""

from __future__ import annotations

import os


def pyplot():
    """`matplotlib.pyplot`, on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, path: str, *, dpi: int = 120, grid: bool = False, legend: bool = False, tight: bool = True,
         **savefig) -> str:
    """Finish and write a figure, then free it; returns `path`.

    grid: a light grid (alpha 0.3) on every axis; legend: a legend (font size 8) on every axis;
    tight: `fig.tight_layout()` first; `savefig` goes to `fig.savefig` (e.g. bbox_inches).
    The PNG's folder is created if missing; a path without an extension gets '.png' (what
    matplotlib writes then), so the returned path is the file written."""
    if not os.path.splitext(path)[1]:
        path += ".png"
    for ax in fig.axes if grid or legend else ():
        if grid:
            ax.grid(alpha=0.3)
        if legend:
            ax.legend(fontsize=8)
    if tight:
        fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=dpi, **savefig)
    pyplot().close(fig)
    return path
