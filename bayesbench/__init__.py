"""bayesbench: does a sequence model compute the exact Bayes posterior?

Bayesian wind tunnels (tasks with a closed-form posterior), exact oracles, metrics in bits,
ensemble-native models, a trainer, a results store and a leaderboard.
"""

from __future__ import annotations

__version__ = "0.1.0"
