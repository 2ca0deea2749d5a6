"""Every figure the suite draws, rendered from tiny real runs and read back from its matplotlib
objects before it is written: a reader must understand it without the code.

The commands run once (module fixture): `run` (bijection and HMM, two architectures, two seeds,
a few steps), `plot`, `plot --curves`, `compare --plot`, `geometry`, `emsgd` and `profile`. Each
plotting module's `save` is wrapped to keep the Figure it writes. The checks, over every figure:
titles and axis labels lie inside the canvas and no title runs into another title or label;
every axes with data names both its axes; colour bars are labelled; every drawn line (reference
lines too) has a legend entry, several series never go without a legend, and a band is said to be
one; a log axis over less than two decades reads in plain decimals; and the figure states what it
was measured on (seeds, steps, evaluation sets and their sizes)."""

from __future__ import annotations

import os
import re

import pytest
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.container import BarContainer, ErrorbarContainer

from bayesbench.cli import main

STEPS, EVAL, CURVE = 4, 32, 32  # training steps, evaluation and curve sequences of the fixture's runs
GEO_SEQ, PROFILE_STEPS, PROFILE_EVAL = 32, 12, 32
EMSGD_STEPS, EMSGD_T = 8, 30
PLOT_MODULES = ("bayesbench.report.plots", "bayesbench.dynamics.geometry.plots", "bayesbench.dynamics.emsgd.plots",
                "bayesbench.dynamics.profile.plots")


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """{figure kind: [Figure, ...]} of every figure the commands write (kind: the PNG's name
    without the run's or study's prefix)."""
    import importlib

    tmp = tmp_path_factory.mktemp("figures")
    db, runs, out = str(tmp / "r.sqlite"), str(tmp / "runs"), str(tmp / "plots")
    figures: list[tuple[str, object]] = []
    with pytest.MonkeyPatch.context() as mp:
        for name in PLOT_MODULES:
            module = importlib.import_module(name)
            original = module.save

            def keep(fig, path, *args, _save=original, **kwargs):
                figures.append((path, fig))
                return _save(fig, path, *args, **kwargs)

            mp.setattr(module, "save", keep)
        common = ["--db", db, "--no-progress"]
        assert main(["run", "--preset", "quick", "--tasks", "bijection", "hmm", "--archs", "transformer", "mlp",
                     "--seeds", "2", "--steps", str(STEPS), "--eval-sequences", str(EVAL), "--curve-sequences",
                     str(CURVE), "--runs-dir", runs, "--jobs", "1", *common]) == 0
        assert main(["plot", "--db", db, "--out", out]) == 0
        assert main(["plot", "--curves", "--db", db, "--out", out]) == 0
        from bayesbench.report.selection import select_rows
        bij = {r.arch: r.run_id for r in select_rows(db, task="bijection")}
        cmp = os.path.join(out, "cmp.png")
        assert main(["compare", bij["transformer"], bij["mlp"], "--db", db, "--plot", cmp]) == 0
        assert main(["geometry", bij["transformer"], "--sequences", str(GEO_SEQ), "--min-seeds", "2", "--db", db]) == 0
        assert main(["emsgd", "--seeds", "2", "--variant", "paper", "--length", str(EMSGD_T), "--steps",
                     str(EMSGD_STEPS), *common]) == 0
        assert main(["profile", "--steps", str(PROFILE_STEPS), "--every", "4", "--checkpoints", "3", "--eval-sequences",
                     str(PROFILE_EVAL), "--probe-sequences", "4", "--threads", "1", "--seeds", "0,1", "--runs-dir",
                     runs, *common]) == 0
    kinds: dict[str, list] = {}
    for path, fig in figures:
        name = os.path.basename(path)
        kind = re.sub(r"^profile-[0-9a-f]+_", "profile_", name)
        kind = re.sub(r"^(bijection|hmm)_.*?_(values_query|values|K=\d+|length_generalisation|curves_\w+)\.png$",
                      r"\1_\2.png", kind)
        kinds.setdefault(kind, []).append(fig)
    return kinds


