"""`bayesbench site` (bayesbench/report/site.py) without a browser: what the pages hold (tuned rows
apart, the dynamics studies' figures, configuration), that the folder is self-contained, that a
rebuild copies the figures it already drew, and the refusals."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil

import pytest

from bayesbench.cli import main
from bayesbench.dynamics.report import report_dir
from bayesbench.dynamics.store import register_study
from bayesbench.figures import pyplot
from bayesbench.report.site import MARKER, build_site
from bayesbench.store.database import read_records, write_records


@pytest.fixture(scope="module")
def site(tiny_store, tmp_path_factory):
    """The tiny store plus a tuned copy of the lstm run and a dynamics study with one figure, built."""
    root = tmp_path_factory.mktemp("site")
    db = str(root / "results" / "bayesbench.sqlite")
    os.makedirs(os.path.dirname(db))
    for name in os.listdir(os.path.dirname(tiny_store["db"])):
        if name.startswith("bayesbench.sqlite"):
            shutil.copy(os.path.join(os.path.dirname(tiny_store["db"]), name), os.path.dirname(db))
    lstm = [r for r in read_records(db) if r.arch == "lstm"]
    tuned = [dataclasses.replace(r, run_id="tuned-" + r.run_id, config={**r.config, "tuning": {"trials": 8}})
             for r in lstm]
    write_records(tuned, db)
    register_study("profile-demo", "profile", {"task": "sticky"}, run_id=lstm[0].run_id,
                   summary={"headline": ["routing law: held (3 of 3 seeds)"]}, status="ok", path=db)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [1, 0])
    os.makedirs(os.path.join(report_dir(db), "profile-demo"))
    fig.savefig(os.path.join(report_dir(db), "profile-demo", "routing_law.png"))
    plt.close(fig)
    out = str(root / "site")
    return {"db": db, "out": out, "built": build_site(db, out), "tuned": tuned}


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def test_tuned_rows_are_a_table_of_their_own(site):
    index = _read(os.path.join(site["out"], "index.html"))
    tables = re.findall(r'<table class="board">.*?</table>', index, flags=re.S)
    assert len(tables) == 2 == site["built"]["tables"]
    untuned, tuned = tables
    # a tuned row's task is "<task> (tuned)" (store/tuning.py `tuned_label`): its own section, floors and "x best"
    assert re.search(r"<h2[^>]*>[^<]*\(tuned\)</h2>", index) or "(tuned)</h" in index
    tuned_runs = {r.run_id for r in site["tuned"]}
    assert all(run in tuned for run in tuned_runs) and not any(run in untuned for run in tuned_runs)
    assert untuned.count("<tbody><tr") == 1 and untuned.count('data-members="') == 2  # mlp and lstm untuned
    assert tuned.count('data-members="') == 1 and ">lstm</a>" in tuned


def test_dynamics_studies_figures_and_headline(site):
    page = _read(os.path.join(site["out"], "dynamics.html"))
    assert "profile-demo" in page and "routing law: held (3 of 3 seeds)" in page
    assert 'src="img/profile-demo-routing_law.png"' in page
    assert os.path.getsize(os.path.join(site["out"], "img", "profile-demo-routing_law.png")) > 0
    assert 'href="dynamics.html"' in _read(os.path.join(site["out"], "index.html"))


def test_a_run_page_holds_its_results_and_its_run_file(site):
    record = read_records(site["db"])[0]
    page = _read(os.path.join(site["out"], "runs", f"{record.run_id}.html"))
    doc = json.load(open(os.path.join(site["out"], "runs", f"{record.run_id}.json")))
    assert doc["run_id"] == record.run_id and doc["config"]["train"]["steps"] == 20
    ev = record.evals["standard"]
    assert f"{ev.entropy_mae.mean:.4f}" in page and ev.set_id in page and "uniform (floor)" in page
    assert page.count("<img ") == 2


def test_the_folder_is_self_contained(site):
    out = site["out"]
    for root, _, files in os.walk(out):
        for name in files:
            if not name.endswith((".html", ".css", ".js")):
                continue
            text = _read(os.path.join(root, name))
            assert "http://" not in text and "https://" not in text and "//cdn" not in text, name
            for ref in re.findall(r'(?:src|href)="([^"#]+)', text):
                assert os.path.exists(os.path.normpath(os.path.join(root, ref))), (name, ref)


def test_a_rebuild_copies_the_figures_it_drew_and_replaces_the_site(site, capsys):
    again = build_site(site["db"], site["out"])
    assert again["drawn"] == 0 and again["copied"] == site["built"]["drawn"] > 0
    assert main(["site", "--db", site["db"], "--out", site["out"]]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"wrote {site['out']}/index.html (")
    assert "3 leaderboard rows of 6 stored seeds in 2 tables, 1 dynamics studies" in out
    assert os.path.exists(os.path.join(site["out"], MARKER))


def test_refusals(tmp_path, capsys):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    for argv, message in ((["--out", str(tmp_path / "busy")],
                           "is not empty (it holds notes.txt) and holds no bayesbench site"),
                          (["--db", str(tmp_path / "none.sqlite"), "--out", str(tmp_path / "s")],
                           f"no store at {tmp_path / 'none.sqlite'} (--db")):
        assert main(["site", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, err
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine" and not (tmp_path / "s").exists()


def test_a_store_of_runs_only_is_read_not_written(tiny_store, tmp_path, monkeypatch):
    """The site was refused for a read-only store ('cannot be opened or created ... choose a writable
    --db') that leaderboard and export read, and added the dynamics tables to every store it read."""
    import sqlite3

    import bayesbench.dynamics.store as dynamics_store
    from bayesbench.store.database import StoreError

    db = str(tmp_path / "bayesbench.sqlite")
    src = sqlite3.connect(tiny_store["db"])
    src.backup(sqlite3.connect(db))
    src.close()

    monkeypatch.setattr(dynamics_store, "connect", _reads_only(dynamics_store.connect, db, StoreError))
    built = build_site(db, str(tmp_path / "site"))
    assert built["rows"] == 2 and built["studies"] == 0
    tables = {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "studies" not in tables and "dynamics" not in tables


def _reads_only(connect, db, error):
    """`connect` as on a read-only store: opening for reading works, opening for writing fails."""

    def guarded(path=None, *, read_only=False):
        if not read_only:
            raise error(f"results store {db} cannot be written (attempt to write a readonly database)")
        return connect(path, read_only=True)

    return guarded


def test_a_read_only_store_with_studies_is_read(tiny_store, tmp_path, monkeypatch):
    """A store holding dynamics studies was refused when it could not be written ('cannot be
    written'): the studies' readers opened it for writing (to create their tables)."""
    import sqlite3

    import bayesbench.dynamics.store as dynamics_store
    from bayesbench.store.database import StoreError

    db = str(tmp_path / "bayesbench.sqlite")
    src = sqlite3.connect(tiny_store["db"])
    src.backup(sqlite3.connect(db))
    src.close()
    dynamics_store.register_study("geometry-abc", "geometry", {"run": "x"}, summary={"headline": []},
                                  status="done", path=db)
    before = sqlite3.connect(db).execute("SELECT COUNT(*) FROM studies").fetchone()[0]
    monkeypatch.setattr(dynamics_store, "connect", _reads_only(dynamics_store.connect, db, StoreError))
    assert [s["study_id"] for s in dynamics_store.list_studies(path=db)] == ["geometry-abc"]
    assert dynamics_store.read_study("geometry-abc", db)["config"] == {"run": "x"}
    assert dynamics_store.read_dynamics("geometry-abc", path=db) == []
    built = build_site(db, str(tmp_path / "site"))
    assert built["rows"] == 2 and built["studies"] == 1
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM studies").fetchone()[0] == before


def test_an_empty_or_unwritable_out_is_refused_naming_it(tiny_store, tmp_path, capsys, monkeypatch):
    """`--out ""` was '[Errno 2] No such file or directory: '.tmp123' -> ''' (exit 1); a read-only
    place an OSError naming the temporary folder (exit 1)."""
    assert main(["site", "--db", tiny_store["db"], "--out", ""]) == 2
    err = capsys.readouterr().err.strip()
    assert "--out must name a folder, got an empty path" in err and "\n" not in err
    makedirs = os.makedirs

    def read_only(path, *args, **kwargs):
        if ".tmp" in os.path.basename(str(path)):
            raise OSError(30, "Read-only file system")
        return makedirs(path, *args, **kwargs)

    monkeypatch.setattr(os, "makedirs", read_only)
    assert main(["site", "--db", tiny_store["db"], "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--out {tmp_path / 's'}: nothing can be written in {tmp_path} (Read-only file system)" in err
    assert not (tmp_path / "s").exists()


def test_the_pages_opening_runs_as_written_in_an_empty_folder(tmp_path, monkeypatch, capsys):
    """probe2 D9: docs/site.md opened with `bayesbench site` alone, which in an empty folder stops with
    "no results in the store"; its opening makes the results it shows. Its lines run here, in order."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "site.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S).group(1)
    commands = [line.split("#")[0].split() for line in block.splitlines() if line.strip()]
    assert [c[:2] for c in commands] == [["bayesbench", "run"], ["bayesbench", "site"]]
    monkeypatch.chdir(tmp_path)
    for command in commands:
        assert main([*command[1:], *(["--no-progress"] if command[1] == "run" else [])]) == 0, command
    out = capsys.readouterr().out
    assert "wrote results/site/index.html (2 pages, 6 images," in out
    assert "2 leaderboard rows of 2 stored seeds in 2 tables" in out
    assert "2 leaderboard rows of 2 stored seeds in 2 tables" in text


def test_a_user_file_in_the_site_folder_is_kept_and_the_rebuild_refused_naming_it(tiny_store, tmp_path, capsys):
    """probe issue 39: rebuilding the site deleted the user's files in the site folder."""
    out = tmp_path / "site"
    build_site(tiny_store["db"], str(out))
    listed = json.loads((out / MARKER).read_text())["files"]
    assert "index.html" in listed and "assets/site.css" in listed
    (out / "CNAME").write_text("bench.example.org")
    (out / "runs" / "notes.html").write_text("mine")
    assert main(["site", "--db", tiny_store["db"], "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--out {out} holds CNAME, which bayesbench did not write" in err and "\n" not in err
    assert (out / "CNAME").read_text() == "bench.example.org" and (out / "runs" / "notes.html").exists()
    os.remove(out / "CNAME")
    with pytest.raises(ValueError, match="holds runs/notes.html, which bayesbench did not write"):
        build_site(tiny_store["db"], str(out))
    os.remove(out / "runs" / "notes.html")
    assert build_site(tiny_store["db"], str(out))["rows"] == 2  # only its own files: replaced
    assert sorted(os.listdir(tmp_path)) == ["site"]


def test_a_site_folder_with_an_old_or_foreign_marker_keeps_its_contents(tiny_store, tmp_path, capsys):
    out = tmp_path / "site"
    out.mkdir()
    (out / MARKER).write_text("built by bayesbench 0.1 from results/bayesbench.sqlite\n")  # no list of its files
    (out / "index.html").write_text("my own page")
    assert main(["site", "--db", tiny_store["db"], "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--out {out}: its {MARKER} is not one bayesbench wrote" in err
    assert (out / "index.html").read_text() == "my own page"


def test_a_full_disk_names_the_site_folder_and_keeps_the_earlier_site(tiny_store, tmp_path, capsys, monkeypatch):
    """A full disk was the raw '[Errno 28] No space left on device' without the path (exit 1)."""
    import errno

    out = tmp_path / "site"
    build_site(tiny_store["db"], str(out))
    before = sorted(os.listdir(out))
    copy = shutil.copyfile

    def full(src, dst, *args, **kwargs):
        if str(dst).endswith("site.js"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return copy(src, dst, *args, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", full)
    assert main(["site", "--db", tiny_store["db"], "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert f"bayesbench site: no space left on device: {out} (nothing already written was lost" in err
    assert sorted(os.listdir(out)) == before and sorted(os.listdir(tmp_path)) == ["site"]


def test_the_learning_curves_count_each_seed_once_whatever_the_evaluation_sets(tiny_store, tmp_path, monkeypatch):
    """A run scored on several evaluation sets (HMM K=20, 30, 50) is in one leaderboard row per set; the
    site collected its records once per row, and the learning-curve figure said '6 seeds' for 3."""
    import bayesbench.report.plots as plots

    db = str(tmp_path / "bayesbench.sqlite")
    records = read_records(tiny_store["db"])
    write_records([dataclasses.replace(r, evaluation=dataclasses.replace(
        r.evaluation, evals={**r.evals, "longer": r.evals["standard"]},
        curves={**r.curves, "longer": r.curves["standard"]})) for r in records], db)
    drawn = []

    def spy(label, name, group, metric, threshold, path):
        drawn.append(group)
        return real(label, name, group, metric, threshold, path)

    real = plots._curve_figure
    monkeypatch.setattr(plots, "_curve_figure", spy)
    build_site(db, str(tmp_path / "site"))
    index = _read(str(tmp_path / "site" / "index.html"))
    assert index.count("<table") >= 2  # the 'standard' and 'longer' tables
    site_curves = drawn[0]  # the leaderboard's learning curves (the run pages' follow)
    members = [(r.run_id, r.seed) for r in site_curves]
    assert sorted(members) == sorted({(r.run_id, r.seed) for r in records}), members
    # and the figure's own seed count reads each (run, seed) once even when handed one twice
    assert [len(m) for m in plots._by_arch(site_curves + site_curves).values()] == [2, 2]


def test_the_trained_mark_is_explained_on_every_page_it_is_on(site):
    """'(trained)' followed the evaluation's name in the tables and headings and was never said."""
    from bayesbench.report.notes import TRAINED_NOTE

    record = read_records(site["db"])[0]
    for page in (os.path.join(site["out"], "index.html"), os.path.join(site["out"], "runs", f"{record.run_id}.html")):
        text = _read(page)
        assert "(trained)" in text and re.sub(r"\s+", " ", TRAINED_NOTE.replace("'", "&#x27;")) in text, page


def test_a_scored_row_shows_what_its_user_stated_never_a_measured_looking_zero(tiny_store, tmp_path):
    """Rows of `bayesbench score --predictions` showed steps 0, wall 0 and, on the run page, 'seeds 0'
    as if measured; pooled over two scorings, the seeds cell showed two identical links 'predictions-'
    (run ids cut at 12 characters)."""
    db = str(tmp_path / "scored.sqlite")
    mlp = [r for r in read_records(tiny_store["db"]) if r.arch == "mlp"]
    scored = [dataclasses.replace(r, run_id=f"predictions-{r.seed}a2b3c4d5e6f", arch="mine", steps=0, wall_s=0.0,
                                  steps_per_s=None, config={**r.config, "train": None}) for r in mlp]
    write_records(mlp + scored, db)
    out = str(tmp_path / "site")
    build_site(db, out)
    index = _read(os.path.join(out, "index.html"))
    row = re.search(r'<tr data-members="predictions-.*?</tr>', index).group(0)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
    assert cells[2:4] == ["-", "-"], cells[:5]  # steps, wall: never measured
    links = re.findall(r'<a href="runs/([^"]+)\.html">([^<]+)</a>', cells[4])
    assert sorted(text for _, text in links) == sorted(r.run_id for r in scored), links  # told apart
    trained = re.search(r'<tr data-members="[0-9a-f]{16}:.*?</tr>', index).group(0)
    assert re.findall(r"<td[^>]*>(.*?)</td>", trained)[2] == "20"
    page = _read(os.path.join(out, "runs", f"{scored[0].run_id}.html"))
    facts = dict(re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", page))
    assert facts["training steps"] == "not stated (scored here, not trained here)", facts
    assert facts["wall time (s)"] == "not measured (not trained here)", facts
    assert facts["seeds"] == "0 (a label given when scored)", facts


def _copy_store(tiny_store, tmp_path) -> str:
    import sqlite3

    db = str(tmp_path / "store" / "bayesbench.sqlite")
    os.makedirs(os.path.dirname(db))
    src = sqlite3.connect(tiny_store["db"])
    src.backup(sqlite3.connect(db))
    src.close()
    return db


def test_a_crafted_stored_run_id_never_writes_outside_out(tiny_store, tmp_path, capsys):
    """issue 39: a stored run id '../../../X' made `site` write X.html and X.json outside --out."""
    import sqlite3

    db = _copy_store(tiny_store, tmp_path)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE runs SET run_id = '../../../escaped' WHERE arch = 'lstm'")
    conn.commit()
    conn.close()
    out = tmp_path / "a" / "b" / "site"
    assert main(["site", "--db", db, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "holds a row (run '../../../escaped', seed 0, arch 'lstm') whose run id cannot name a page" in err, err
    assert "\n" not in err and not out.exists()
    assert not list(tmp_path.rglob("escaped*"))


def test_the_store_refuses_an_id_that_is_not_a_file_name(tiny_store, tmp_path):
    from bayesbench.checks import SettingError, inside

    db = _copy_store(tiny_store, tmp_path)
    record = read_records(db)[0]
    for bad in ("../x", "a/b", "..", "", "a\\b", "x\nmore"):
        with pytest.raises(SettingError, match="run_id must be a non-empty name"):
            write_records([dataclasses.replace(record, run_id=bad)], db)
        with pytest.raises(SettingError, match="study_id must be a non-empty name"):
            register_study(bad, "profile", {}, path=db)
    assert {r.run_id for r in read_records(db)} == {r.run_id for r in read_records(tiny_store["db"])}
    with pytest.raises(ValueError, match="would be written outside"):
        inside(str(tmp_path / "site"), "../x.html", "a page")
    os.symlink(str(tmp_path), str(tmp_path / "link"))
    os.makedirs(tmp_path / "site")
    os.symlink(str(tmp_path), str(tmp_path / "site" / "up"))
    with pytest.raises(ValueError, match="would be written outside"):
        inside(str(tmp_path / "site"), "up/x.html", "a page")


def test_hostile_stored_names_are_shown_as_written_in_plots_and_pages(tiny_store, tmp_path, capsys):
    """issue 39: a stored name like 'm$\\badcmd{$' was parsed as matplotlib math, and `site` and `plot` of the
    whole store failed naming no row; in a page it must be text, not HTML."""
    import sqlite3

    db = _copy_store(tiny_store, tmp_path)
    arch, label = "m$\\badcmd{$<b>x</b>", "sticky $\\x{$ <script>"
    conn = sqlite3.connect(db)
    conn.execute("UPDATE runs SET arch = ?, task_label = ? WHERE arch = 'lstm'", (arch, label))
    conn.commit()
    conn.close()
    assert main(["plot", "--db", db, "--out", str(tmp_path / "plots")]) == 0, capsys.readouterr().err
    assert main(["site", "--db", db, "--out", str(tmp_path / "site")]) == 0, capsys.readouterr().err
    index = _read(str(tmp_path / "site" / "index.html"))
    assert "m$\\badcmd{$&lt;b&gt;x&lt;/b&gt;" in index and "<b>x</b>" not in index and "<script>" not in index


def test_a_figure_draws_dollar_signs_as_text(tmp_path):
    from bayesbench.figures import save, subplots

    fig, ax = subplots(figsize=(3, 2))
    ax.plot([0, 1], [0, 1], label="m$\\badcmd{$")
    ax.set_title("$\\x{$")
    assert os.path.isfile(save(fig, str(tmp_path / "f.png"), legend=True))
    fig, ax = subplots(figsize=(3, 2))
    ax.bar([0, 1], [1, 2])
    ax.set_xticks([0, 1], labels=["a$\\bad{$", "b$"])  # names on an axis
    ax.set_yscale("log")  # numbers keep their math ('10^0')
    assert os.path.isfile(save(fig, str(tmp_path / "g.png")))
