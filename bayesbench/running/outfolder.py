"""Folders bayesbench writes as a whole and replaces on the next run: `data export --out` (the
marker file `bayesbench.json`) and `site --out` (`.bayesbench-site`).

A folder is built beside `out` (`out.tmp<pid>`), then swapped in once complete, so a failure on the
way leaves the earlier one as it was. bayesbench deletes only files it wrote: the marker file lists
them (`"files"`: each path relative to the folder, with its size), and a folder is replaced only when
it holds nothing else. A file not in that list (the user's own), one changed since it was written, a
symbolic link, or a marker file bayesbench did not write is refused by name before anything is
written. The temporary folders (`out.tmp<pid>`, `out.old<pid>`) of a run that was killed are removed
by the next run to the same place; those of a run still going are left alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil

from .disk import DiskFull, is_disk_full

STAMP = ".bayesbench-building"  # in a folder being built: the folder is bayesbench's, by the process named in it


def check_out(out: str, marker: str, what: str) -> None:
    """Refuse `out` unless it is missing, empty, or an earlier `what` (an export, a site) holding
    only the files its `marker` lists: only such a folder is replaced (module doc)."""
    if not out.strip():
        raise ValueError("--out must name a folder, got an empty path (leave --out out for the default)")
    if os.path.islink(out):
        raise ValueError(f"--out {out} is a symbolic link; give the folder itself (bayesbench replaces the folder "
                         "--out names, and deletes nothing outside it)")
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"--out {out} is a file; give a folder (it is created if missing)")
    here = os.path.realpath(os.getcwd())
    if os.path.realpath(out) in (here, *_parents(here)):
        raise ValueError(f"--out {out} is the current folder or holds it; give a folder of its own for the {what} "
                         f"(an earlier {what} there is replaced as a whole), e.g. a new subfolder")
    if os.path.isdir(out) and os.listdir(out):
        stray = foreign_file(out, marker, what)
        if stray is not None:
            raise ValueError(f"--out {out}{stray}: bayesbench deletes only files it wrote; move it away or give a new "
                             f"or empty folder (nothing was written)")


def _parents(path: str) -> list[str]:
    parents = []
    while os.path.dirname(path) != path:
        path = os.path.dirname(path)
        parents.append(path)
    return parents


def listed_files(folder: str, marker: str) -> dict[str, int] | None:
    """The files the marker file of `folder` lists ({relative path: size}), or None when the marker is
    missing or not one bayesbench wrote (a JSON object with "what": "bayesbench ..." and "files")."""
    try:
        with open(os.path.join(folder, marker)) as f:
            content = json.load(f)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    ours = isinstance(content, dict) and str(content.get("what", "")).startswith("bayesbench ")
    files = content.get("files") if ours else None
    if not isinstance(files, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in files.items()):
        return None
    return files


def foreign_file(folder: str, marker: str, what: str) -> str | None:
    """What in the non-empty `folder` bayesbench did not write (a phrase to follow the folder's name),
    or None when every file is one its marker lists, unchanged."""
    if os.path.islink(os.path.join(folder, marker)):
        return f" holds {marker} as a symbolic link, not a marker file bayesbench wrote"
    if not os.path.isfile(os.path.join(folder, marker)):
        first = sorted(os.listdir(folder))[0]
        return f" is not empty (it holds {first}) and holds no bayesbench {what} ({marker})"
    files = listed_files(folder, marker)
    if files is None:
        return (f": its {marker} is not one bayesbench wrote (no list of the files it wrote there: another "
                "program's, or a bayesbench of before that list)")
    for root, dirs, names in os.walk(folder):
        for name in sorted(names) + sorted(d for d in dirs if os.path.islink(os.path.join(root, d))):
            path = os.path.join(root, name)
            rel = os.path.relpath(path, folder).replace(os.sep, "/")
            if rel == marker:
                continue
            if rel not in files or os.path.islink(path) or not os.path.isfile(path):
                return f" holds {rel}, which bayesbench did not write (not in the list in {marker})"
            if os.path.getsize(path) != files[rel]:
                return f" holds {rel}, which was changed since bayesbench wrote it"
    return None


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (or cannot be asked: then it is taken as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError, ValueError):
        return True
    return True


def remove_stale(out: str, marker: str, what: str) -> None:
    """Remove the temporary folders beside `out` of runs that were killed (`out.tmp<pid>` holding
    bayesbench's stamp, `out.old<pid>` holding only files its marker lists) whose process is gone."""
    base = os.path.abspath(out)
    parent, name = os.path.dirname(base), os.path.basename(base)
    try:
        entries = os.listdir(parent)
    except OSError:
        return
    for entry in entries:
        for infix in (".tmp", ".old"):
            pid = entry[len(name) + len(infix):]
            if not (entry.startswith(name + infix) and pid.isdigit() and int(pid) > 0):
                continue
            path = os.path.join(parent, entry)
            if int(pid) == os.getpid() or _alive(int(pid)) or os.path.islink(path) or not os.path.isdir(path):
                continue
            ours = os.path.isfile(os.path.join(path, STAMP)) or (os.listdir(path)
                                                                 and foreign_file(path, marker, what) is None)
            if ours:
                shutil.rmtree(path, ignore_errors=True)


def make_tmp(out: str, marker: str, what: str) -> str:
    """A fresh folder beside `out` to build into (then `replace_folder`), stamped as bayesbench's; a
    place where nothing can be written is refused naming --out (a read-only folder, a full disk)."""
    remove_stale(out, marker, what)
    tmp = f"{os.path.abspath(out)}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        os.makedirs(tmp)
        with open(os.path.join(tmp, STAMP), "w") as f:
            f.write(f"a bayesbench {what} being built by process {os.getpid()}\n")
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        where = os.path.dirname(tmp)
        if is_disk_full(err, where):
            raise DiskFull(out) from None
        raise ValueError(f"--out {out}: nothing can be written in {where} ({err.strerror or err}); choose a writable "
                         "folder") from None
    return tmp


def write_marker(tmp: str, marker: str, content: dict) -> None:
    """Write `content` to the marker file of `tmp` with "files": every file written there (the
    last step: the stamp goes, the list is what a rebuild may delete)."""
    os.remove(os.path.join(tmp, STAMP))
    files = {}
    for root, _, names in os.walk(tmp):
        for name in sorted(names):
            path = os.path.join(root, name)
            files[os.path.relpath(path, tmp).replace(os.sep, "/")] = os.path.getsize(path)
    files.pop(marker, None)
    content["files"] = dict(sorted(files.items()))
    with open(os.path.join(tmp, marker), "w") as f:
        json.dump(content, f, indent=1, sort_keys=False, default=str)
        f.write("\n")


@contextlib.contextmanager
def rebuilt(out: str, marker: str, what: str):
    """Build the folder `out` anew: yields (tmp, content): write the files into tmp and the marker's
    content into the dict; when the block ends the marker is written (`write_marker`) and tmp
    replaces `out` (`replace_folder`). A full disk on the way is `DiskFull` naming `out`, with the
    earlier folder kept."""
    check_out(out, marker, what)
    tmp = make_tmp(out, marker, what)
    try:
        content: dict = {}
        yield tmp, content
        write_marker(tmp, marker, content)
        check_out(out, marker, what)  # again: a file the user put there while this one was built
        replace_folder(tmp, out)
    except OSError as err:
        if is_disk_full(err, os.path.dirname(tmp)):
            raise DiskFull(out) from err
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def replace_folder(tmp: str, out: str) -> None:
    """Put the finished folder `tmp` at `out`, replacing what was there only once the new one is
    complete (an export, a site): a failure on the way leaves the earlier one as it was.

    Between the two renames `out` is briefly absent: an interruption there (Ctrl-C) puts the
    earlier folder back, and another command that put its own folder at `out` meanwhile (two
    exports to one place) is replaced in turn, so one whole folder is left, never none."""
    old = f"{os.path.abspath(out)}.old{os.getpid()}"
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    shutil.rmtree(old, ignore_errors=True)
    moved = False
    try:
        for attempt in range(5):
            if os.path.isdir(out):
                if moved:  # another writer's folder arrived after ours moved the earlier one: last wins
                    shutil.rmtree(out, ignore_errors=True)
                else:
                    os.replace(out, old)
                    moved = True
            try:
                os.replace(tmp, out)
                break
            except OSError:
                if attempt == 4 or not os.path.isdir(out):
                    raise
    except BaseException:
        if moved and not os.path.exists(out) and os.path.isdir(old):
            os.replace(old, out)  # the earlier folder back where it was
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)


def folder_bytes(folder: str) -> int:
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(folder) for f in files)
