"""`bayesbench site`: the leaderboard as a static web site, built from the results store.

No server and no network: plain HTML pages, one stylesheet and one small script (shipped in
`report/static/`, copied beside the pages) and PNG figures, all in one folder that opens from
disk (`file://`) and can be copied anywhere. What it holds (docs/site.md):

- `index.html`: the leaderboard per task and evaluation set, as `bayesbench leaderboard`
  computes it (`report.leaderboard.aggregate`: seeds pooled per task, eval, architecture and
  configuration; rows ranked only within one evaluation set, `block_key`): every metric's mean
  over seeds with its 95% t-interval over seeds, the per-seed values, the settings in which rows
  of one architecture differ (`differing_settings`), the learning-curve statistics, and the
  uniform and context-ignoring floors of the set below each table. Every column sorts by a click
  on its header; a filter box hides rows without the words typed. Rows whose configuration says
  they were tuned (`config["tuning"]`) are shown in a table of their own ("tuned") beside the
  untuned one. Under each evaluation set, its per-position figure (model vs Bayes entropy,
  error per position) and, under the trained one, the task's learning curves (the latest run
  of each architecture).
- `runs/<run id>.html`: each run's page, linked from its row: per seed, every evaluation's
  metrics with their intervals over sequences and the floors, the run's learning curves and
  per-position figures, and its configuration (its run.json, also written beside the page).
- `dynamics.html`: the figures of the dynamics studies in the store (profile, geometry, EM vs
  SGD) that exist on disk, with each study's headline.

The figures are the existing figure code's PNGs (`report.plots`): the same figures `bayesbench
plot` draws, checked for headings, labelled axes and legends by tests/test_figures.py, each
stating its evaluation set, steps and seeds, so a figure read on the site reads the same as in a
report. A figure is named by a hash of what it draws (the records, the kind of figure), and
one the previous build of the folder already drew is copied rather than drawn again.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import html
import json
import math
import os
import shutil
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from .. import __version__
from ..checks import file_id, inside
from ..metric_table import final_metrics

if TYPE_CHECKING:
    from .rows import Row

MARKER = ".bayesbench-site"  # a built site's marker: lists the files a rebuild may delete (running/outfolder.py)
STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
ASSETS = ("site.css", "site.js")
FIGURE_VERSION = 1  # part of every figure's name: raise it when the figures drawn change


def esc(x) -> str:
    return html.escape(str(x), quote=True)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-").lower() or "x"


def _num(x) -> str:
    """A number for data-value (sorting): 'NaN' when missing."""
    return "NaN" if x is None or (isinstance(x, float) and not math.isfinite(x)) else repr(float(x))


# ---------------------------------------------------------------- figures


class Figures:
    """PNG figures under `folder`, named by a hash of what they draw; a figure the previous build
    (`previous`) drew is copied instead of drawn again."""

    def __init__(self, folder: str, previous: str | None) -> None:
        self.folder, self.previous = folder, previous
        self.drawn = self.copied = 0
        os.makedirs(folder, exist_ok=True)

    def get(self, kind: str, records: list, draw, *extra) -> str | None:
        """The file name of figure `kind` of `records`, drawn by `draw(path)` unless it exists."""
        from ..store.database import to_row

        content = json.dumps([FIGURE_VERSION, kind, extra,
                              [[to_row(r), None if r.learning_curve is None else dataclasses.asdict(r.learning_curve)]
                               for r in records]], sort_keys=True, default=str)
        name = f"{_slug(kind)}-{hashlib.sha1(content.encode()).hexdigest()[:16]}.png"
        path = os.path.join(self.folder, name)
        if os.path.exists(path):
            return name
        old = os.path.join(self.previous, name) if self.previous else None
        if old and os.path.isfile(old):
            shutil.copyfile(old, path)
            self.copied += 1
            return name
        drawn = draw(path)
        if drawn is None:
            return None
        self.drawn += 1
        return name


def _figure(src: str, caption: str) -> str:
    return (f'<figure><img src="{esc(src)}" alt="{esc(caption)}" loading="lazy">'
            f'<figcaption>{esc(caption)}</figcaption></figure>')


# ---------------------------------------------------------------- pages


def _page(title: str, body: str, root: str = "") -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{esc(title)}</title>\n<link rel=\"stylesheet\" href=\"{root}assets/site.css\">\n"
            f"<script src=\"{root}assets/site.js\"></script>\n</head>\n<body>\n{body}\n</body>\n</html>\n")


def _metric_names() -> dict:
    from .rows import short
    return {m: short(m) for m in final_metrics()}


def _definitions(continuous: bool = False) -> str:
    """Every page's footer: what the numbers mean (`report.notes`, the same definitions as the
    notes under the terminal table), for the site's ranking (entropy MAE, the default threshold)."""
    from .notes import TRAINED_NOTE, metric_definitions, site_notes
    from .rows import DEFAULT_THRESHOLD
    items = "".join(f"<li><b>{esc(label)}</b> ({esc(m)}) = {esc(what)}</li>" for m, label, what in metric_definitions())
    # the notes are text: <, > and & escaped (quotes need none in an element's text)
    items += "".join(f"<li>{html.escape(note, quote=False)}</li>"
                     for note in site_notes("entropy_mae", DEFAULT_THRESHOLD, continuous=continuous))
    return ("<footer><p>Every metric is in bits (log base 2), over the scored positions of the task's fixed "
            "evaluation set (docs/science.md#metrics):</p><ul>" + items +
            f"<li>{esc(TRAINED_NOTE)}.</li></ul><p>bayesbench {esc(__version__)}</p></footer>")


