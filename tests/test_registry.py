"""Model discovery: a model file is skipped only when an optional package it needs is missing
(with a warning naming the package); any other import error is a bug and raises."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest

from bayesbench.models import registry


def _discover_with(monkeypatch, error: BaseException) -> None:
    """Run discovery over one fake model module whose import raises `error`."""
    real = importlib.import_module

    def fake_import(name, *args, **kwargs):
        if name == "bayesbench.models.fake_model":
            raise error
        return real(name, *args, **kwargs)

    monkeypatch.setattr(registry, "_discovered", False)
    monkeypatch.setattr(registry.pkgutil, "iter_modules", lambda path: [SimpleNamespace(name="fake_model")])
    monkeypatch.setattr(registry.importlib, "import_module", fake_import)
    registry._discover()


def test_missing_optional_package_is_skipped_by_name(monkeypatch):
    with pytest.warns(RuntimeWarning, match="bayesbench.models.fake_model needs the optional package 'mamba_ssm'"):
        _discover_with(monkeypatch, ModuleNotFoundError("No module named 'mamba_ssm'", name="mamba_ssm"))
    assert registry._discovered


@pytest.mark.parametrize("error", [RuntimeError("a bug in the model file"),
                                   ModuleNotFoundError("No module named 'bayesbench.kernels'", name="bayesbench.kernels"),
                                   SyntaxError("invalid syntax")])
def test_a_broken_model_file_raises(monkeypatch, error):
    with pytest.raises(type(error)):
        _discover_with(monkeypatch, error)
    assert not registry._discovered
