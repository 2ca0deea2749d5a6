"""bayesbench.running.provenance: the version and commit a result records, from a git checkout
(read at run time) or from the version file an installed build carries."""

from __future__ import annotations

import subprocess
import types
from pathlib import Path

import pytest

from bayesbench.running import provenance as prov

ROOT = Path(__file__).resolve().parents[2]
HASH = "0123456789abcdef0123456789abcdef01234567"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-C", str(repo), *args],
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path) -> Path:
    _git(tmp_path, "init", "-q")
    (tmp_path / "tracked.txt").write_text("a\n")
    _git(tmp_path, "add", "tracked.txt")
    _git(tmp_path, "commit", "-q", "-m", "first")
    return tmp_path


@pytest.fixture
def fresh_cache(monkeypatch):
    monkeypatch.setattr(prov, "_CACHE", None)


def test_checkout_commit_reads_head_and_tracked_changes(repo, tmp_path):
    head = _git(repo, "rev-parse", "HEAD")
    assert prov.checkout_commit(str(repo)) == {"git_commit": head, "git_dirty": False}
    (repo / "untracked.txt").write_text("x\n")  # untracked files do not change what ran
    assert prov.checkout_commit(str(repo)) == {"git_commit": head, "git_dirty": False}
    (repo / "tracked.txt").write_text("b\n")
    assert prov.checkout_commit(str(repo)) == {"git_commit": head, "git_dirty": True}
    assert prov.checkout_commit(str(tmp_path / "missing")) is None


def test_checkout_commit_of_a_folder_without_git_is_none(tmp_path):
    assert prov.checkout_commit(str(tmp_path)) is None


@pytest.mark.parametrize("node,dirty,expected", [
    (f"g{HASH}", False, {"git_commit": HASH, "git_dirty": False}),  # a checkout's build: the full hash
    ("g0123abc", True, {"git_commit": "0123abc", "git_dirty": True}),  # an abbreviated node
    (HASH, False, {"git_commit": HASH, "git_dirty": False}),  # without the "g"
    (None, False, None),  # the build knew no commit (a plain copy of the source)
    ("gnot-a-hash", False, None),
])
def test_build_commit_reads_the_version_file(node, dirty, expected):
    module = types.SimpleNamespace(__version__="1.2.3", __commit_node__=node, __dirty__=dirty)
    assert prov.build_commit(module) == expected


def test_build_commit_without_the_fields_is_none():
    assert prov.build_commit(types.SimpleNamespace(__version__="1.2.3")) is None


def test_an_installed_package_takes_the_commit_of_its_build(tmp_path, monkeypatch, fresh_cache):
    """Not under a checkout (site-packages), the commit is the build's and says so."""
    module = types.SimpleNamespace(__version__="9.8.7", __commit_node__=f"g{HASH}", __dirty__=False)
    monkeypatch.setattr(prov, "PACKAGE_DIR", str(tmp_path / "site-packages" / "bayesbench"))
    monkeypatch.setattr(prov, "_version_module", lambda: module)
    assert prov.provenance() == {"bayesbench": "9.8.7", "git_commit": HASH, "git_dirty": False,
                                 "commit_source": "build"}
    assert prov.describe() == f"bayesbench 9.8.7 (commit {HASH[:12]}, from the build)"


def test_without_any_source_the_commit_is_unknown(tmp_path, monkeypatch, fresh_cache):
    monkeypatch.setattr(prov, "PACKAGE_DIR", str(tmp_path / "bayesbench"))
    monkeypatch.setattr(prov, "_version_module", lambda: None)
    assert prov.provenance() == {"bayesbench": prov.UNKNOWN_VERSION, "git_commit": None, "git_dirty": None,
                                 "commit_source": None}
    assert prov.describe() == f"bayesbench {prov.UNKNOWN_VERSION} (commit unknown)"


def test_a_checkout_wins_over_the_version_file(repo, monkeypatch, fresh_cache):
    """An editable install's version file is as old as the install; git is read at run time."""
    (repo / "bayesbench").mkdir()
    stale = types.SimpleNamespace(__version__="0.1", __commit_node__=f"g{HASH}", __dirty__=False)
    monkeypatch.setattr(prov, "PACKAGE_DIR", str(repo / "bayesbench"))
    monkeypatch.setattr(prov, "_version_module", lambda: stale)
    (repo / "tracked.txt").write_text("changed\n")
    p = prov.provenance()
    assert p["git_commit"] == _git(repo, "rev-parse", "HEAD") != HASH
    assert p["git_dirty"] is True and p["commit_source"] == "checkout"
    assert "with uncommitted changes, from this checkout" in prov.describe()


def test_stored_rows_carry_the_provenance(fresh_cache):
    """provenance.environment() (every row and run.json) holds the same fields."""
    from bayesbench.running.provenance import environment

    env = environment("cpu")
    assert {k: env[k] for k in ("bayesbench", "git_commit", "git_dirty", "commit_source")} == prov.provenance()
    if (ROOT / ".git").exists():  # these tests run from a checkout (an editable install)
        assert env["commit_source"] == "checkout"
        assert env["git_commit"] == _git(ROOT, "rev-parse", "HEAD")