def _tuned(row: Row) -> bool:
    return any((r.config or {}).get("tuning") is not None for r in row.records)


def _mean_cell(row: Row, metric: str) -> str:
    from .leaderboard import fmt_bits
    from .rows import seed_interval
    mean = row.means[metric]
    if not math.isfinite(mean):
        return '<td class="num" data-value="NaN">diverged (every seed)</td>' if metric in row.values else \
            '<td class="num" data-value="NaN">-</td>'
    lo, hi = seed_interval(row.values[metric])
    ci = f' <span class="ci">[{fmt_bits(max(lo, 0.0))}, {fmt_bits(hi)}]</span>' if math.isfinite(lo) else ""
    return f'<td class="num" data-value="{_num(mean)}">{fmt_bits(mean)}{ci}</td>'


def _reach_value(row: Row) -> float:
    r = row.reach
    if r is None:
        return math.nan
    geo = r.geometric()
    if geo is not None:
        return geo[0]
    med = r.median()
    return med if med is not None else math.inf


def _run_link(run_id: str, text: str, root: str = "") -> str:
    return f'<a href="{root}runs/{esc(run_id)}.html">{esc(text)}</a>'


def _row(row: Row, best: float, settings: str | None) -> str:
    from .leaderboard import improving_cell, params_cell, per_seed_cell, reach_cell, row_marks, steps_cell, wall_cell

    runs = sorted({r.run_id for r in row.records}, key=lambda run: [r.created_at or "" for r in row.records
                                                                  if r.run_id == run][-1])
    members = " ".join(f"{r.run_id}:{r.seed}" for r in row.records)
    marks = row_marks(row, "entropy_mae")
    arch = _run_link(runs[-1], row.arch) + (f'<span class="mark">{esc(marks)}</span>' if marks else "")
    seeds = f"{len(row.seeds)}: {','.join(map(str, row.seeds))}"
    if len(runs) > 1:  # each run told apart: a run id cut to 12 characters, unless that makes two alike
        cut = 12 if len({run[:12] for run in runs}) == len(runs) else None
        seeds += " in runs " + ", ".join(_run_link(run, run[:cut]) for run in runs)
    mean = row.means["entropy_mae"]
    ratio = mean / best if math.isfinite(mean) and 0 < best < math.inf else math.nan
    steps, wall = steps_cell(row), wall_cell(row)
    cells = [f'<td class="arch" data-value="{esc(row.arch)}">{arch}</td>']
    if settings is not None:
        cells.append(f'<td class="settings">{esc(settings)}</td>')
    cells += [f'<td class="num" data-value="{row.params}">{params_cell(row)}</td>',
              f'<td class="num" data-value="{row.steps if steps != "-" else "NaN"}">{steps}</td>',
              f'<td class="num" data-value="{_num(row.wall_s) if wall != "-" else "NaN"}">{wall}</td>',
              f'<td class="num seeds" data-value="{len(row.seeds)}">{seeds}</td>']
    cells += [_mean_cell(row, m) for m in final_metrics()]
    cells += [f'<td class="num wrap">{esc(per_seed_cell(row, "entropy_mae"))}</td>',
              f'<td class="num wrap" data-value="{_num(_reach_value(row))}">{esc(reach_cell(row.reach))}</td>',
              f'<td class="num">{esc(improving_cell(row.improving))}</td>',
              f'<td class="num" data-value="{_num(ratio)}">{f"{ratio:.1f}x" if math.isfinite(ratio) else "-"}</td>']
    return f'<tr data-members="{esc(members)}">' + "".join(cells) + "</tr>"


