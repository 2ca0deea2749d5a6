"""A study cut short by a stop request (Ctrl-C, SIGTERM) leaves nothing half-stored.

A study's measurements are written as it runs (the profiler flushes every few hundred steps),
and a study cannot be resumed from where it stopped (its probes and checkpoints belong to one
uninterrupted run). So on a stop request the study's row and every measurement it wrote are
removed, the stop says so, and running the same command again starts it afresh. A study that
fails (an error, not a stop) keeps its row with status "failed: ..." for inspection;
`plot --dynamics` draws only finished ones.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..running import interrupt
from .store import delete_study


@contextlib.contextmanager
def removed_if_stopped(study_id: str, kind: str, db: str | None) -> Iterator[None]:
    """Run a study's work; on `interrupt.Interrupted` remove what it stored and say so."""
    try:
        yield
    except interrupt.Interrupted as stop:
        delete_study(study_id, path=db)
        for entry in stop.stopped:
            entry["checkpoint"] = None  # a study's own training checkpoint does not resume the study
        # no Trainer said where it was (emsgd trains its own loop): the study had started, not its setup
        interrupt.claim(stop, f"{kind} study {study_id}", {"phase": "study"})
        stop.notes.append(f"the partial {kind} study {study_id} was removed from the store (run the command again "
                          "to start it afresh)")
        raise


FINISHED = ("ok", "done", "trained")  # the statuses whose measurements are complete


def require_finished(study: dict) -> None:
    """A study whose measurements are complete, else a ValueError saying why not."""
    status = study.get("status") or "unknown"
    if status not in FINISHED:
        raise ValueError(f"study {study['study_id']!r}: the study did not finish (status: {status}); its "
                         "measurements are partial, so nothing is drawn (run the study again)")