EXPECTED = {
    "bijection_values.png", "bijection_values_query.png", "hmm_K=20.png", "hmm_K=30.png", "hmm_K=50.png",
    "hmm_length_generalisation.png", "bijection_curves_entropy_mae.png", "hmm_curves_entropy_mae.png", "cmp.png",
    "key_cosines.png", "attention_entropy_by_layer.png", "value_manifold.png", "ablations.png",
    "loss.png", "held_out_loss.png", "attention_heatmaps.png", "attention_entropy.png", "value_pca.png",
    "profile_attn_entropy.png", "profile_adv_abs_mean.png", "profile_adv_abs_max.png", "profile_ds_norm.png",
    "profile_value_update_mean.png", "profile_routing_law.png", "profile_frame_precision_steps.png",
    "profile_frame_precision_budget.png", "profile_map_velocity.png", "profile_movement_vs_jitter.png",
}


def _all(drawn):
    return [(kind, fig) for kind, figs in sorted(drawn.items()) for fig in figs]


def _renderer(fig):
    """Draw the figure as it was saved (`save` closed it: a fresh Agg canvas) and return the renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _texts(fig) -> str:
    """Every string the figure shows (titles, labels, legends, annotations, tick labels), joined."""
    from matplotlib.text import Text

    return "\n".join(t.get_text() for t in fig.findobj(Text) if t.get_visible() and t.get_text())


def _is_colorbar(ax) -> bool:
    return getattr(ax, "_colorbar", None) is not None


def _has_data(ax) -> bool:
    return bool(ax.get_lines() or ax.images or ax.collections or ax.patches)


def _titles(fig) -> list:
    out = [t for ax in fig.axes for t in (ax.title, ax._left_title, ax._right_title)]
    return [t for t in out + [fig._suptitle] if t is not None and t.get_visible() and t.get_text()]


def _labels(fig) -> list:
    out = [a.label for ax in fig.axes for a in (ax.xaxis, ax.yaxis)] + [fig._supxlabel, fig._supylabel]
    return [t for t in out if t is not None and t.get_visible() and t.get_text()]


def _problems(drawn, check) -> list[str]:
    bad = []
    for kind, fig in _all(drawn):
        bad += [f"{kind}: {p}" for p in check(fig)]
    return bad


def test_every_figure_type_is_rendered(drawn):
    assert set(drawn) == EXPECTED


def test_titles_and_labels_fit_inside_the_figure_and_do_not_overlap(drawn):
    def check(fig):
        r = _renderer(fig)
        canvas = fig.bbox
        out = []
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
        for t in _titles(fig) + _labels(fig) + legends:
            b = t.get_window_extent(r)
            if b.x0 < canvas.x0 - 1 or b.y0 < canvas.y0 - 1 or b.x1 > canvas.x1 + 1 or b.y1 > canvas.y1 + 1:
                out.append(f"{_name(t)} leaves the canvas ({b.x0:.0f}..{b.x1:.0f} x {b.y0:.0f}..{b.y1:.0f} "
                           f"in {canvas.width:.0f} x {canvas.height:.0f})")
        titles, labels = _titles(fig), _labels(fig)
        for i, t in enumerate(titles):
            for u in titles[i + 1:] + labels:
                if t.get_window_extent(r).overlaps(u.get_window_extent(r)):
                    out.append(f"{_name(t)} overlaps {_name(u)}")
        return out

    bad = _problems(drawn, check)
    assert not bad, "\n".join(bad)


def _name(t) -> str:
    text = t.get_text() if hasattr(t, "get_text") else "legend"
    return repr(text[:50])


def test_every_axes_with_data_names_both_axes(drawn):
    def check(fig):
        sup_x, sup_y = (t is not None and t.get_text() for t in (fig._supxlabel, fig._supylabel))
        out = []
        for i, ax in enumerate(fig.axes):
            if _is_colorbar(ax) or not _has_data(ax) and not any(_has_data(s) for s in _siblings(ax)):
                continue
            if not (sup_x or any(s.get_xlabel() for s in _siblings(ax))):
                out.append(f"axes {i} ({ax.get_title()[:40]!r}) has no x label")
            if not (sup_y or ax.get_ylabel()):
                out.append(f"axes {i} ({ax.get_title()[:40]!r}) has no y label")
        return out

    bad = _problems(drawn, check)
    assert not bad, "\n".join(bad)


def _siblings(ax) -> list:
    """ax and its twins (a twinx axis shares its x label)."""
    return list(ax._twinned_axes.get_siblings(ax))


def test_colour_bars_are_labelled_and_images_have_one(drawn):
    def check(fig):
        bars = [ax for ax in fig.axes if _is_colorbar(ax)]
        out = [f"colour bar {i} has no label" for i, ax in enumerate(bars)
               if not (ax._colorbar.ax.get_ylabel() or ax._colorbar.ax.get_xlabel())]
        if any(ax.images for ax in fig.axes) and not bars:
            out.append("images (heat maps) without a colour bar")
        return out

    bad = _problems(drawn, check)
    assert not bad, "\n".join(bad)


def _series(ax) -> list[tuple[str, object]]:
    """(label, artist) of each drawn series: lines (reference lines too), error-bar and bar groups,
    scatter collections; an error bar's caps and bar lines belong to its group."""
    parts = set()
    out = []
    for c in ax.containers:
        if isinstance(c, ErrorbarContainer):
            line, caps, bars = c.lines
            parts |= {id(x) for x in (line, *caps, *bars) if x is not None}
            out.append((c.get_label(), c))
        elif isinstance(c, BarContainer):
            parts |= {id(p) for p in c.patches}
            out.append((c.get_label(), c))
    out += [(line.get_label(), line) for line in ax.get_lines() if id(line) not in parts]
    out += [(c.get_label(), c) for c in ax.collections if isinstance(c, PathCollection)]
    return out