def _table(rows: list[Row], best: float, differ: dict, caption: str) -> str:
    from .leaderboard import fmt_bits
    from .rows import DEFAULT_THRESHOLD, described
    names = _metric_names()
    with_settings = any(differ.get(id(row), "-") != "-" for row in rows)
    head = [("arch", "", "text", "", "the architecture; opens its run"),
            *([("settings", "that differ", "text", "", "the settings in which rows of this architecture differ")]
              if with_settings else []),
            ("params", "per member", "num", "num", "parameters of one ensemble member"),
            ("steps", "", "num", "num", "training steps"),
            ("wall", "s", "num", "num", "training wall time of the whole ensemble (seconds)"),
            ("seeds", "", "num", "num", "how many seeds the row pools, then which"),
            *((names[m], "bits, [95% CI over seeds]", "num", "num", described(m)) for m in final_metrics()),
            ("per seed", "entropy MAE", None, "num", "each seed's entropy MAE, in seed order"),
            ("steps to", f"entropy MAE \u2264 {DEFAULT_THRESHOLD:g} bits", "num", "num",
             "the first measured step from which a seed's learning curve stays at or below the threshold"),
            ("still improving", "seeds", None, "num",
             "how many seeds' learning curves still fall over their last fifth"),
            ("x best", "entropy MAE", "num", "num", "the row's mean over the best mean of its evaluation set")]
    ths = "".join(
        f'<th class="{cls}" scope="col" title="{esc(tip)}"'
        + (f' data-sort="{kind}"><button type="button">{esc(text)}</button>' if kind else f">{esc(text)}")
        + (f'<span class="unit">{esc(unit)}</span>' if unit else "") + "</th>" for text, unit, kind, cls, tip in head)
    body = "".join(_row(row, best, differ.get(id(row), "-") if with_settings else None) for row in rows)
    floors = next((row.floors for row in rows if row.floors), None) or {}
    foot = ""
    # a continuous tunnel's floors have their own names (prior, least_squares, ridge: issue 41)
    for name in ("uniform", "marginal", *(n for n in floors if n not in ("uniform", "marginal"))):
        scores = floors.get(name)
        if not scores:
            continue
        lead = 1 + with_settings
        foot += (f'<tr><td class="arch" colspan="{lead}">{name} (floor)</td>' + '<td class="num">-</td>' * 4
                 + "".join(f'<td class="num">{fmt_bits(scores[m].mean) if m in scores else "-"}</td>'
                           for m in final_metrics()) + '<td></td>' * 4 + "</tr>")
    return (f'<div class="scroll"><table class="board"><caption class="note">{esc(caption)}</caption>'
            f"<thead><tr>{ths}</tr></thead><tbody>{body}</tbody><tfoot>{foot}</tfoot></table></div>")


