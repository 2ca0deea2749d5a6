"""Old import paths of the earlier layout keep working through 0.1.x (bayesbench/_moved.py): each warns
once with a DeprecationWarning naming the new path, and gives the very objects of the new home."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
import warnings

import pytest

import bayesbench
from bayesbench import _moved, api


def _forget(old: str) -> None:
    """As if `old` had never been imported in this process (its warning comes once per process)."""
    sys.modules.pop(old, None)
    parent, _, child = old.rpartition(".")
    if parent in sys.modules:
        sys.modules[parent].__dict__.pop(child, None)


@pytest.mark.parametrize("old,new", sorted(_moved.MOVED_MODULES.items()))
def test_an_old_module_path_warns_and_is_the_new_module(old, new):
    _forget(old)
    with pytest.warns(DeprecationWarning) as caught:
        exec(f"import {old} as module_at_old_path", namespace := {})
    assert [str(w.message) for w in caught] == [_moved.message(old, new)]
    assert f"{old} moved to {new}" in str(caught[0].message) and _moved.REMOVED_IN in str(caught[0].message)
    assert caught[0].filename == "<string>"  # the importing line, not importlib's
    if old in _moved.API_NAMES:  # `import a.b as m` reads the attribute a.b: the API function stays there
        assert namespace["module_at_old_path"] is getattr(api, old.rpartition(".")[2])
        assert sys.modules[old] is importlib.import_module(new)
    else:
        assert namespace["module_at_old_path"] is importlib.import_module(new)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert importlib.import_module(old) is importlib.import_module(new)  # once per process


def test_the_new_homes_exist():
    for new in [*_moved.MOVED_MODULES.values(), *_moved.MOVED_INTO_PACKAGE.values()]:
        assert importlib.util.find_spec(new) is not None, new


@pytest.mark.parametrize("old,function", [("bayesbench.train", api.train), ("bayesbench.leaderboard", api.leaderboard)])
def test_old_modules_named_like_api_functions_leave_the_function_in_place(old, function):
    new = _moved.MOVED_MODULES[old]
    name = next(n for n, obj in vars(importlib.import_module(new)).items()
                if not n.startswith("_") and getattr(obj, "__module__", None) == new)
    _forget(old)
    with pytest.warns(DeprecationWarning, match=f"{old} is now {old}"):
        exec(f"from {old} import {name} as imported", namespace := {})
    assert namespace["imported"] is getattr(importlib.import_module(new), name)
    assert getattr(bayesbench, old.rpartition(".")[2]) is function  # the import did not replace the function
    exec(f"import {old}", namespace)
    assert getattr(bayesbench, old.rpartition(".")[2]) is function


@pytest.mark.parametrize("package,new", sorted(_moved.MOVED_INTO_PACKAGE.items()))
def test_names_of_a_module_that_became_a_package(package, new):
    module = importlib.import_module(new)
    name = next(n for n, obj in vars(module).items()
                if not n.startswith("_") and getattr(obj, "__module__", None) == new
                and (inspect.isfunction(obj) or inspect.isclass(obj)))
    _forget(f"{package}.{name}")
    with pytest.warns(DeprecationWarning, match=f"import {name} from {new} instead"):
        exec(f"from {package} import {name} as imported", namespace := {})
    assert namespace["imported"] is getattr(module, name)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        getattr(importlib.import_module(package), "no_such_name")


def test_a_submodule_of_a_former_module_imports_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from bayesbench.scoring import metrics  # a submodule of the package, not an old name
    assert metrics is importlib.import_module("bayesbench.scoring.metrics")


def test_an_old_module_read_as_an_attribute_warns_at_the_reading_line():
    _forget("bayesbench.record")
    with pytest.warns(DeprecationWarning, match="bayesbench.record moved to bayesbench.store.records") as caught:
        records_module = bayesbench.record
    assert records_module is importlib.import_module("bayesbench.store.records")
    assert caught[0].filename == __file__


def test_a_script_sees_the_warning_at_its_import_line(tmp_path):
    script = tmp_path / "old.py"
    script.write_text("import bayesbench.metrics\nfrom bayesbench.train import Trainer\n")
    proc = subprocess.run([sys.executable, "-W", "default::DeprecationWarning", str(script)], capture_output=True,
                          text=True, check=True)
    assert f"{script}:1: DeprecationWarning: bayesbench.metrics moved to bayesbench.scoring.metrics" in proc.stderr
    assert f"{script}:2: DeprecationWarning: bayesbench.train moved to bayesbench.training.trainer" in proc.stderr


def test_python_dash_m_of_an_old_path_runs_its_new_module():
    """probe2 M9: `python -m bayesbench.sweep.cli` (an old path) ended in a traceback from runpy
    ("'MovedModules' object has no attribute 'get_code'"); it runs the module at its new home, with the warning."""
    for old, new in (("bayesbench.runlock", "bayesbench.running.runlock"),
                     ("bayesbench.sweep.cli", "bayesbench.cli.sweep")):
        proc = subprocess.run([sys.executable, "-W", "default::DeprecationWarning", "-m", old], capture_output=True,
                              text=True)
        assert proc.returncode == 0, proc.stderr  # the new module imports (its relative imports resolve) and ends
        assert "Traceback" not in proc.stderr
        assert f"{old} moved to {new}" in proc.stderr


def test_a_split_module_finds_each_name_in_its_new_home():
    """`bayesbench.store.leaderboard` went to report/ in several modules: its names still import
    from the old path, with the warning, and are the new objects (probe2 case M13)."""
    import sys

    sys.modules.pop("bayesbench.store.leaderboard", None)
    with pytest.warns(DeprecationWarning, match="bayesbench.store.leaderboard was split"):
        from bayesbench.store.leaderboard import aggregate, headline, markdown, row_settings, select_rows
    from bayesbench.report import headline as headline_module
    from bayesbench.report import leaderboard, rows, selection
    from bayesbench.store import database

    assert select_rows is selection.select_rows and aggregate is rows.aggregate
    assert markdown is leaderboard.markdown and headline is headline_module.headline
    assert row_settings is database.row_settings
    with pytest.raises(ImportError, match="nope"):
        from bayesbench.store.leaderboard import nope  # noqa: F401
