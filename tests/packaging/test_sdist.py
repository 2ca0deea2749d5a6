"""bayesbench outside its checkout: the sdist builds, installs into a fresh virtual environment and
runs there, with the compiled extension, or without a compiler on the PyTorch reference.

Two module fixtures hold the expensive part: `sdist` (`python -m build --sdist --no-isolation` of
this checkout, a few seconds) and `built`, the wheel pip builds from that sdist to install it
(`pip wheel --no-build-isolation`: about 1.5 minutes on 2 cores, nearly all of it compiling
bayesbench._C once), kept as its own step so the wheel can be checked too and then installed.

A fresh environment is `python -m venv --without-pip` plus a .pth file listing this test
environment's site-packages, so torch, numpy and pip are found and nothing is downloaded
(`--no-index`); the package itself is installed into the fresh environment, which comes first on
its path. Every command there runs from an empty folder, so the checkout cannot be imported by
accident (and the tests assert it was not).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import torch
from packaging.version import Version

from bayesbench.running.provenance import checkout_commit

ROOT = Path(__file__).resolve().parents[2]
NOT_BUILT = "bayesbench: the compiled extension bayesbench._C was not built ("

pytestmark = pytest.mark.skipif(not (ROOT / ".git").exists() or shutil.which("git") is None,
                                reason="the sdist is built from a git checkout, and this is not one")


def _run(cmd: list[str], *, cwd: Path, env: dict | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env or _env(), capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n" \
                                 f"{proc.stderr[-5000:]}"
    return proc


def _env(**extra: str) -> dict:
    """The environment of a command outside the checkout: no PYTHONPATH, one torch thread, no store
    or debug settings inherited from the caller."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "BAYESBENCH_DB", "BAYESBENCH_DEBUG", "BAYESBENCH_NO_EXT", "CXX")}
    env.update(OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def _said(proc: subprocess.CompletedProcess) -> list[str]:
    """The lines setup.py printed about the extension (pip -v indents a build's output)."""
    lines = [line.strip() for line in (proc.stdout + proc.stderr).splitlines()]
    return [line for line in lines if line.startswith("bayesbench: ")]


def _fresh_venv(path: Path, hide: tuple[str, ...] = ()) -> Path:
    """A new virtual environment that sees this environment's packages; returns its python.

    hide: name prefixes of packages it must not see (their modules and their .dist-info): each
    site-packages folder is then given as a folder of links to its entries, less those."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    ours = [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)]
    if hide:
        seen = []
        for i, folder in enumerate(ours):
            links = path / f"seen-{i}"
            links.mkdir()
            for entry in Path(folder).iterdir():
                if not entry.name.startswith(hide):
                    (links / entry.name).symlink_to(entry)
            seen.append(str(links))
        ours = seen
    Path(site, "test_environment.pth").write_text("\n".join(ours) + "\n")
    return python


def _pip_install(python: Path, target: str, *args: str, cwd: Path, env: dict | None = None
                 ) -> subprocess.CompletedProcess:
    """`pip install TARGET` into the environment of `python`, building against the torch it sees.
    Not --no-deps: every requirement (the pinned torch, the extra's packages) must already be
    satisfied by this test environment's packages, since --no-index downloads nothing."""
    return _run([python, "-m", "pip", "--disable-pip-version-check", "install", *args, "--no-index",
                 "--no-build-isolation", target], cwd=cwd, env=env)


# The [ray] extra as docs/sweeps.md installs it on a Ray node, when Ray is here to satisfy it.
EXTRA = "[ray]" if importlib.util.find_spec("ray") is not None else ""


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> dict:
    """The sdist of this checkout, with the checkout's commit when it was built."""
    out = tmp_path_factory.mktemp("dist")
    commit = checkout_commit(str(ROOT))
    assert commit is not None, "git cannot read the checkout"
    _run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", out, ROOT], cwd=out)
    (path,) = out.glob("bayesbench-*.tar.gz")
    return {"sdist": path, "commit": commit, "dir": out}


@pytest.fixture(scope="module")
def built(sdist) -> dict:
    """The sdist and the wheel pip builds from it to install it (with the compile of bayesbench._C;
    -g0, setup.py, keeps it short and the wheel small)."""
    out = sdist["dir"] / "wheel"
    _run([sys.executable, "-m", "pip", "--disable-pip-version-check", "wheel", "--no-deps", "--no-index",
          "--no-build-isolation", "--wheel-dir", out, sdist["sdist"]], cwd=sdist["dir"])
    (wheel,) = out.glob("bayesbench-*.whl")
    return {**sdist, "wheel": wheel}


@pytest.fixture(scope="module")
def installed(built, tmp_path_factory) -> dict:
    """A fresh environment with the wheel built from the sdist installed, and an empty folder."""
    base = tmp_path_factory.mktemp("installed")
    python = _fresh_venv(base / "venv")
    _pip_install(python, f"{built['wheel']}{EXTRA}", cwd=base)
    work = base / "work"
    work.mkdir()
    return {"python": python, "bin": base / "venv" / "bin", "work": work, "venv": base / "venv"}


# ---------------------------------------------------------------- the artefacts


def test_sdist_carries_every_file_the_extension_needs(sdist):
    with tarfile.open(sdist["sdist"]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    tracked = subprocess.run(["git", "-C", ROOT, "ls-files", "csrc", "bayesbench/kernels"], capture_output=True,
                             text=True, check=True).stdout.split()
    assert tracked and any(n.endswith(".h") for n in tracked) and any(n.endswith(".cu") for n in tracked)
    assert set(tracked) <= names, sorted(set(tracked) - names)  # every header, .cu, .cuh, .cpp, Triton kernel
    for f in ("setup.py", "pyproject.toml", "MANIFEST.in", "LICENSE", "README.md", "CHANGELOG.md", "CITATION.cff",
              "docs/install.md", "PKG-INFO", "bayesbench/_version.py", "bayesbench/__main__.py"):
        assert f in names, f
    assert not [n for n in names if n.endswith((".so", ".pyc")) or n.startswith((".ci/", ".git"))], names


def test_wheel_is_abi3_pins_its_torch_and_knows_its_commit(built):
    wheel = built["wheel"]
    assert wheel.name.endswith("-cp311-abi3-linux_x86_64.whl") or "-abi3-" in wheel.name, wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        assert "bayesbench/_C.abi3.so" in names
        assert "bayesbench/kernels/attention_fwd.py" in names
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = z.read(meta).decode()
        version_file = z.read("bayesbench/_version.py").decode()
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    # A compiled extension loads only under the torch it was built against: exactly that release.
    assert f"Requires-Dist: torch=={Version(torch.__version__).public}\n" in metadata
    assert "License-Expression: MIT" in metadata
    assert f"__commit_node__ = 'g{built['commit']['git_commit']}'" in version_file
    assert f"__dirty__ = {built['commit']['git_dirty']}" in version_file


def test_the_sites_stylesheet_and_script_ship_from_a_listed_package(sdist, tmp_path):
    """bayesbench/report/static (no Python in it) was shipped only through a setuptools fallback
    that warned "Package 'bayesbench.report.static' is absent from the `packages` configuration"
    and will stop: a site built from such an install would have no stylesheet and no script.
    A pure wheel of the unpacked sdist (no compile: seconds) shows what `python -m build` says."""
    with tarfile.open(sdist["sdist"]) as tar:
        tar.extractall(tmp_path, filter="data")
    (src,) = tmp_path.glob("bayesbench-*")
    proc = _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", tmp_path / "pure", src],
                cwd=tmp_path, env=_env(BAYESBENCH_NO_EXT="1"))
    assert "absent from the `packages` configuration" not in proc.stdout + proc.stderr
    (wheel,) = (tmp_path / "pure").glob("bayesbench-*.whl")
    with zipfile.ZipFile(wheel) as z:
        assert {"bayesbench/report/static/site.css", "bayesbench/report/static/site.js"} <= set(z.namelist())
        # the lm-evaluation-harness task files (`bayesbench lm-eval-tasks` prints their folder)
        assert {f"bayesbench/scoring/lm_eval_tasks/{f}" for f in ("bayesbench_bijection.yaml", "bayesbench_sula.yaml",
                                                                   "utils.py")} <= set(z.namelist())


# ---------------------------------------------------------------- installed, outside the checkout

ORACLE_CHECK = r"""
import json, warnings
import torch
import bayesbench, bayesbench.ops as ops
from bayesbench.oracle import bijection_posterior, hmm_filter
g = torch.Generator().manual_seed(0)
B, S, V, L = 6, 4, 5, 11
trans = torch.rand(B, S, S, generator=g, dtype=torch.float64); trans /= trans.sum(-1, keepdim=True)
emit = torch.rand(B, S, V, generator=g, dtype=torch.float64); emit /= emit.sum(-1, keepdim=True)
obs = torch.randint(0, V, (B, L), generator=g)
perm = torch.stack([torch.randperm(V, generator=g) for _ in range(B)])
keys = torch.randint(0, V, (B, L), generator=g)
values = torch.gather(perm, 1, keys)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    hmm = (hmm_filter(trans, emit, obs) - hmm_filter(trans, emit, obs, backend="reference")).abs().max().item()
    bij = (bijection_posterior(keys, values, V, dtype=torch.float64)
           - bijection_posterior(keys, values, V, backend="reference", dtype=torch.float64)).abs().max().item()
try:
    import bayesbench._C as C
    c_file = C.__file__
except ImportError:
    c_file = None
rows = hmm_filter(trans, emit, obs).sum(-1).sub(1).abs().max().item()
print(json.dumps({"bayesbench": bayesbench.__file__, "version": bayesbench.__version__, "C": c_file,
                  "status": ops.extension_status(), "hmm": hmm, "bij": bij, "rows": rows,
                  "warnings": [str(w.message) for w in caught]}))
"""

TRAIN = ["train", "--task", "sticky", "--arch", "transformer", "--steps", "5", "--seeds", "0", "--eval-sequences", "64",
         "--db", "results.sqlite", "--runs-dir", "runs", "--no-progress", "--no-curves"]

STORED = r"""
import glob, json
from bayesbench.store.database import read_rows
(row,) = read_rows("results.sqlite")
(run_file,) = glob.glob("runs/**/run.json", recursive=True)
import bayesbench
(api_row,) = bayesbench.records(db="results.sqlite")
print(json.dumps({"row": row["environment"], "run_json": json.load(open(run_file))["environment"],
                  "api": api_row["environment"]}))
"""


def _check_runs_outside(env: dict, *, python: Path, bin_dir: Path, work: Path, venv: Path, native: bool) -> dict:
    """The oracle and a 5-step training job from an empty folder; returns the oracle check."""
    oracle = json.loads(_run([python, "-c", ORACLE_CHECK], cwd=work, env=env).stdout)
    assert oracle["bayesbench"].startswith(str(venv)), oracle  # the installed copy, not the checkout
    assert oracle["rows"] < 1e-12
    assert oracle["hmm"] < 1e-12 and oracle["bij"] < 1e-12, oracle  # auto backend == reference
    if native:
        assert oracle["C"] and oracle["C"].startswith(str(venv)) and oracle["C"].endswith("_C.abi3.so"), oracle
        assert oracle["status"] == "built (cpu)" and oracle["warnings"] == [], oracle
    else:
        assert oracle["C"] is None and oracle["status"].startswith("not built"), oracle
        assert any("use the PyTorch reference" in w for w in oracle["warnings"]), oracle
    _run([bin_dir / "bayesbench", *TRAIN], cwd=work, env=env)
    return oracle


def test_installed_from_the_sdist_runs_outside_the_checkout(built, installed):
    """bayesbench._C imports, the oracle runs natively and agrees with the reference, a training job
    stores a row, and the row, run.json and the row as `bayesbench.records` gives it name the version
    and the commit the sdist was built from."""
    env = _env()
    oracle = _check_runs_outside(env, python=installed["python"], bin_dir=installed["bin"], work=installed["work"],
                                 venv=installed["venv"], native=True)
    stored = json.loads(_run([installed["python"], "-c", STORED], cwd=installed["work"], env=env).stdout)
    for environment in (stored["row"], stored["run_json"], stored["api"]):  # the store, run.json, the Python API
        assert environment["bayesbench"] == oracle["version"]
        assert environment["git_commit"] == built["commit"]["git_commit"]
        assert environment["git_dirty"] == built["commit"]["git_dirty"]
        assert environment["commit_source"] == "build"
    assert built["wheel"].name.startswith(f"bayesbench-{oracle['version']}-")

    version = _run([installed["bin"] / "bayesbench", "--version"], cwd=installed["work"], env=env).stdout
    assert version.splitlines() == [
        f"bayesbench {oracle['version']} (commit {built['commit']['git_commit'][:12]}"
        f"{' with uncommitted changes' if built['commit']['git_dirty'] else ''}, from the build)",
        "compiled extension bayesbench._C: installed"]
    as_module = _run([installed["python"], "-m", "bayesbench", "--version"], cwd=installed["work"], env=env)
    assert as_module.stdout == version


def test_without_a_compiler_the_sdist_installs_and_runs_on_the_reference(sdist, tmp_path):
    """No C++ compiler (CXX names a program that does not exist): the install succeeds, says so in
    one line, and everything runs on the PyTorch reference oracle."""
    python = _fresh_venv(tmp_path / "venv")
    env = _env(CXX=str(tmp_path / "no-such-compiler"))
    proc = _pip_install(python, f"{sdist['sdist']}{EXTRA}", "-v", cwd=tmp_path, env=env)
    lines = _said(proc)
    assert len(lines) == 1 and lines[0].startswith(NOT_BUILT + "no C++ compiler: CXX="), lines
    assert "runs on the PyTorch reference oracle" in lines[0]
    work = tmp_path / "work"
    work.mkdir()
    env = _env()
    _check_runs_outside(env, python=python, bin_dir=tmp_path / "venv" / "bin", work=work, venv=tmp_path / "venv",
                        native=False)
    version = _run([tmp_path / "venv" / "bin" / "bayesbench", "--version"], cwd=work, env=env).stdout
    assert version.splitlines()[1].startswith("compiled extension bayesbench._C: not built")


def test_a_failing_compiler_gives_a_wheel_without_the_extension(sdist, tmp_path):
    """A compiler that fails (here /bin/false): the wheel still builds, without bayesbench._C, and the
    build says so in one line; BAYESBENCH_REQUIRE_EXT=1 turns the same build into a failure."""
    env = _env(CXX=shutil.which("false") or "/bin/false")
    proc = _run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-index", "--no-build-isolation",
                 "--wheel-dir", tmp_path, sdist["sdist"]], cwd=tmp_path, env=env)
    lines = _said(proc)
    assert len(lines) == 1 and lines[0].startswith(NOT_BUILT), lines
    (wheel,) = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        assert not [n for n in z.namelist() if "/_C" in n]
    with tarfile.open(sdist["sdist"]) as tar:  # the compiling step alone (setup.py build_ext) is enough here
        tar.extractall(tmp_path / "src", filter="data")
    (src,) = (tmp_path / "src").iterdir()
    required = subprocess.run([sys.executable, "setup.py", "build_ext"], cwd=src,
                              env={**env, "BAYESBENCH_REQUIRE_EXT": "1"}, capture_output=True, text=True, timeout=900)
    assert required.returncode != 0
    assert "BAYESBENCH_REQUIRE_EXT=1 or BAYESBENCH_CUDA=1 requires it" in required.stdout + required.stderr


