"""What the sweep engine reports while it runs: small frozen dataclasses, not dicts.

Two kinds. A worker (`sweep/one_job.py`) and an executor (`sweep/local.py`,
`sweep/ray_executor.py`) report what happened to a job by its key: `Started`, `Stepped`,
`Retried`, `Finished`, `Failed`. The driver (`sweep/driver.py`) and the engine
(`sweep/engine.py`) turn them into what a person reads: `Say` (one line, its `text` as the
command line prints it) and `JobDone` (a job's rows were stored). A front end (`cli/`, `api.py`)
renders them: `line(event)` is the text to print, or None for an event that prints nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# ---------------------------------------------------------------- from workers and executors

@dataclass(frozen=True)
class Started:
    """A job started (or restarted) on a worker, at `step` (> 0: resumed from its checkpoint)."""

    key: str
    step: int
    pid: int | None = None
    host: str | None = None


@dataclass(frozen=True)
class Stepped:
    """A job reached a checkpoint at `step`."""

    key: str
    step: int


@dataclass(frozen=True)
class Retried:
    """A job's worker died and the job is run again (its `attempt`-th start), and why."""

    key: str
    attempt: int
    why: str


@dataclass(frozen=True)
class Finished:
    """A job finished: its records (one per seed), for the driver to store."""

    key: str
    records: list = field(compare=False)
    resumed_from: int = 0
    pid: int | None = None
    host: str | None = None


@dataclass(frozen=True)
class Failed:
    """A job failed: `error` says why; `exception` where the executor could hand it back."""

    key: str
    error: str
    exception: BaseException | None = field(default=None, compare=False)


JobEvent = Started | Stepped | Retried | Finished | Failed


# ---------------------------------------------------------------- for the front ends

@dataclass(frozen=True)
class Say:
    """A line for the person running the engine (progress, a note, a job's result)."""

    text: str


@dataclass(frozen=True)
class JobDone:
    """A job's rows were stored (also said as a `Say` line)."""

    key: str
    label: str
    records: list = field(compare=False)


Event = JobEvent | Say | JobDone


def line(event: Any) -> str | None:
    """The text a front end prints for `event` (None: nothing)."""
    return event.text if isinstance(event, Say) else None
