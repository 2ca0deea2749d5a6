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
                                   ModuleNotFoundError("No module named 'bayesbench.kernels'",
                                                       name="bayesbench.kernels"),
                                   SyntaxError("invalid syntax")])
def test_a_broken_model_file_raises(monkeypatch, error):
    with pytest.raises(type(error)):
        _discover_with(monkeypatch, error)
    assert not registry._discovered


def test_every_builtin_architecture_is_found_in_the_file_named_after_it():
    """Looking an architecture up imports the file named after it (`registry.home_candidates`)
    alone; for every architecture the package's files register (`registry.homes`, what
    registration recorded), that file is the first candidate, so no lookup imports every file."""
    from bayesbench.models import registry

    homes = registry.homes()
    assert {"transformer", "mlp", "lstm"} <= set(homes)
    misplaced = {name: (home, registry.home_candidates(name)) for name, home in homes.items()
                 if registry.home_candidates(name)[:1] != [home]}
    assert not misplaced, ("name each architecture's file after it ('mlp-prefix' in mlp_prefix.py or mlp.py), "
                           f"else looking it up imports every model file: {misplaced}")


def test_a_registered_architecture_can_be_unregistered_and_registering_is_undone():
    from bayesbench.models import list_models

    before = list_models()
    with registry.registered_models():
        registry.register_model("throwaway", "a test's")(lambda shape, ensemble: None)
        assert "throwaway" in list_models()
    assert list_models() == before
    with pytest.raises(ValueError, match="unknown model 'throwaway': nothing to unregister"):
        registry.unregister_model("throwaway")


def test_building_one_model_imports_only_its_file():
    import subprocess
    import sys

    code = ("import sys; from bayesbench.models import get_model; from bayesbench.tasks import get_task; "
            "get_model('mlp', get_task('bijection', V=8)); "
            "print(sorted(m for m in sys.modules if m.startswith('bayesbench.models.')), "
            "'torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for other in ("mamba", "scan", "lstm", "gru", "linear_attention", "hf", "outside"):
        assert f"'bayesbench.models.{other}'" not in out, out
    assert out.strip().endswith("False"), f"building an MLP imported torch._dynamo: {out}"