def _index(agg: list[Row], figures: Figures, db_label: str, n_records: int, studies: list[dict]) -> tuple[str, int]:
    """The leaderboard page and the number of tables on it."""
    from .leaderboard import differing_settings
    from .notes import has_continuous
    from .plots import learning_curves_figure, per_position_figure
    from .rows import block_key, set_marks
    from .selection import latest_runs

    differ = differing_settings(agg)
    marks = set_marks(agg)
    blocks: dict[tuple, list[Row]] = {}
    for row in agg:
        blocks.setdefault(block_key(row), []).append(row)
    tasks: dict[str, list[tuple]] = {}
    for key in blocks:
        tasks.setdefault(key[0], []).append(key)
    nav = "".join(f'<a href="#{_slug(t)}">{esc(t)}</a>' for t in tasks)
    if studies:
        nav += '<a href="dynamics.html">dynamics studies</a>'
    parts = ["<header><h1>bayesbench leaderboard</h1>",
             "<p class=\"lead\">Does a sequence model compute the exact Bayes posterior? Each row is an architecture "
             "trained on a Bayesian wind tunnel and scored against the exact posterior, in bits, on the task's fixed "
             "evaluation set: the mean over seeds with its 95% interval over seeds. Lower is better; 0 is Bayes. Click "
             "a column's header to sort by it; a row's architecture opens its run.</p>",
             f'<p class="meta">Built {esc(datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))} from '
             f"{esc(db_label)}: {n_records} stored seeds in {len(agg)} rows.</p>",
             f"<nav>{nav}</nav>",
             '<p class="filter"><label>Filter rows <input id="filter" type="search" placeholder="words in the row: '
             'arch, settings, ..."></label><span id="filter-count"></span></p></header><main>']
    n_tables = 0
    for task, keys in tasks.items():
        parts.append(f'<section id="{_slug(task)}"><h2>{esc(task)}</h2>')
        # a record is in one row per evaluation set it was scored on: each (run, seed) once
        task_records = list({(r.run_id, r.seed): r for key in keys for row in blocks[key]
                             for r in row.records}.values())
        curves = latest_runs([r for r in task_records if r.learning_curve is not None])
        curve_eval = next((r.learning_curve.eval for r in curves if r.learning_curve is not None), None)
        for key in keys:
            rows = blocks[key]
            first = rows[0]
            ev = first.records[0].evals[first.eval]
            means = [row.means["entropy_mae"] for row in rows]
            best = min((m for m in means if math.isfinite(m)), default=math.inf)
            trained = " (trained)" if first.primary else ""
            parts.append(f'<h3 id="{_slug(task + "-" + first.eval + marks[key])}">{esc(first.eval)}'
                         f"{esc(trained)}{esc(marks[key])}</h3>")
            set_ids = sorted({row.records[0].evals[row.eval].set_id or "not recorded" for row in rows})
            parts.append(f'<p class="set">Scored at {esc(first.positions)}; {first.n_sequences} sequences '
                         f"(set id {esc(', '.join(set_ids))}); task {esc(ev.task)}.</p>")
            untuned = [row for row in rows if not _tuned(row)]
            tuned = [row for row in rows if _tuned(row)]
            for label, group in (("untuned", untuned), ("tuned", tuned)):
                if not group:
                    continue
                if tuned:
                    parts.append(f"<h4>{label}</h4>")
                caption = (f"{task}, eval {first.eval}{marks[key]}: {len(group)} rows"
                           + (" whose configuration records a hyperparameter tuning" if label == "tuned" else ""))
                parts.append(_table(group, best, differ, caption))
                n_tables += 1
            block_records = latest_runs([r for row in rows for r in row.records])
            figs = []
            name = figures.get("per-position", block_records,
                               lambda path: per_position_figure(block_records, first.eval, path), first.eval)
            if name:
                figs.append(_figure(f"img/{name}", f"{task}, eval {first.eval}: model vs Bayes entropy and the "
                                                   "error per position (the latest run of each architecture)"))
            if first.primary and curves and curve_eval == first.eval:
                name = figures.get("curves", curves, lambda path: learning_curves_figure(curves, path))
                if name:
                    figs.append(_figure(f"img/{name}", f"{task}: learning curves, entropy MAE against the training "
                                                       "step (the latest run of each architecture)"))
            if figs:
                parts.append('<div class="figures">' + "".join(figs) + "</div>")
        parts.append("</section>")
    parts.append("</main>" + _definitions(has_continuous(agg)))
    return _page("bayesbench leaderboard", "\n".join(parts)), n_tables


