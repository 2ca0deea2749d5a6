"""Writing figures: matplotlib with the Agg backend (PNG files, no display needed), the pieces
every figure of the package shares, and the one tail every figure ends with (`save`).

A figure must read without the code (tests/test_figures.py checks every one): its title and the
setting it was measured on (`heading`: task, evaluation set and size, seeds, steps) fit inside it
above short panel titles; every axis names its quantity and unit; each kind of drawn series has
one legend entry (`unique_legend`: duplicates of a label shown once); reference lines carry labels; and
a log axis over less than two decades reads in plain decimals (`save` sees to it), not
"3.4x10^-1"."""

from __future__ import annotations

import math
import os
import textwrap

NARROW_DECADES = 2.0  # a log axis spanning fewer decades than this gets decimal tick labels


def pyplot():
    """`matplotlib.pyplot`, on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float], **kwargs):
    """`plt.subplots` with the constrained layout (titles, labels, colour bars and outside legends
    are fitted inside the canvas)."""
    return pyplot().subplots(nrows, ncols, figsize=figsize, layout="constrained", **kwargs)


def heading(fig, title: str, *facts: str, fontsize: float = 10) -> None:
    """The figure's title and, in smaller type under it, what it was measured on (each fact
    wrapped to the figure's width)."""
    width = max(40, int(fig.get_figwidth() * 72 / (0.6 * fontsize)))
    lines = [textwrap.fill(t, width, break_on_hyphens=False) for t in (title, *facts) if t]
    fig.suptitle("\n".join(lines), fontsize=fontsize)


def unique_legend(target, *, where: str | None = None, **kwargs):
    """A legend on `target` (an Axes, or a Figure: the labelled artists of all its axes) with one
    entry per label (seed lines drawn under one label appear once). `where`: a location, for a
    figure e.g. "outside lower center" (under the panels, in up to `ncols` columns: default 3, or 2
    where a label is longer than 40 characters, so that a row of three long labels never runs past
    the canvas)."""
    axes = target.axes if hasattr(target, "legends") else [target]
    handles: dict[str, object] = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    if not handles:
        return None
    kwargs.setdefault("fontsize", 8)
    if where is not None:
        kwargs["loc"] = where
        if where.startswith("outside lower") or where.startswith("outside upper"):
            kwargs.setdefault("ncols", min(3 if max(len(k) for k in handles) <= 40 else 2, len(handles)))
    return target.legend(list(handles.values()), list(handles), **kwargs)


def mean_and_range(rows: list[list[float]]) -> tuple[list[float], list[float], list[float]]:
    """(mean, min, max) over rows (one per seed) at each column, NaNs left out of each column."""
    cols = [[v for v in col if v is not None and math.isfinite(v)] for col in zip(*rows)]
    return ([sum(c) / len(c) if c else math.nan for c in cols], [min(c) if c else math.nan for c in cols],
            [max(c) if c else math.nan for c in cols])


def count(n: int, what: str) -> str:
    """'1 seed', '3 seeds'."""
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _decimal_formatter(trim: bool):
    from matplotlib import ticker

    class Decimal(ticker.Formatter):
        """Plain decimals with as many places as tell the ticks apart (each within 1% of its value)."""

        def format_ticks(self, values):
            values = list(values)
            for places in range(0, 12):
                out = [f"{v:.{places}f}" for v in values]
                if len(set(out)) == len(out) and all(abs(float(o) - v) <= 0.01 * abs(v) for o, v in zip(out, values)):
                    break
            if trim:
                out = [o.rstrip("0").rstrip(".") if "." in o else o for o in out]
            return out

        def __call__(self, x, pos=None):
            return self.format_ticks([x])[0]

    return Decimal()


def decimal_log_ticks(ax) -> None:
    """On each log axis of `ax` spanning fewer than NARROW_DECADES decades: plain decimal tick
    labels, at 1-2-5 steps over more than a decade, at round linear steps within one."""
    from matplotlib import ticker

    for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        lo, hi = sorted(limits)
        if axis.get_scale() != "log" or not lo > 0 or not math.isfinite(hi):
            continue
        decades = math.log10(hi / lo)
        if decades >= NARROW_DECADES:
            continue
        if decades > 1:
            axis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        else:
            axis.set_major_locator(ticker.MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
            axis.set_minor_locator(ticker.NullLocator())
        axis.set_major_formatter(_decimal_formatter(trim=decades > 1))
        axis.set_minor_formatter(ticker.NullFormatter())


def plain_text(fig) -> None:
    """Every text of `fig` but its tick labels drawn as written: no title, label or legend of the
    package uses matplotlib's mathtext, and a stored name or label holding '$' ('m$\\badcmd{$') is
    text to show, not math to parse (which failed the whole plot). Numeric tick labels keep their
    math (a log axis's '10^-1', written at draw time); named ones (architectures, tasks) do not."""
    from matplotlib.text import Text
    from matplotlib.ticker import LogFormatter, ScalarFormatter

    numeric: set[int] = set()  # the ids of the number labels
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            labels = [t for tick in axis.get_major_ticks() + axis.get_minor_ticks() for t in (tick.label1, tick.label2)]
            if isinstance(axis.get_major_formatter(), (ScalarFormatter, LogFormatter)):  # numbers, not names
                numeric.update(id(t) for t in (*labels, axis.offsetText))
    for text in fig.findobj(Text):
        if id(text) not in numeric:
            text.set_parse_math(False)


def save(fig, path: str, *, dpi: int = 120, grid: bool = False, legend: bool = False, tight: bool = True,
         **savefig) -> str:
    """Finish and write a figure, then free it; returns `path`.

    grid: a light grid (alpha 0.3) on every axis; legend: a legend (font size 8, one entry per
    label) on every axis that has labelled artists; narrow log axes get decimal tick labels
    (`decimal_log_ticks`); tight: `fig.tight_layout()` first unless the figure has a layout
    engine (`subplots` gives the constrained one); `savefig` goes to `fig.savefig`. The PNG's
    folder is created if missing; a path without an extension gets '.png' (what matplotlib
    writes then), so the returned path is the file written."""
    if not os.path.splitext(path)[1]:
        path += ".png"
    for ax in fig.axes:
        if getattr(ax, "_colorbar", None) is not None:
            continue
        if grid:
            ax.grid(alpha=0.3)
        if legend:
            unique_legend(ax)
        decimal_log_ticks(ax)
    plain_text(fig)  # after the legends are made
    if tight and fig.get_layout_engine() is None:
        fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=dpi, **savefig)
    pyplot().close(fig)
    return path