def test_no_ext_builds_a_pure_python_wheel(sdist, tmp_path):
    """BAYESBENCH_NO_EXT=1: a py3-none-any wheel that asks only for torch>=2.4."""
    env = _env(BAYESBENCH_NO_EXT="1")
    proc = _run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-index", "--no-build-isolation",
                 "--wheel-dir", tmp_path, sdist["sdist"]], cwd=tmp_path, env=env)
    assert _said(proc) == ["bayesbench: BAYESBENCH_NO_EXT is set: the compiled extension bayesbench._C is not built"]
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    with zipfile.ZipFile(wheel) as z:
        metadata = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    assert "Requires-Dist: torch>=2.4\n" in metadata


@pytest.mark.parametrize("after_tag", [0, 1], ids=["at-the-tag", "one-commit-after"])
def test_a_git_archive_export_gets_its_version_and_commit(after_tag, tmp_path):
    """`git archive` of a tagged history fills .git_archival.txt (export-subst), and an sdist built
    from the export has the tag's version (or the next dev version after it) and the full commit.
    Done in a clone, tagged there."""
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    if subprocess.run(["git", "-C", ROOT, "cat-file", "-e", f"{head}:.git_archival.txt"]).returncode != 0:
        pytest.skip("HEAD has no .git_archival.txt yet (uncommitted)")
    clone, export = tmp_path / "clone", tmp_path / "export"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-C", clone]
    subprocess.run(["git", "clone", "-q", "--no-checkout", ROOT, clone], check=True)
    subprocess.run([*git, "tag", "-a", "v7.1.0", "-m", "a test tag", head], check=True)
    commit = head
    if after_tag:
        commit = subprocess.run([*git, "commit-tree", "-m", "after the tag", "-p", head, f"{head}^{{tree}}"],
                                check=True, capture_output=True, text=True).stdout.strip()
    export.mkdir()
    archive = subprocess.run([*git, "archive", "--format=tar", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", export], input=archive, check=True)
    assert f"node: {commit}" in (export / ".git_archival.txt").read_text()
    _run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", tmp_path / "dist", export],
         cwd=tmp_path, env=_env(BAYESBENCH_NO_EXT="1"))
    (sdist,) = (tmp_path / "dist").glob("*.tar.gz")
    version = sdist.name.removeprefix("bayesbench-").removesuffix(".tar.gz")
    if after_tag:  # the next dev version, with the (abbreviated) commit
        assert re.fullmatch(rf"7\.1\.1\.dev1\+g{commit[:7]}[0-9a-f]*", version), version
    else:
        assert version == "7.1.0"
    with tarfile.open(sdist) as tar:
        version_file = tar.extractfile(f"bayesbench-{version}/bayesbench/_version.py").read().decode()
    assert f"__version__ = '{version}'" in version_file
    assert f"__commit_node__ = 'g{commit}'" in version_file, version_file
    assert "__dirty__ = False" in version_file


def _fallback_version() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    return re.search(r'^fallback_version\s*=\s*"([^"]+)"', text, re.MULTILINE).group(1)


def test_a_git_archive_no_tag_reaches_gets_the_fallback_version_and_commit(tmp_path):
    """`git archive` of a commit that no tag reaches (a GitHub "source code" download of a fork or
    of a repository whose tags were not pushed): .git_archival.txt has the commit but an empty
    describe-name, where setuptools-scm alone says 0.0. The sdist built from the export has the
    fallback version with the commit as its local label, and the full commit in its version file."""
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    if subprocess.run(["git", "-C", ROOT, "cat-file", "-e", f"{head}:.git_archival.txt"]).returncode != 0:
        pytest.skip("HEAD has no .git_archival.txt yet (uncommitted)")
    clone, export = tmp_path / "clone", tmp_path / "export"
    subprocess.run(["git", "clone", "-q", "--no-checkout", "--no-tags", ROOT, clone], check=True)
    subprocess.run(["git", "-C", clone, "tag", "-d", *subprocess.run(
        ["git", "-C", clone, "tag"], capture_output=True, text=True).stdout.split()], capture_output=True)
    export.mkdir()
    archive = subprocess.run(["git", "-C", clone, "archive", "--format=tar", head], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", export], input=archive, check=True)
    archival = (export / ".git_archival.txt").read_text()
    assert f"node: {head}" in archival and "describe-name: \n" in archival + "\n", archival
    _run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", tmp_path / "dist", export],
         cwd=tmp_path, env=_env(BAYESBENCH_NO_EXT="1"))
    (sdist,) = (tmp_path / "dist").glob("*.tar.gz")
    version = sdist.name.removeprefix("bayesbench-").removesuffix(".tar.gz")
    assert version == f"{_fallback_version()}+g{head[:9]}", version
    with tarfile.open(sdist) as tar:
        version_file = tar.extractfile(f"bayesbench-{version}/bayesbench/_version.py").read().decode()
    assert f"__commit_node__ = 'g{head}'" in version_file, version_file


def test_the_sdist_installs_with_its_version_where_setuptools_scm_is_not(sdist, tmp_path):
    """An environment without setuptools-scm (pip install --no-build-isolation there): the sdist's
    PKG-INFO gives the version (setuptools alone would record 0.0.0), and the build says so."""
    python = _fresh_venv(tmp_path / "venv", hide=("setuptools_scm", "vcs_versioning", "vcs-versioning"))
    assert _run([python, "-c", "import importlib.util as u; print(u.find_spec('setuptools_scm'))"],
                cwd=tmp_path).stdout.strip() == "None"
    proc = _pip_install(python, str(sdist["sdist"]), "-v", "--no-deps", cwd=tmp_path, env=_env(BAYESBENCH_NO_EXT="1"))
    expected = sdist["sdist"].name.removeprefix("bayesbench-").removesuffix(".tar.gz")
    assert f"bayesbench: setuptools-scm is not installed: version {expected}, from PKG-INFO" in _said(proc)
    work = tmp_path / "work"
    work.mkdir()
    installed = _run([python, "-c", "import importlib.metadata as m; print(m.version('bayesbench'))"], cwd=work)
    assert installed.stdout.strip() == expected


def test_pip_installs_from_a_git_url(tmp_path):
    """`pip install 'bayesbench[ray] @ git+URL'` (docs/sweeps.md) installs the committed HEAD of the
    clone, knowing its version and commit. With BAYESBENCH_NO_EXT=1: the compile is tested above."""
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    python = _fresh_venv(tmp_path / "venv")
    _pip_install(python, f"bayesbench{EXTRA} @ git+file://{ROOT}", cwd=tmp_path, env=_env(BAYESBENCH_NO_EXT="1"))
    work = tmp_path / "work"
    work.mkdir()
    script = ("import json, bayesbench; from bayesbench.running.provenance import provenance; "
              "print(json.dumps({'file': bayesbench.__file__, **provenance()}))")
    installed = json.loads(_run([python, "-c", script], cwd=work).stdout)
    assert installed["file"].startswith(str(tmp_path / "venv")), installed
    assert installed["git_commit"] == head and installed["git_dirty"] is False, installed
    assert installed["commit_source"] == "build"


def test_a_failed_in_place_build_leaves_no_older_extension(tmp_path):
    """An editable install whose compile fails removes the _C*.so of older builds from the package
    folder, so the reference runs, as the line says, not stale compiled code (`setup.py build_ext
    --inplace` is the step of `pip install -e .` that compiles)."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", ROOT, clone], check=True)
    shutil.copy(ROOT / "setup.py", clone / "setup.py")  # this checkout's setup.py, committed or not
    older = [clone / "bayesbench" / "_C.abi3.so", clone / "bayesbench" / "_C.cpython-311-x86_64-linux-gnu.so"]
    for f in older:
        f.write_bytes(b"an older build")
    proc = _run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=clone,
                env=_env(CXX=str(tmp_path / "no-such-compiler")))
    said = _said(proc)
    assert len(said) == 1 and said[0].startswith(NOT_BUILT + "no C++ compiler"), said
    assert not [f for f in older if f.exists()]
