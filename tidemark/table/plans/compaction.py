"""Pending compactions: ``<t>.compaction.requested`` or ``.inflight`` instants (no
completed ``commit`` at ``t`` yet) and the file slices their plans rewrite.

A pending compaction reads, for each file group of its plan, the slice at the plan's base
instant, and the slice at its own instant (Hudi opens an empty one there when it schedules
the compaction) collects the logs written meanwhile: Hudi's cleaner keeps every slice of
such a group from the plan's base instant on (``CleanPlanner
.isFileSliceNeededForPendingCompaction``), and so does Tidemark's."""

from __future__ import annotations

from tidemark.storage.damaged import read_parsed
from tidemark.table import HoodieTable
from tidemark.table.metadata.actions import COMPACTION
from tidemark.table.metadata.compaction import compaction_operations
from tidemark.table.timeline.instant import Instant, State


def pending_compactions(table: HoodieTable) -> list[Instant]:
    """The pending compactions on the timeline as last loaded, oldest first."""
    return [instant for instant in table.timeline.pending() if instant.action == COMPACTION]


def slices_needed_by_compactions(table: HoodieTable) -> dict[tuple[str, str], str]:
    """(partition path, file id) -> the oldest base instant a pending compaction needs of
    that file group: its slices from that instant on are kept."""
    needed: dict[tuple[str, str], str] = {}
    for instant in pending_compactions(table):
        requested = Instant(instant.timestamp, COMPACTION, State.REQUESTED, layout=instant.layout)
        for operation in read_parsed(table.storage, requested.path, compaction_operations):
            group = (operation.partition_path, operation.file_id)
            needed[group] = min(needed.get(group, operation.base_instant), operation.base_instant)
    return needed
