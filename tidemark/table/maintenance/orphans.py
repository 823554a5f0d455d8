"""Orphan files: data files in the table's partitions that no completed instant names.

They are what a writer killed before its rollback ran, a crashed task's extra attempt (a
completed commit whose write stats do not name the file) or a hand copy leave behind.
A base file (named as Hudi names them) is an orphan when its instant is older than the
grace period (its name carries the instant: the time its write started) and:

- the instant is not on the timeline at all, nor a completed write in the archive; or
- the instant is a completed write on the active timeline whose write stats do not name it.

A merge-on-read log file is judged by the same rules: on versions 8 and 9 by the instant
in its name (the requested time of the deltacommit that wrote it; its stats name the
file); on version 6 its name carries its slice's base instant, so by the instants of its
blocks (their INSTANT_TIME headers): it is an orphan when none of them is young, in
progress, on the timeline (a rollback's command block names the rollback) or a completed
write in the archive, as the log files of a rolled-back or never completed deltacommit
are. Their names start with ``.``, yet they are judged, not skipped as hidden files.

Any other visible file in a partition (copied in by hand: no Hudi reader reads it, so no
instant can name it) is an orphan once it was last written longer than the grace period
ago. Never an orphan: a file of a pending instant (rollback deletes those through its
markers), one whose instant still has a marker folder (a write or rollback in progress),
a committed file (old slices are the cleaner's), or a hidden file other than a log file (a
name starting with ``.`` or ``_``, as Hudi's partition metadata and Spark's ``_SUCCESS``:
readers skip them).

The column statistics of an instant past the grace period that is neither on the timeline
nor a completed write in the archive (a write killed before it completed, whose rollback
never ran) are orphans too; those of archived writes are archival's to fold.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tidemark.storage.base import FileInfo
from tidemark.table import HoodieTable
from tidemark.table.files import column_stats
from tidemark.table.files.file_names import is_base_file_name, join_path, parse_base_file_name
from tidemark.table.files.view import partition_listings
from tidemark.table.logfiles.file_names import is_log_file_name, parse_log_file_name
from tidemark.table.logfiles.framing import HeaderKey, read_log_file
from tidemark.table.metadata.actions import WRITE_ACTIONS
from tidemark.table.metadata.commit import WriteStat
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
        i.timestamp: _named_files(timeline.read_metadata(i).write_stats)
        for i in timeline.completed(WRITE_ACTIONS)
    }
    in_progress = set(marker_dir_instants(table.storage))
    archived: frozenset[str] | None = None

    def committed_in_archive(instant: str) -> bool:
        nonlocal archived
        if archived is None:
            archived = table.archive.completed_writes()
        return instant in archived

    def kept(instant: str) -> bool:
        """A write that may still finish, or finished: young, in progress, on the
        timeline (pending, completed, a rollback's command block) or archived."""
        return (
            instant >= cutoff
            or instant in in_progress
            or instant in on_timeline
            or committed_in_archive(instant)
        )

    found = []
    for listing in partition_listings(table.storage).values():
        for info in listing.files:
            name = info.path.rpartition("/")[2]
            if is_log_file_name(name) and table.timeline.LAYOUT == 1:
                if _orphan_v6_log(table, info, kept, grace_s):
                    found.append(Orphan(info.path, info.size))
                continue
            if is_log_file_name(name):
                instant = parse_log_file_name(name).instant
            elif name.startswith(HIDDEN_PREFIXES):
                continue
            elif is_base_file_name(name):
                instant = parse_base_file_name(name).instant
            else:
                if _written_before(info, grace_s):
                    found.append(Orphan(info.path, info.size))
                continue
            if instant >= cutoff or instant in in_progress:
                continue
            if instant in named:
                if info.path not in named[instant]:
                    found.append(Orphan(info.path, info.size))
                continue
            if instant in on_timeline:
                continue  # pending, or a clean/rollback time: not a write's file to judge
            if not committed_in_archive(instant):
                found.append(Orphan(info.path, info.size))
    for info in table.storage.list_dir(column_stats.STATS_DIR).files:
        instant = info.path.rpartition("/")[2].removesuffix(".parquet")
        if info.path != column_stats.FOLDED and not kept(instant):
            found.append(Orphan(info.path, info.size))
    return sorted(found, key=lambda orphan: orphan.path)


def _orphan_v6_log(
    table: HoodieTable, info: FileInfo, kept: Callable[[str], bool], grace_s: float
) -> bool:
    """Whether a version-6 log file is an orphan. Its name carries its slice's base
    instant, so the instants that wrote it are its blocks' (INSTANT_TIME, read from the
    file): none of them is ``kept``. A file of corrupt blocks only (a crashed append) is
    judged by when it was last written."""
    blocks = read_log_file(table.storage, info.path)
    instants = [
        b.header[HeaderKey.INSTANT_TIME] for b in blocks if HeaderKey.INSTANT_TIME in b.header
    ]
    if not instants:
        return _written_before(info, grace_s)
    return not any(kept(instant) for instant in instants)


def _named_files(stats: Iterable[WriteStat]) -> set[str]:
    """The files a completed write's stats name: each stat's file, and the log files of
    the slices a deltacommit appended to."""
    named = set()
    for stat in stats:
        named.add(stat.path)
        named.update(join_path(stat.partition_path, log) for log in stat.log_files or ())
    return named


def _written_before(info: FileInfo, grace_s: float) -> bool:
    return time.time() - info.modified_s >= grace_s


def remove_orphans(table: HoodieTable, orphans: list[Orphan]) -> int:
    """Delete ``orphans`` in batches; returns how many."""
    return table.storage.delete_many(orphan.path for orphan in orphans)
