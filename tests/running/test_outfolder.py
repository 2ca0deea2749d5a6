"""Folders bayesbench rebuilds as a whole (bayesbench/running/outfolder.py: `data export --out`, `site
--out`): only the files bayesbench wrote there (listed in the marker file) are ever deleted; a user's
file, a foreign marker, a symbolic link is refused by name before anything is written; the temporary
folders of a killed run are removed by a later one."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import pytest

from bayesbench.running import outfolder
from bayesbench.running.disk import DiskFull

MARK = "mark.json"


def _build(out, files: dict[str, str], **extra) -> None:
    with outfolder.rebuilt(str(out), MARK, "export") as (tmp, marker):
        for name, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(tmp, name)), exist_ok=True)
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        marker.update({"what": "bayesbench test", **extra})


def test_the_marker_lists_every_file_written_and_a_rebuild_replaces_them(tmp_path):
    out = tmp_path / "out"
    _build(out, {"a.txt": "aa", "sub/b.txt": "bbb"})
    marker = json.loads((out / MARK).read_text())
    assert marker["what"] == "bayesbench test" and marker["files"] == {"a.txt": 2, "sub/b.txt": 3}
    _build(out, {"c.txt": "c"})
    assert sorted(os.listdir(out)) == ["c.txt", MARK]
    assert sorted(os.listdir(tmp_path)) == ["out"]


@pytest.mark.parametrize("user", ["notes.txt", "sub/notes.txt", "deep/er/x"])
def test_a_user_file_in_a_built_folder_is_refused_by_name_and_kept(tmp_path, user):
    out = tmp_path / "out"
    _build(out, {"a.txt": "aa", "sub/b.txt": "bbb"})
    (out / user).parent.mkdir(parents=True, exist_ok=True)
    (out / user).write_text("mine")
    with pytest.raises(ValueError, match=f"--out {out} holds {user}, which bayesbench did not write"):
        _build(out, {"c.txt": "c"})
    assert (out / user).read_text() == "mine" and (out / "a.txt").read_text() == "aa"
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_a_file_changed_since_it_was_written_is_refused(tmp_path):
    out = tmp_path / "out"
    _build(out, {"README.md": "card"})
    (out / "README.md").write_text("my own notes on the card")
    with pytest.raises(ValueError, match="README.md, which was changed since bayesbench wrote it"):
        _build(out, {"c.txt": "c"})
    assert (out / "README.md").read_text() == "my own notes on the card"


def test_a_symbolic_link_inside_or_as_the_folder_is_refused_and_its_target_untouched(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.txt").write_text("keep")
    out = tmp_path / "out"
    _build(out, {"a.txt": "aa"})
    os.remove(out / "a.txt")
    os.symlink(elsewhere / "precious.txt", out / "a.txt")  # a listed name, now a link elsewhere
    with pytest.raises(ValueError, match="holds a.txt, which bayesbench did not write"):
        _build(out, {"a.txt": "new"})
    link = tmp_path / "link"
    os.symlink(elsewhere, link)
    with pytest.raises(ValueError, match=f"--out {link} is a symbolic link"):
        _build(link, {"a.txt": "new"})
    assert (elsewhere / "precious.txt").read_text() == "keep" and sorted(os.listdir(elsewhere)) == ["precious.txt"]


@pytest.mark.parametrize("content", ['{"sets": []}', "not json", '{"what": "bayesbench site", "files": {"a": "big"}}',
                                     "[1, 2]", '{"what": "bayesbench site", "files": ["a.txt"]}',
                                     '{"files": {"a.txt": 4}}'])
def test_a_folder_with_a_foreign_marker_file_is_refused_and_kept(tmp_path, content):
    out = tmp_path / "out"
    out.mkdir()
    (out / MARK).write_text(content)
    (out / "a.txt").write_text("mine")
    with pytest.raises(ValueError, match=f"--out {out}: its {MARK} is not one bayesbench wrote"):
        _build(out, {"a.txt": "new"})
    assert (out / "a.txt").read_text() == "mine" and (out / MARK).read_text() == content


def test_the_current_folder_or_one_holding_it_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for out in (".", "./", str(tmp_path), "..", "/"):
        with pytest.raises(ValueError, match=f"--out {out} is the current folder or holds it"):
            _build(out, {"a.txt": "x"})
    assert os.listdir(tmp_path) == []


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_the_temporary_folders_of_a_dead_run_are_removed_those_of_a_live_one_kept(tmp_path):
    out = tmp_path / "out"
    _build(out, {"a.txt": "aa"})
    dead, live = _dead_pid(), os.getppid()
    stale_tmp = tmp_path / f"out.tmp{dead}"
    outfolder.make_tmp(str(out), MARK, "export")  # as a run killed while building leaves it
    os.replace(tmp_path / f"out.tmp{os.getpid()}", stale_tmp)
    (stale_tmp / "part.parquet").write_text("partial")
    os.replace(out, tmp_path / f"out.old{dead}")  # killed between its two renames
    _build(out, {"a.txt": "aa"})
    live_tmp = tmp_path / f"out.tmp{live}"
    live_tmp.mkdir()
    (live_tmp / outfolder.STAMP).write_text(str(live))
    user = tmp_path / f"out.old{dead + 1}"  # the user's own folder, named like ours
    user.mkdir()
    (user / "backup.txt").write_text("mine")
    _build(out, {"b.txt": "b"})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out", live_tmp.name, user.name])
    assert (user / "backup.txt").read_text() == "mine"


def test_a_full_disk_names_the_folder_and_keeps_the_earlier_one(tmp_path, monkeypatch):
    out = tmp_path / "out"
    _build(out, {"a.txt": "aa"})

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(DiskFull, match=f"no space left on device: {out}"):
        with outfolder.rebuilt(str(out), MARK, "export") as (tmp, marker):
            full()
    assert sorted(os.listdir(out)) == ["a.txt", MARK] and sorted(os.listdir(tmp_path)) == ["out"]
    monkeypatch.setattr(os, "makedirs", full)
    with pytest.raises(DiskFull, match=f"no space left on device: {out}"):
        _build(out, {"a.txt": "x"})