def _summary_table(records: list, floors_too: bool = True) -> str:
    """Per evaluation and seed: every metric with its 95% interval over sequences, and the floors."""
    from .leaderboard import fmt_bits
    names = _metric_names()
    out = []
    for ev_name in records[0].evals:
        rows = []
        for r in records:
            ev = r.evals.get(ev_name)
            if ev is None:
                continue
            cells = [f"<td>{r.seed}</td>"]
            for m in final_metrics():
                s = getattr(ev, m)
                cells.append('<td class="num">-</td>' if s is None else
                             f'<td class="num">{fmt_bits(s.mean)} <span class="ci">[{fmt_bits(s.ci_low)}, '
                             f'{fmt_bits(s.ci_high)}]</span></td>')
            cells += [f'<td class="num">{ev.entropy_mae.n_sequences}</td>', f"<td>{esc(r.status)}</td>",
                      f"<td>{esc(r.stop_reason or '-')}</td>"]
            rows.append("<tr>" + "".join(cells) + "</tr>")
        ev = next(r.evals[ev_name] for r in records if ev_name in r.evals)
        foot = ""
        for name, scores in (ev.floors or {}).items() if floors_too else ():
            foot += (f"<tr><td>{esc(name)} (floor)</td>" + "".join(
                f'<td class="num">{fmt_bits(scores[m].mean) if m in scores else "-"}</td>' for m in final_metrics())
                + "<td></td><td></td><td></td></tr>")
        head = "".join(f'<th class="num">{esc(names[m])} (bits) [95% CI over sequences]</th>' for m in final_metrics())
        primary = " (trained)" if ev_name == records[0].primary else ""
        out.append(f"<h3>{esc(ev_name)}{esc(primary)}</h3><p class=\"set\">Scored at {esc(ev.positions)}; set id "
                   f"{esc(ev.set_id or 'not recorded')}; task {esc(ev.task)}.</p>"
                   f'<div class="scroll"><table><thead><tr><th>seed</th>{head}<th class="num">sequences</th>'
                   f"<th>status</th><th>stopped</th></tr></thead><tbody>{''.join(rows)}</tbody>"
                   f"<tfoot>{foot}</tfoot></table></div>")
    return "".join(out)


