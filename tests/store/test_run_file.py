"""store/run_file.py: a run's run.json, written atomically."""

from __future__ import annotations

import errno
import json
import os

import pytest

from bayesbench.running.disk import DiskFull
from bayesbench.store import run_file


def test_a_full_disk_names_the_run_file_and_leaves_no_partial_file(tmp_path, monkeypatch):
    """A full disk was the raw '[Errno 28] No space left on device' and left run.json.tmp<pid> behind."""
    path = tmp_path / "run.json"
    path.write_text('{"earlier": true}')
    monkeypatch.setattr(run_file, "run_document", lambda records: {"x": "y" * 100})

    def full(obj, f, **kwargs):
        f.write("{")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(json, "dump", full)
    with pytest.raises(DiskFull, match=f"no space left on device: {path}"):
        run_file.write_run_file(str(path), [])
    assert os.listdir(tmp_path) == ["run.json"] and path.read_text() == '{"earlier": true}'