def test_every_line_has_a_legend_entry_and_bands_are_explained(drawn):
    def check(fig):
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
        entries = {t.get_text() for lg in legends for t in lg.get_texts()}
        out = []
        for i, ax in enumerate(fig.axes):
            if _is_colorbar(ax):
                continue
            series = _series(ax)
            for label, artist in series if len(series) > 1 else ():  # a lone series: its axes say what it is
                if label.startswith("_") or label not in entries:
                    kind = type(artist).__name__
                    out.append(f"axes {i} ({ax.get_title()[:40]!r}): a {kind} without a legend entry")
            if any(isinstance(c, PolyCollection) and c.get_label().startswith("_") for c in ax.collections):
                if "band" not in _texts(fig) and "shaded" not in _texts(fig):
                    out.append(f"axes {i}: a band that nothing explains")
        return out

    bad = _problems(drawn, check)
    assert not bad, "\n".join(bad[:40]) + (f"\n... {len(bad) - 40} more" if len(bad) > 40 else "")


def _tick_labels(axis, lo: float, hi: float) -> list[str]:
    out = []
    for tick in axis.get_major_ticks() + axis.get_minor_ticks():
        if lo <= tick.get_loc() <= hi:
            out += [t.get_text() for t in (tick.label1, tick.label2) if t.get_visible() and t.get_text()]
    return out


def test_narrow_log_axes_read_in_plain_decimals(drawn):
    def check(fig):
        _renderer(fig)
        out = []
        for i, ax in enumerate(fig.axes):
            for axis, (lo, hi) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
                if axis.get_scale() != "log" or lo <= 0 or _is_colorbar(ax):
                    continue
                lo, hi = sorted((lo, hi))
                if hi / lo >= 100:
                    continue
                labels = _tick_labels(axis, lo, hi)
                sci = [t for t in labels if "10^" in t or "times" in t or "e-" in t]
                if sci or len(labels) < 2:
                    out.append(f"axes {i} ({ax.get_title()[:40]!r}): log axis over {lo:.3g}..{hi:.3g} labelled "
                               f"{labels}")
        return out

    bad = _problems(drawn, check)
    assert not bad, "\n".join(bad)


def test_every_figure_says_how_many_seeds(drawn):
    bad = [kind for kind, fig in _all(drawn) if not re.search(r"\b2 seeds\b|seeds? \[?\d", _texts(fig))]
    assert not bad, f"figures that do not say which or how many seeds: {bad}"