def _run_page(records: list, figures: Figures, anchor: str) -> tuple[str, dict]:
    """A run's page (its seeds' records) and its run.json document."""
    from ..store.run_file import run_document
    from .plots import learning_curves_figure, per_position_figure
    from .rows import trained_here

    first = records[0]
    doc = run_document(records)
    here = trained_here(first)  # a model scored from given weights or predictions: what its user stated
    facts = [("task", first.task_label), ("architecture", first.arch), ("run id", first.run_id),
             ("preset", first.preset or "-"), ("stored by", first.group_id or "-"),
             ("parameters per member", f"{first.params:,}" if first.params else "not given"),
             ("training steps", first.steps if first.steps or here else "not stated (scored here, not trained here)"),
             ("wall time (s)", "not measured (not trained here)" if not here else
              "n/a" if first.wall_s is None else f"{first.wall_s:.1f}"),
             ("seeds", ", ".join(str(r.seed) for r in records)
              + ("" if here else f" ({'labels' if len(records) > 1 else 'a label'} given when scored)")),
             ("first stored", first.created_at or "-")]
    dl = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts)
    figs = []
    name = figures.get("run-curves", records, lambda path: learning_curves_figure(records, path))
    if name:
        figs.append(_figure(f"../img/{name}", "learning curves: entropy MAE against the training step (line: mean "
                                              "over seeds, band: their range)"))
    for ev_name in first.curves:
        name = figures.get("run-per-position", records, lambda path, e=ev_name: per_position_figure(records, e, path),
                           ev_name)
        if name:
            figs.append(_figure(f"../img/{name}", f"eval {ev_name}: model vs Bayes entropy and the entropy error per "
                                                  "position"))
    body = [f'<header><nav><a href="../index.html#{esc(anchor)}">\u2190 leaderboard</a></nav>',
            f"<h1>{esc(first.arch)} on {esc(first.task_label)}</h1><dl class=\"facts\">{dl}</dl></header><main>",
            "<h2>Results</h2>", _summary_table(records),
            "<h2>Figures</h2>", '<div class="figures">' + ("".join(figs) or "<p>none (no curves stored)</p>")
            + "</div>",
            f'<h2>Configuration</h2><p class="note">The run file (<a href="{esc(first.run_id)}.json">run.json</a>): '
            "what was trained, where, by which code, and what came out per seed.</p>",
            f"<pre id=\"configuration\">{esc(json.dumps(doc, indent=1, default=str))}</pre></main>",
            _definitions(any("prior" in (ev.floors or {}) and "uniform" not in (ev.floors or {})
                             for r in records for ev in r.evals.values()))]
    return _page(f"{first.arch} on {first.task_label}: run {first.run_id}", "\n".join(body), "../"), doc


def _studies(db: str | None) -> list[dict]:
    """The store's studies with their config and summary, read without writing to the store (a
    site is built from a read-only store, and adds no table to a store of runs only)."""
    from ..dynamics.store import list_studies, read_study

    out = []
    for s in list_studies(path=db):
        study = read_study(s["study_id"], db) or {}
        out.append({**s, "config": study.get("config") or {}, "summary": study.get("summary") or {}})
    return out


def _dynamics_page(studies: list[dict], db: str | None, img: str) -> tuple[str, int]:
    """The dynamics studies' page, with the figures of each that exist on disk; returns (page, images)."""
    from ..dynamics.report import report_dir

    base = report_dir(db)
    parts = ['<header><nav><a href="index.html">\u2190 leaderboard</a></nav><h1>Dynamics studies</h1>',
             "<p class=\"lead\">The gradient-dynamics and geometry studies in the store (docs/dynamics.md, "
             "docs/geometry.md, docs/em_vs_sgd.md), each with its headline and the figures it drew.</p></header><main>"]
    images = 0
    for s in studies:
        sid = s["study_id"]
        found = sorted(glob.glob(os.path.join(base, sid, "*.png")))
        found += [f for f in (s["summary"].get("figures") or []) if isinstance(f, str) and f.endswith(".png")
                  and os.path.isfile(f) and f not in found]
        parts.append(f'<section id="{_slug(sid)}"><h2>{esc(sid)}</h2><p class="set">{esc(s["kind"])} study, '
                     f"status {esc(s['status'])}, stored {esc(s['created_at'])}"
                     + (f", run {_run_link(s['run_id'], s['run_id'])}" if s.get("run_id") else "") + "</p>")
        headline = s["summary"].get("headline") or []
        if headline:
            parts.append("<ul>" + "".join(f"<li>{esc(line)}</li>" for line in headline) + "</ul>")
        figs = []
        for path in found:
            name = f"{_slug(sid)}-{os.path.basename(path)}"
            shutil.copyfile(path, os.path.join(img, name))
            images += 1
            figs.append(_figure(f"img/{name}", os.path.splitext(os.path.basename(path))[0].replace("_", " ")))
        if figs:
            parts.append('<div class="figures">' + "".join(figs) + "</div>")
        else:
            hint = f" (draw them with `bayesbench plot --dynamics {sid}`)" if s["kind"] == "profile" else ""
            parts.append(f'<p class="note">No figures of this study on disk under {esc(base)}{esc(hint)}.</p>')
        parts.append(f"<details><summary>configuration</summary><pre>{esc(json.dumps(s['config'], indent=1))}"
                     "</pre></details></section>")
    parts.append("</main>")
    return _page("bayesbench dynamics studies", "\n".join(parts)), images


