"""A table's history: every instant with when it was requested and completed and what it
wrote, as Delta's ``DESCRIBE HISTORY`` and pyiceberg's ``table.history()`` list theirs.

Completion times are recorded by table versions 8 and 9; version 6 records none, so its
instants carry their requested time there, the time its readers order writes by and the
one ``as_of`` resolves them at. Archived instants (optional) come from Hudi 0.x's archived
timeline or 1.x's LSM history with their times and action only: the commit metadata kept
there is not decoded (a history of a year of writes would read every commit's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tidemark.table.metadata.actions import WRITE_ACTIONS
from tidemark.table.metadata.commit import CommitMetadata
from tidemark.table.timeline.archived import COMPLETED
from tidemark.table.timeline.lsm import LsmTimeline
from tidemark.table.timeline.versions import archived_log

if TYPE_CHECKING:  # the opened table, above this package
    from tidemark.table import HoodieTable


@dataclass(frozen=True)
class HistoryEntry:
    """One instant. ``completed`` is None while pending; ``operation``, ``rows_written``
    (Hudi's ``numWrites``: the rows of the files written) and ``files_written`` are None
    for instants that write no rows (clean, rollback) and for pending or archived writes."""

    requested: str
    completed: str | None
    action: str
    state: str
    operation: str | None = None
    rows_written: int | None = None
    files_written: int | None = None
    archived: bool = False


def table_history(table: HoodieTable, *, archived: bool = False) -> list[HistoryEntry]:
    """The instants of the active timeline (with ``archived``, the archived ones first),
    oldest requested time first."""
    entries = _archived_entries(table) if archived else []
    for instant in table.timeline.instants():
        metadata = None
        if instant.is_completed and instant.action in WRITE_ACTIONS:
            metadata = table.timeline.read_metadata(instant)
        entries.append(
            _entry(
                instant.timestamp,
                instant.completed_at if instant.is_completed else None,
                instant.action,
                instant.state.name,
                metadata,
            )
        )
    return entries


def _entry(
    requested: str,
    completed: str | None,
    action: str,
    state: str,
    metadata: CommitMetadata | None,
) -> HistoryEntry:
    if metadata is None:
        return HistoryEntry(requested, completed, action, state)
    stats = metadata.write_stats
    return HistoryEntry(
        requested,
        completed,
        action,
        state,
        metadata.operation_type,
        sum(stat.num_writes for stat in stats),
        len(stats),
    )


def _archived_entries(table: HoodieTable) -> list[HistoryEntry]:
    archive = table.archive
    if isinstance(archive, LsmTimeline):
        return [
            HistoryEntry(i.timestamp, i.completion_time, i.action, COMPLETED, archived=True)
            for i in archive.instants()
        ]
    return [
        HistoryEntry(i.timestamp, i.timestamp, i.action, i.state, archived=True)
        for i in archived_log(archive).instants()
        if i.state == COMPLETED
    ]