# What each figure must state it was measured on (beyond the seeds).
FACTS = {
    "bijection_values.png": ("values", f"{EVAL} sequences", f"{STEPS} training steps"),
    "bijection_values_query.png": ("values+query", f"{EVAL} sequences", f"{STEPS} training steps"),
    "hmm_K=20.png": ("K=20", f"{EVAL} sequences", f"{STEPS} training steps"),
    "hmm_K=50.png": ("K=50", f"{EVAL} sequences", f"{STEPS} training steps"),
    "hmm_length_generalisation.png": (f"{EVAL} sequences", f"{STEPS} training steps", "trained"),
    "bijection_curves_entropy_mae.png": (f"{CURVE}", "sequences"),
    "cmp.png": (f"{CURVE}", "sequences"),
    "key_cosines.png": ("bijection", f"{STEPS} training steps", f"{GEO_SEQ} evaluation sequences"),
    "attention_entropy_by_layer.png": ("bijection", f"{STEPS} training steps", f"{GEO_SEQ} evaluation sequences"),
    "value_manifold.png": ("bijection", f"{STEPS} training steps", f"{GEO_SEQ} evaluation sequences"),
    "ablations.png": ("bijection", f"{STEPS} training steps", f"{GEO_SEQ} evaluation sequences"),
    "loss.png": (f"T={EMSGD_T}", f"{EMSGD_STEPS} full-batch updates"),
    "held_out_loss.png": (f"T={EMSGD_T}", f"{EMSGD_STEPS} full-batch updates"),
    "attention_heatmaps.png": (f"T={EMSGD_T}", "step"),
    "attention_entropy.png": (f"T={EMSGD_T}", f"{EMSGD_STEPS} full-batch updates"),
    "value_pca.png": (f"T={EMSGD_T}", "step"),
    "profile_attn_entropy.png": ("bijection", f"{PROFILE_STEPS} training steps",
                                 f"{PROFILE_EVAL} evaluation sequences"),
    "profile_routing_law.png": ("bijection", f"{PROFILE_STEPS} training steps"),
    "profile_frame_precision_budget.png": ("bijection", f"{PROFILE_STEPS} training steps",
                                           f"{PROFILE_EVAL} evaluation sequences"),
    "profile_map_velocity.png": ("bijection", f"{PROFILE_STEPS} training steps"),
}


@pytest.mark.parametrize("kind", sorted(FACTS))
def test_figure_states_what_it_was_measured_on(drawn, kind):
    for fig in drawn[kind]:
        text = " ".join(_texts(fig).split())  # a heading wraps between words
        missing = [f for f in FACTS[kind] if f not in text]
        assert not missing, f"{kind} does not state {missing}; its text:\n{text}"


def _legend_texts(fig) -> list[str]:
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    return [t.get_text() for lg in legends for t in lg.get_texts()]


@pytest.mark.parametrize("kind", ["bijection_values.png", "hmm_K=20.png", "hmm_K=50.png"])
def test_per_position_figures_show_the_uniform_floor_and_bands_over_seeds(drawn, kind):
    (fig,) = drawn[kind]
    data = [ax for ax in fig.axes if _has_data(ax)]
    assert len(data) == 2
    for ax in data:
        labels = [line.get_label() for line in ax.get_lines()]
        assert any("uniform" in x for x in labels), f"{ax.get_title()!r}: no uniform-floor line in {labels}"
        assert any(isinstance(c, PolyCollection) for c in ax.collections), f"{ax.get_title()!r}: no band over seeds"


def test_the_bijection_query_position_is_marked(drawn):
    (fig,) = drawn["bijection_values_query.png"]
    (with_query,) = [fig]
    assert any("query" in t.lower() for t in _legend_texts(with_query) + [
        t.get_text() for ax in fig.axes for t in ax.texts + ax.get_xticklabels()]), "no mark at the query position"
    (plain,) = drawn["bijection_values.png"]
    assert not any("query" in t.lower() for t in _legend_texts(plain)), "a query mark where no query is scored"


def test_ablation_bars_carry_intervals_over_seeds_and_the_seeds(drawn):
    (fig,) = drawn["ablations.png"]
    for ax in (a for a in fig.axes if a.patches):
        assert any(isinstance(c, ErrorbarContainer) for c in ax.containers), f"{ax.get_title()!r}: no error bars"
        points = [c for c in ax.collections if isinstance(c, PathCollection)]
        assert points and sum(len(c.get_offsets()) for c in points) >= 2 * len(ax.patches), "seeds not drawn"

