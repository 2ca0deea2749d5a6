"""What the task files here name (lm-eval imports this file by its path): the documents and the
metrics are `bayesbench.scoring.lm_eval_task`'s (docs/llm.md, "lm-evaluation-harness")."""

from __future__ import annotations

from bayesbench.scoring.lm_eval_task import dataset, process_results

__all__ = ["bijection", "process_results", "sula"]


def bijection(**settings):
    """The bijection's documents (the quick preset's task and evaluation set by default)."""
    return dataset("bijection", **settings)


def sula(**settings):
    """The SULA tunnel's documents (its defaults, the preset's setup for tunnels it does not name)."""
    return dataset("sula", **settings)
