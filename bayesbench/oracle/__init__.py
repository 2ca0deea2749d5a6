"""The Bayes ground truth of every wind tunnel.

Each public function validates its input and output dtype (same errors on every backend) and dispatches to the
compiled op of `bayesbench._C` when it is built for the tensors' device (backend="auto"), else to
the PyTorch reference beside it.
"""

from .backend import BACKENDS
from .bijection import bijection_posterior, bijection_posterior_reference
from .counts import (
    markov_predictive,
    markov_predictive_reference,
    sticky_predictive,
    sticky_predictive_reference,
)
from .hmm import hmm_filter, hmm_filter_reference
from .validate import ROW_SUM_ATOL

__all__ = [
    "BACKENDS",
    "ROW_SUM_ATOL",
    "bijection_posterior",
    "bijection_posterior_reference",
    "hmm_filter",
    "hmm_filter_reference",
    "markov_predictive",
    "markov_predictive_reference",
    "sticky_predictive",
    "sticky_predictive_reference",
]
