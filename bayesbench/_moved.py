"""Old import paths that keep working for one release, each with a DeprecationWarning naming the new one.

The layout of release 0.1 grouped the top-level modules by purpose (training/, scoring/, store/,
running/, cli/, report/, one subpackage per dynamics study). Code written against the earlier
layout (`from bayesbench.metrics import ...`, `import bayesbench.results`) keeps working through
0.1.x: importing an old path warns once and gives the module at its new home itself (the same
objects, `is`-identical). The old paths go in 0.2.

Two old modules share their name with a function of the Python API (`bayesbench/api.py`):
`bayesbench.train` and `bayesbench.leaderboard` are the functions. `from bayesbench.train import
Trainer` and `import bayesbench.train` still reach the old module's names (with the warning),
and never replace the function: the attribute `bayesbench.train` stays the function (and so does
`import bayesbench.train as m`, which reads that attribute).

Three old modules became packages of the same name (`bayesbench.scoring`,
`bayesbench.dynamics.emsgd`, `bayesbench.dynamics.geometry`): their names are still found on the
package (`from bayesbench.scoring import evaluate_model`), with the warning (`moved_name`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

REMOVED_IN = "0.2"

#: old module -> the module that holds its code now
MOVED_MODULES = {
    "bayesbench.metrics": "bayesbench.scoring.metrics",
    "bayesbench.evaluate": "bayesbench.scoring.evaluate",
    "bayesbench.floors": "bayesbench.scoring.floors",
    "bayesbench.train": "bayesbench.training.trainer",
    "bayesbench.checkpoint": "bayesbench.training.checkpoint",
    "bayesbench.optim": "bayesbench.training.optim",
    "bayesbench.seeds": "bayesbench.training.seeds",
    "bayesbench.results": "bayesbench.store.database",
    "bayesbench.record": "bayesbench.store.records",
    "bayesbench.leaderboard": "bayesbench.report.leaderboard",
    "bayesbench.plots": "bayesbench.report.plots",
    "bayesbench.runner": "bayesbench.sweep.jobs",
    "bayesbench.workers": "bayesbench.running.pool",
    "bayesbench.interrupt": "bayesbench.running.interrupt",
    "bayesbench.runlock": "bayesbench.running.runlock",
    "bayesbench.demo": "bayesbench.cli.tunnels",
    "bayesbench.cli_errors": "bayesbench.cli.errors",
    "bayesbench.cli_model": "bayesbench.cli.model_option",
    "bayesbench.sweep.cli": "bayesbench.cli.sweep",
    "bayesbench.sweep.worker": "bayesbench.sweep.one_job",
    "bayesbench.store.runs": "bayesbench.dynamics.runs",
    "bayesbench.store.plots": "bayesbench.report.plots",
    "bayesbench.store.figures": "bayesbench.figures",
    "bayesbench.store.compare": "bayesbench.report.compare",
    "bayesbench.store.curve_stats": "bayesbench.report.curve_stats",
    "bayesbench.specs": "bayesbench.outside_code",
    "bayesbench.sweep.spec": "bayesbench.sweep.sweep_file",
    "bayesbench.scoring.cases": "bayesbench.scoring.by_case",
    "bayesbench.scoring.outside": "bayesbench.scoring.trained_elsewhere",
    "bayesbench.tasks.cases": "bayesbench.tasks.case_masks",
    "bayesbench.cli.outside_model": "bayesbench.cli.model_option",
    "bayesbench.dynamics.partial": "bayesbench.dynamics.cut_short",
    "bayesbench.dynamics.sticky_chain": "bayesbench.dynamics.emsgd.chain",
    "bayesbench.dynamics.emsgd_deep": "bayesbench.dynamics.emsgd.deep",
    "bayesbench.dynamics.emsgd_plots": "bayesbench.dynamics.emsgd.plots",
    "bayesbench.dynamics.emsgd_study": "bayesbench.dynamics.emsgd.study",
    "bayesbench.dynamics.speedup": "bayesbench.dynamics.emsgd.speedup",
    "bayesbench.dynamics.geometry_plots": "bayesbench.dynamics.geometry.plots",
    "bayesbench.dynamics.geometry_study": "bayesbench.dynamics.geometry.study",
    "bayesbench.dynamics.frames": "bayesbench.dynamics.profile.frames",
    "bayesbench.dynamics.plots": "bayesbench.dynamics.profile.plots",
    "bayesbench.dynamics.probes": "bayesbench.dynamics.profile.probes",
    "bayesbench.dynamics.profiler": "bayesbench.dynamics.profile.profiler",
    "bayesbench.dynamics.profile_report": "bayesbench.dynamics.profile.report",
    "bayesbench.dynamics.resume": "bayesbench.dynamics.profile.resume",
    "bayesbench.dynamics.routing": "bayesbench.dynamics.profile.routing",
    "bayesbench.dynamics.profile_cmd": "bayesbench.dynamics.profile.study",
    "bayesbench.dynamics.summary": "bayesbench.dynamics.profile.summary",
}

#: an old module that is a package now -> the module of that package holding the old module's names
MOVED_INTO_PACKAGE = {
    "bayesbench.scoring": "bayesbench.scoring.trained_elsewhere",
    "bayesbench.dynamics.emsgd": "bayesbench.dynamics.emsgd.toy",
    "bayesbench.dynamics.geometry": "bayesbench.dynamics.geometry.measure",
}

#: an old module whose names went to several modules: they are looked up in these, in order
SPLIT_MODULES = {
    "bayesbench.store.leaderboard": ("bayesbench.report.leaderboard", "bayesbench.report.selection",
                                     "bayesbench.report.rows", "bayesbench.report.headline",
                                     "bayesbench.store.database"),
}

#: old modules whose name is now a function of the Python API
API_NAMES = {"bayesbench.train": "bayesbench.train(...), the function that trains one run",
             "bayesbench.leaderboard": "bayesbench.leaderboard(...), the function that returns the leaderboard's rows"}


def message(old: str, new: str, name: str | None = None) -> str:
    """The warning for an old module path (or for `name` of an old module): where it lives now,
    and until when the old path works."""
    if name is not None:
        return (f"{old}.{name} moved to {new}.{name}; the old import path works until bayesbench {REMOVED_IN}: "
                f"import {name} from {new} instead")
    now = f" ({old} is now {API_NAMES[old]})" if old in API_NAMES else ""
    return (f"{old} moved to {new}{now}; the old import path works until bayesbench {REMOVED_IN}: "
            f"import {new} instead")


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old module path (`MOVED_MODULES`) and loads it as the module at its new home; a split
    one (`SPLIT_MODULES`) becomes a module that finds each name in its new home."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED_MODULES and fullname not in SPLIT_MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return None  # a placeholder module; exec_module puts the real one in its place

    def exec_module(self, module) -> None:
        old = module.__name__
        if old in SPLIT_MODULES:  # a module of its own whose names come from their new homes
            homes = SPLIT_MODULES[old]
            warnings.warn(f"{old} was split: its names moved to {', '.join(homes)}; the old import path works "
                          f"until bayesbench {REMOVED_IN}: import each name from its new module instead",
                          DeprecationWarning, stacklevel=2)
            module.__getattr__ = lambda name: _split_name(old, homes, name)
            return
        new = MOVED_MODULES[old]
        # stacklevel 2: importlib's own frames are skipped, so the warning names the importing line
        warnings.warn(message(old, new), DeprecationWarning, stacklevel=2)
        # the import system returns what sys.modules holds after this: the module at its new home
        sys.modules[old] = importlib.import_module(new)


    def get_code(self, fullname):
        """`python -m OLD` (runpy asks for code, not for exec_module): run the module at its new home,
        as `python -m NEW` would (in its own package, so that its relative imports resolve)."""
        new = MOVED_MODULES[fullname]
        warnings.warn(message(fullname, new), DeprecationWarning, stacklevel=2)
        origin = importlib.util.find_spec(new).origin  # runpy set sys.argv[0] to this placeholder's (none)
        return compile(f"import runpy, sys\nsys.argv[0] = {origin!r}\n"
                       f"runpy.run_module({new!r}, run_name='__main__', alter_sys=True)\n",
                       f"<{fullname}: moved to {new}>", "exec")


def import_quietly(old: str):
    """The module at old path `old`'s new home, without the finder's warning (its caller warns)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module(old)


def install() -> None:
    """Put the finder on sys.meta_path (once)."""
    if not any(isinstance(f, MovedModules) for f in sys.meta_path):
        sys.meta_path.append(MovedModules())


def moved_name(package: str, name: str):
    """A name of the old module `package` (`MOVED_INTO_PACKAGE`), from its new home, with the
    warning; AttributeError for any other name (so a submodule still imports as usual)."""
    if name.startswith("__") or importlib.util.find_spec(f"{package}.{name}") is not None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    new = MOVED_INTO_PACKAGE[package]
    value = getattr(importlib.import_module(new), name, _MISSING)
    if value is _MISSING or name.startswith("_"):
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    warnings.warn(message(package, new, name), DeprecationWarning, stacklevel=3)
    sys.modules[package].__dict__[name] = value  # warned once; `from package import name` reads it twice
    return value


def _split_name(old: str, homes: tuple[str, ...], name: str):
    """`name` of the split old module `old`, from the first of `homes` that has it."""
    if not name.startswith("_"):
        for home in homes:
            value = getattr(importlib.import_module(home), name, _MISSING)
            if value is not _MISSING:
                return value
    raise AttributeError(f"module {old!r} has no attribute {name!r} (its names now live in {', '.join(homes)})")


_MISSING = object()
