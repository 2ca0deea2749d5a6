"""Which bayesbench produced a result: the package version and the commit of its code.

Every stored row and `run.json` carry `provenance()` in their environment (`environment`: it,
and the versions, device and backends a run used):

- `bayesbench`: the package version, from git tags by setuptools-scm when the package was built
  or installed (`bayesbench/_version.py`; "0+unknown" in a source tree never built).
- `git_commit`, `git_dirty`, `commit_source`: the commit of the code that ran and whether its
  tracked files had changes. Run from a git checkout (an editable install), they are read from
  git at run time (`commit_source` "checkout"), so a commit made after the install is still right;
  otherwise from the version file written when the package was built (`commit_source` "build": the
  commit the sdist or wheel was built from). None when neither knows it (a plain copy of the
  source without git, or a `git archive` export built without the export-subst of
  `.git_archival.txt`).

The answer is read once per process.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../bayesbench
UNKNOWN_VERSION = "0+unknown"  # a source tree that was never built or installed has no version file
_HEX = re.compile(r"^[0-9a-f]{7,40}$")
_CACHE: dict | None = None


def _version_module():
    """bayesbench/_version.py, written at build time, or None."""
    try:
        from bayesbench import _version
    except ImportError:
        return None
    return _version


def package_version() -> str:
    """The package's version as built (`bayesbench.__version__`)."""
    return getattr(_version_module(), "__version__", UNKNOWN_VERSION)


def checkout_commit(root: str) -> dict | None:
    """{"git_commit": HEAD, "git_dirty": tracked files changed} of the git work tree at `root`
    (the folder holding the package), or None when `root` is not one or git cannot say."""
    if not os.path.exists(os.path.join(root, ".git")):  # a folder in a worktree, a file in a linked one
        return None
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0 or dirty.returncode != 0:
        return None
    return {"git_commit": head.stdout.strip(), "git_dirty": bool(dirty.stdout.strip())}


def build_commit(version_module=None) -> dict | None:
    """{"git_commit", "git_dirty"} recorded in the version file at build time, or None when the
    build did not know its commit. setuptools-scm writes the node as "g" + hex (a full hash from a
    checkout, an abbreviated one from a `git archive` of a tagged history)."""
    if version_module is None:
        version_module = _version_module()
    node = getattr(version_module, "__commit_node__", None)
    if not isinstance(node, str):
        return None
    node = node[1:] if node.startswith("g") else node
    if not _HEX.match(node):
        return None
    dirty = getattr(version_module, "__dirty__", None)
    return {"git_commit": node, "git_dirty": bool(dirty) if dirty is not None else None}


def provenance() -> dict:
    """{"bayesbench": version, "git_commit", "git_dirty", "commit_source": "checkout" | "build" | None}."""
    global _CACHE
    if _CACHE is None:
        source: str | None = "checkout"
        commit = checkout_commit(os.path.dirname(PACKAGE_DIR))
        if commit is None:
            commit, source = build_commit(), "build"
        if commit is None:
            commit, source = {"git_commit": None, "git_dirty": None}, None
        _CACHE = {"bayesbench": package_version(), **commit, "commit_source": source}
    return dict(_CACHE)


def describe() -> str:
    """One line for `bayesbench --version`: version, commit (12 digits), where the commit comes from."""
    p = provenance()
    if p["git_commit"] is None:
        commit = "commit unknown"
    else:
        where = "this checkout" if p["commit_source"] == "checkout" else "the build"
        commit = f"commit {p['git_commit'][:12]}{' with uncommitted changes' if p['git_dirty'] else ''}, from {where}"
    return f"bayesbench {p['bayesbench']} ({commit})"


def environment(device: str, attention: str | None = None) -> dict:
    """Versions, device and the backends a run used (attention kernel, oracle extension), with the
    package version and commit (`provenance`): every stored row's and run.json's `environment`."""
    import torch

    from bayesbench.ops import extension_status

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    dev = str(device)
    name = torch.cuda.get_device_name(torch.device(dev)) if dev.startswith("cuda") else platform.processor() or "cpu"
    return {
        **provenance(), "torch": torch.__version__, "triton": triton_version,
        "python": platform.python_version(), "platform": platform.platform(), "device": dev,
        "device_name": name, "threads": torch.get_num_threads(), "attention_backend": attention,
        "oracle_extension": extension_status(),
    }
