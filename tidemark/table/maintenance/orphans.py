"""Orphan files: data files in the table's partitions that no completed instant names.

They are what a writer killed before its rollback ran, a crashed task's extra attempt (a
completed commit whose write stats do not name the file) or a hand copy leave behind.
A base file (named as Hudi names them) is an orphan when its instant is older than the
grace period (its name carries the instant: the time its write started) and:

- the instant is not on the timeline at all, nor a completed write in the archive; or
- the instant is a completed write on the active timeline whose write stats do not name it.

Any other visible file in a partition (copied in by hand: no Hudi reader reads it, so no
instant can name it) is an orphan once it was last written longer than the grace period
ago. Never an orphan: a file of a pending instant (rollback deletes those through its
markers), one whose instant still has a marker folder (a write or rollback in progress),
a committed file (old slices are the cleaner's), or a hidden file (a name starting with
``.`` or ``_``, as Hudi's partition metadata and Spark's ``_SUCCESS``: readers skip them).

The column statistics of an instant past the grace period that is neither on the timeline
nor a completed write in the archive (a write killed before it completed, whose rollback
never ran) are orphans too; those of archived writes are archival's to fold.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tidemark.storage.base import FileInfo
from tidemark.table import HoodieTable
from tidemark.table.files import column_stats
from tidemark.table.files.file_names import is_base_file_name, parse_base_file_name
from tidemark.table.files.view import partition_listings
from tidemark.table.metadata.actions import WRITE_ACTIONS
from tidemark.table.timeline.instant import instant_time_ago
from tidemark.table.writes.markers import marker_dir_instants

DEFAULT_GRACE_S = 24 * 3600.0


HIDDEN_PREFIXES = (".", "_")


@dataclass(frozen=True)
class Orphan:
    path: str
    size: int


def find_orphans(table: HoodieTable, grace_s: float = DEFAULT_GRACE_S) -> list[Orphan]:
    """Every orphan file, by path (one listing per partition, one read per active
    completed write)."""
    timeline = table.timeline
    timeline.reload()
    cutoff = instant_time_ago(grace_s)
    on_timeline = {i.timestamp for i in timeline.instants()}
    named = {
        i.timestamp: {stat.path for stat in timeline.read_metadata(i).write_stats}
        for i in timeline.completed(WRITE_ACTIONS)
    }
    in_progress = set(marker_dir_instants(table.storage))
    archived: frozenset[str] | None = None
    found = []
    for listing in partition_listings(table.storage).values():
        for info in listing.files:
            name = info.path.rpartition("/")[2]
            if name.startswith(HIDDEN_PREFIXES):
                continue
            if not is_base_file_name(name):
                if _written_before(info, grace_s):
                    found.append(Orphan(info.path, info.size))
                continue
            instant = parse_base_file_name(name).instant
            if instant >= cutoff or instant in in_progress:
                continue
            if instant in named:
                if info.path not in named[instant]:
                    found.append(Orphan(info.path, info.size))
                continue
            if instant in on_timeline:
                continue  # pending, or a clean/rollback time: not a write's file to judge
            if archived is None:
                archived = table.archive.completed_writes()
            if instant not in archived:
                found.append(Orphan(info.path, info.size))
    for info in table.storage.list_dir(column_stats.STATS_DIR).files:
        instant = info.path.rpartition("/")[2].removesuffix(".parquet")
        if info.path == column_stats.FOLDED or instant >= cutoff or instant in on_timeline:
            continue
        if archived is None:
            archived = table.archive.completed_writes()
        if instant not in archived and instant not in in_progress:
            found.append(Orphan(info.path, info.size))
    return sorted(found, key=lambda orphan: orphan.path)


def _written_before(info: FileInfo, grace_s: float) -> bool:
    return time.time() - info.modified_s >= grace_s


def remove_orphans(table: HoodieTable, orphans: list[Orphan]) -> int:
    """Delete ``orphans`` in batches; returns how many."""
    return table.storage.delete_many(orphan.path for orphan in orphans)
