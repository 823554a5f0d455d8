"""File groups a new clustering plan must leave alone: those in a pending plan, those in
a pending compaction (its run rewrites them; Hudi's clustering planner leaves them out
too), those a pending write touches, and, when asked, hot ones: written by the last N commits or in
the last T minutes, which a streaming writer still updates.

A pending write (a commit, a deltacommit, or a replacecommit without a clustering plan)
names its file groups in its markers (``<partition>/<fileId>_<token>_<instant>.parquet
.marker.<IO>``, or a log file's on merge-on-read tables) and,
when Hudi wrote it, in its inflight metadata (the workload profile's write stats; JSON on
table version 6, Avro on 8 and 9). An insert_overwrite replaces whole partitions, so every
live file group of the partitions it names is busy. Read under the table lock: a pending
write is a running one (a Tidemark write names its planned file groups in its inflight
before it releases the lock, and writes its files without it) or a failed one the next
writer rolls back; both keep their groups out of new plans.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tidemark.errors import InvalidArgumentError, NotFoundError
from tidemark.table import HoodieTable
from tidemark.table.files.file_names import is_base_file_name, parse_base_file_name, partition_of
from tidemark.table.files.view import BaseFile
from tidemark.table.logfiles.file_names import is_log_file_name, parse_log_file_name
from tidemark.table.metadata.actions import COMMIT, DELTA_COMMIT, REPLACE_COMMIT
from tidemark.table.plans import compaction
from tidemark.table.plans.clustering import PendingPlan, file_groups_in
from tidemark.table.timeline.instant import Instant, State, instant_time_ago
from tidemark.table.writes.markers import data_file_path, read_markers_from_storage

FileGroupKey = tuple[str, str]
"""(partition path, file id)."""
WRITES = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT})
"""The actions whose file groups a new plan leaves alone while they are pending or hot."""


@dataclass(frozen=True)
class BusyFileGroups:
    """Busy file groups with the instant holding each: a pending plan, a pending
    compaction or a pending write."""

    in_plans: dict[FileGroupKey, str]
    in_compactions: dict[FileGroupKey, str]
    in_writes: dict[FileGroupKey, str]

    def keys(self) -> set[FileGroupKey]:
        return self.in_plans.keys() | self.in_compactions.keys() | self.in_writes.keys()


def busy_file_groups(
    table: HoodieTable, plans: Sequence[PendingPlan], live: Sequence[BaseFile]
) -> BusyFileGroups:
    """What ``plans``, and the pending compactions and writes on ``table``'s timeline
    (as last loaded) hold, among ``live``."""
    plan_instants = {plan.timestamp for plan in plans}
    in_writes: dict[FileGroupKey, str] = {}
    for instant in table.timeline.pending():
        if instant.action not in WRITES or instant.timestamp in plan_instants:
            continue
        touched, partitions = _touched_by(table, instant)
        if instant.action == REPLACE_COMMIT:
            touched |= {
                (f.partition_path, f.file_id) for f in live if f.partition_path in partitions
            }
        in_writes.update(dict.fromkeys(touched, instant.timestamp))
    in_compactions = compaction.file_groups_in(compaction.pending_compactions(table, reload=False))
    return BusyFileGroups(file_groups_in(plans), in_compactions, in_writes)


def hot_file_groups(table: HoodieTable, commits: int, minutes: int) -> set[FileGroupKey]:
    """File groups written (their write stats) by the last ``commits`` completed writes
    or by those completed in the last ``minutes`` (instant times are UTC)."""
    if not commits and not minutes:
        return set()
    written = table.timeline.completed(WRITES)
    since = instant_time_ago(minutes * 60) if minutes else None
    recent = {instant.timestamp for instant in written[-commits:]} if commits else set()
    hot: set[FileGroupKey] = set()
    for instant in written:
        if instant.timestamp in recent or (since is not None and instant.timestamp >= since):
            stats = table.timeline.read_metadata(instant).write_stats
            hot.update((stat.partition_path, stat.file_id) for stat in stats)
    return hot


def _touched_by(table: HoodieTable, instant: Instant) -> tuple[set[FileGroupKey], set[str]]:
    """File groups and partitions a pending write names in its markers and inflight
    metadata."""
    touched: set[FileGroupKey] = set()
    for marker in read_markers_from_storage(table.storage, instant.timestamp):
        path = data_file_path(marker)
        name = path.rpartition("/")[2]
        if is_base_file_name(name):
            touched.add((partition_of(path), parse_base_file_name(name).file_id))
        elif is_log_file_name(name):
            touched.add((partition_of(path), parse_log_file_name(name).file_id))
    inflight = instant.with_state(State.INFLIGHT)
    try:
        metadata = table.timeline.decode_metadata(table.storage.read(inflight.path))
    except (NotFoundError, InvalidArgumentError):
        metadata = None
    if metadata is not None:
        for partition, stats in metadata.partition_to_write_stats.items():
            touched.update((partition, stat.file_id) for stat in stats if stat.file_id)
        for partition, file_ids in metadata.partition_to_replace_file_ids.items():
            touched.update((partition, file_id) for file_id in file_ids)
    partitions = {partition for partition, _ in touched}
    return touched, partitions
