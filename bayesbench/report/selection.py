"""Which stored records a leaderboard, a figure or the site reads: SQL filters over the results
store (`select_rows`) and the newest run of each task and architecture (`latest_runs`)."""

from __future__ import annotations

from ..store.database import read_records
from ..store.records import RunRecord


def select_rows(db: str | None = None, *, task: str | None = None, arch: str | None = None,
                group_id: str | None = None, run_ids: list[str] | None = None,
                latest: bool = False) -> list[RunRecord]:
    """Stored records, filtered (`run_ids`: those runs, e.g. a command's jobs); with `latest`,
    only the newest run of each (task_label, arch)."""
    where, params = [], []
    if run_ids is not None:
        where.append(f"run_id IN ({', '.join('?' * len(run_ids))})" if run_ids else "0")
        params += list(run_ids)
    if task:
        where.append("(task = ? OR task_label = ?)")
        params += [task, task]
    if arch:
        where.append("arch = ?")
        params.append(arch)
    if group_id:
        where.append("group_id = ?")
        params.append(group_id)
    records = read_records(db, where=" AND ".join(where), params=tuple(params))
    return latest_runs(records) if latest else records


def latest_runs(records: list[RunRecord]) -> list[RunRecord]:
    """Only the newest run of each (task_label, arch) among `records` (oldest first, as stored)."""
    newest: dict[tuple[str, str], str] = {}
    for r in records:  # oldest first, so the last run seen wins
        newest[(r.task_label, r.arch)] = r.run_id
    return [r for r in records if newest[(r.task_label, r.arch)] == r.run_id]
