"""bayesbench: does a sequence model compute the exact Bayes posterior?

Bayesian wind tunnels (tasks with a closed-form posterior), exact oracles, metrics in bits,
ensemble-native models, a trainer, a results store and a leaderboard.
"""

from __future__ import annotations

from .running.provenance import package_version as _package_version

__version__ = _package_version()  # from git tags at build time (setuptools-scm); the commit: running/provenance.py


def evaluate_model(model, task, **kwargs):
    """Score a trained model (a plain nn.Module or an ensemble) on `task`'s fixed evaluation sets
    and store it; see `bayesbench.scoring.outside.evaluate_model`."""
    from .scoring.outside import evaluate_model as _evaluate_model

    return _evaluate_model(model, task, **kwargs)


def model_spec(task, preset: str = "quick"):
    """The spec (TaskShape) a model factory gets for `task`; see `bayesbench.scoring.outside.model_spec`."""
    from .scoring.outside import model_spec as _model_spec

    return _model_spec(task, preset)