def _check_ids(records: list, studies: list, store: str) -> None:
    """Every stored run and study id can name a file of the site (`checks.file_id`): a crafted
    id ('../../x') is one error naming its row, before anything is written."""
    for r in records:
        try:
            file_id("run_id", r.run_id)
        except ValueError as err:
            raise ValueError(f"the store {store} holds a row (run {r.run_id!r}, seed {r.seed}, arch {r.arch!r}) whose "
                             f"run id cannot name a page: {err}; remove or rename that row") from None
    for s in studies:
        try:
            file_id("study_id", s["study_id"])
        except ValueError as err:
            raise ValueError(f"the store {store} holds a study whose id cannot name a page: {err}; remove or rename "
                             "it") from None


def build_site(db: str | None = None, out: str = os.path.join("results", "site")) -> dict:
    """Write the site of the store `db` to the folder `out` (module doc); returns what it wrote:
    {"index", "pages", "images", "bytes", "rows", "records", "tables", "studies", "drawn", "copied"}."""
    from ..running.outfolder import check_out, folder_bytes, rebuilt
    from ..store.database import db_path
    from .rows import aggregate
    from .selection import select_rows

    check_out(out, MARKER, "site")
    records = select_rows(db)
    studies = _studies(db)
    _check_ids(records, studies, db_path(db))
    if not records and not studies:
        raise ValueError(f"no results in the store {db_path(db)} (--db): nothing to build a site of; run `bayesbench "
                         "run --preset quick` first")
    with rebuilt(out, MARKER, "site") as (tmp, marker):
        os.makedirs(os.path.join(tmp, "runs"))
        os.makedirs(os.path.join(tmp, "assets"))
        for asset in ASSETS:
            shutil.copyfile(os.path.join(STATIC, asset), os.path.join(tmp, "assets", asset))
        figures = Figures(os.path.join(tmp, "img"), os.path.join(out, "img") if os.path.isdir(out) else None)
        agg = aggregate(records)
        index, n_tables = _index(agg, figures, db_path(db), len(records), studies)
        pages = 1
        with open(os.path.join(tmp, "index.html"), "w") as f:
            f.write(index)
        by_run: dict[str, list] = {}
        for r in records:
            by_run.setdefault(r.run_id, []).append(r)
        for run_id, members in by_run.items():
            page, doc = _run_page(sorted(members, key=lambda r: r.seed), figures, _slug(members[0].task_label))
            with open(inside(os.path.join(tmp, "runs"), f"{run_id}.html", f"run {run_id}'s page"), "w") as f:
                f.write(page)
            with open(inside(os.path.join(tmp, "runs"), f"{run_id}.json", f"run {run_id}'s run file"), "w") as f:
                json.dump(doc, f, indent=1, default=str)
            pages += 1
        study_images = 0
        if studies:
            page, study_images = _dynamics_page(studies, db, figures.folder)
            with open(os.path.join(tmp, "dynamics.html"), "w") as f:
                f.write(page)
            pages += 1
        marker.update({"what": "bayesbench site", "bayesbench": __version__, "db": db_path(db)})
    return {"index": os.path.join(out, "index.html"), "pages": pages,
            "images": figures.drawn + figures.copied + study_images, "drawn": figures.drawn,
            "copied": figures.copied, "bytes": folder_bytes(out), "rows": len(agg), "records": len(records),
            "tables": n_tables, "studies": len(studies)}
