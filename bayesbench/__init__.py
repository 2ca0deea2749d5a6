"""bayesbench: does a sequence model compute the exact Bayes posterior?

Bayesian wind tunnels (tasks with a closed-form posterior), exact oracles, metrics in bits,
ensemble-native models, a trainer, a results store and a leaderboard.

The Python API (docs/api.md), the `bayesbench` command's work from a notebook:

    import bayesbench

    rows = bayesbench.run(tasks="bijection", archs="mlp", steps=20, seeds=1, db="tiny.sqlite")
    result = bayesbench.train("bijection", "mlp", steps=20, seeds=[0, 1], db="tiny.sqlite")
    board = bayesbench.leaderboard(db="tiny.sqlite")     # rows; board.to_pandas() with pandas
    stored = bayesbench.records(db="tiny.sqlite")

Importing the package imports none of them (nor torch): each is loaded when first used.
"""

from __future__ import annotations

import sys as _sys

from .running.provenance import package_version as _package_version

__version__ = _package_version()  # from git tags at build time (setuptools-scm); the commit: running/provenance.py

# name -> the module defining it, imported on first use (PEP 562)
_API = {"run": "bayesbench.api", "train": "bayesbench.api", "leaderboard": "bayesbench.api",
        "records": "bayesbench.api", "Rows": "bayesbench.api", "TrainedRun": "bayesbench.api"}

__all__ = ["Rows", "TrainedRun", "__version__", "evaluate_model", "leaderboard", "model_spec", "records", "run",
           "train"]


def evaluate_model(model, task, **kwargs):
    """Score a trained model (a plain nn.Module or an ensemble) on `task`'s fixed evaluation sets
    and store it; see `bayesbench.scoring.trained_elsewhere.evaluate_model`."""
    from .scoring.trained_elsewhere import evaluate_model as _evaluate_model

    return _evaluate_model(model, task, **kwargs)


def model_spec(task, preset: str = "quick"):
    """The spec (TaskShape) a model factory gets for `task`; see `bayesbench.scoring.trained_elsewhere.model_spec`."""
    from .scoring.trained_elsewhere import model_spec as _model_spec

    return _model_spec(task, preset)


def __getattr__(name: str):
    if name in _API:
        import importlib

        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({n for n in globals() if not n.startswith("_")} | set(_API) | {"__version__"})


class _TorchFirst:
    """A finder that loads torch before the compiled extension `bayesbench._C` is loaded, and finds
    nothing itself: the extension links torch's libraries (libc10, libtorch), which only `import
    torch` loads, so `import bayesbench._C` on its own failed with 'libc10.so: cannot open shared
    object file'. Importing the package alone still imports no torch."""

    def find_spec(self, fullname: str, path, target=None):
        if fullname == f"{__name__}._C":
            import torch  # noqa: F401  (imported for its side effect: libtorch loaded before the extension)

        return None


if not any(isinstance(f, _TorchFirst) for f in _sys.meta_path):
    _sys.meta_path.insert(0, _TorchFirst())
