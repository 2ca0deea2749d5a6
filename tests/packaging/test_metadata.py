"""The release's metadata agree with each other: CITATION.cff, CHANGELOG.md, LICENSE, pyproject.toml,
requirements.txt."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _citation() -> dict:
    return yaml.safe_load((ROOT / "CITATION.cff").read_text())


def _newest_release() -> tuple[str, str]:
    """(version, date) of the newest `## X.Y.Z (YYYY-MM-DD)` heading of CHANGELOG.md."""
    m = re.search(r"^## (\d+\.\d+\.\d+) \((\d{4}-\d{2}-\d{2})\)$", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert m, "CHANGELOG.md has no release heading '## X.Y.Z (YYYY-MM-DD)'"
    return m.group(1), m.group(2)


def test_citation_names_this_release_and_its_licence():
    cff, (version, date) = _citation(), _newest_release()
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert str(cff["version"]) == version and str(cff["date-released"]) == date
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert cff["license"] == pyproject["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n")
    assert "version" in pyproject["dynamic"] and "version" not in pyproject  # from git tags
    assert not {"repository", "repository-code", "url"} & set(cff)  # the file names no hosting of its own


def test_citation_references_the_two_papers():
    refs = {ref["identifiers"][0]["value"]: ref for ref in _citation()["references"]}
    assert refs["arXiv:2512.22471"]["title"] == "The Bayesian Geometry of Transformer Attention"
    assert refs["arXiv:2512.22473"]["title"] == ("Gradient Dynamics of Attention: How Cross-Entropy Sculpts "
                                                 "Bayesian Manifolds")
    for ref in refs.values():
        assert [a["family-names"] for a in ref["authors"]] == ["Aggarwal", "Dalal", "Misra"]
        assert ref["year"] == 2025 and ref["type"] == "article"


def test_no_unused_build_dependency():
    """pybind11 is not needed: csrc/register.cpp uses torch/library.h and the C API, not torch/extension.h."""
    requirements = (ROOT / "requirements.txt").read_text()
    assert "pybind11" not in requirements
    for source in (ROOT / "csrc").glob("*.*"):
        text = source.read_text()
        assert "pybind11" not in text.replace("(no pybind11)", "") and "torch/extension.h" not in text, source


def _install_md() -> str:
    return (ROOT / "docs" / "install.md").read_text()


def test_install_md_names_every_extra():
    """`[data]` (data export, score --predictions) was missing from the extras docs/install.md lists,
    though the commands' messages say `pip install 'bayesbench[data]'`."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    text = _install_md()
    assert [e for e in extras if f"`[{e}]`" not in text] == []


def test_the_install_recipe_installs_what_a_build_without_isolation_needs():
    """The recipe installed torch, then the sdist with --no-build-isolation: in a new virtual
    environment (setuptools 65.5, no setuptools-scm) that fails with 'invalid pyproject.toml config:
    project.license'. Every build requirement but torch's own line is installed first."""
    recipe = re.search(r"```bash\n(.*?)```", _install_md(), re.S).group(1)
    first, install = recipe.splitlines()[:2]
    assert "--no-build-isolation" in install and first.startswith("pip install torch")
    for requirement in tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]:
        assert requirement.split(">")[0] == "torch" or f"'{requirement}'" in first, requirement
