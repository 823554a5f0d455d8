"""Archival as Hudi's: the active timeline keeps between ``keep_min`` and ``keep_max``
completed writes; older completed instants move to the archived timeline (table version
6: Hudi 0.14's archive log files, ``archive_writer``) or to the LSM history (versions 8
and 9: Hudi 1.x's ``.hoodie/timeline/history``, ``lsm_timeline.append_history``).

Once more than ``keep_max`` completed writes (commits, replacecommits) are active, the
oldest are archived until ``keep_min`` remain, with every clean and rollback older than the
first write kept. Never archived, nor anything after it: a pending instant; the last
clean's earliest commit to retain (the cleaner plans from there, and a replacecommit is
archived only once a clean deleted the file groups it replaced: without any clean, no
replacecommit); a rollback the rolled-back-leftovers scan has not passed yet; and the
caller's ``keep_from`` (the record index's oldest unfolded delta); on a merge-on-read
table, the deltacommits compaction scheduling counts (``oldest_to_keep_for_compaction``,
Hudi's rule); on a table whose Hudi metadata table Tidemark keeps, the metadata table's
last compaction, as Hudi's archiver (nothing at all before its first: Hudi's metadata
reader trusts the uncompacted metadata only of instants on the data's active timeline).
Deltacommits are writes like commits (counted, archived with their metadata; the logs of a
latest slice whose deltacommit was archived still read,
``FileSystemView.completed_deltacommits``), and a compaction's requested and inflight
files go with the ``commit`` it completed as.

An archival writes one archive log file (or one history Parquet file, its manifest and
``_version_``) holding those instants, keeps the archive bounded as Hudi does (version 6:
small archive files merged, ``merge_small_files``; 8 and 9: the history's levels
compacted, ``lsm_timeline.compact``), folds the archived writes' column statistics into
one file (``column_stats.fold``), then deletes their active files, requested first
and completed last, so a crash in between leaves each instant completed on both timelines,
never pending. The next archival (every write runs one) first deletes the active files of
instants the archive's newest file already holds: none is lost or listed twice for longer
than that. The table lock is held to plan and write the archive;
the active files are deleted after it is released.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from tidemark import faults
from tidemark.checks import require_positive
from tidemark.errors import InvalidArgumentError
from tidemark.storage.damaged import read_parsed
from tidemark.table import HoodieTable
from tidemark.table.files import column_stats
from tidemark.table.files.view import last_clean
from tidemark.table.leases.storage_lease import DEFAULT_LOCK_LEASE_S, DEFAULT_LOCK_WAIT_S
from tidemark.table.leases.table_lock import changing
from tidemark.table.maintenance.clean_plan import CleanPolicy, CleanSettings
from tidemark.table.metadata.actions import (
    CLEAN,
    CLUSTERING,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    REPLACE_COMMIT,
    ROLLBACK,
    WRITE_ACTIONS,
)
from tidemark.table.metadata.clean import CleanMetadata
from tidemark.table.metadata_table.partitions import keeps_files
from tidemark.table.metadata_table.timeline import last_compaction
from tidemark.table.plans.compaction import DEFAULT_MAX_DELTA_COMMITS
from tidemark.table.timeline.archive_writer import (
    DEFAULT_MERGE_BATCH_SIZE,
    DEFAULT_MERGE_SMALL_FILE_LIMIT,
    ArchivedFile,
    append_to_archive,
    archive_number,
    finish_merge,
    merge_small_files,
)
from tidemark.table.timeline.archived import COMPLETED, last_block
from tidemark.table.timeline.instant import TIMELINE_FOLDERS, Instant, State
from tidemark.table.timeline.layout1 import Timeline
from tidemark.table.timeline.lsm import (
    DEFAULT_COMPACTION_BATCH_SIZE,
    HistoryInstant,
    LsmTimeline,
    append_history,
    compact,
)
from tidemark.table.timeline.versions import archived_log
from tidemark.table.writes.commit import read_leftovers_watermark

log = structlog.get_logger(__name__)

DEFAULT_KEEP_MIN = 20
DEFAULT_KEEP_MAX = 30
ARCHIVED_POINT = "archive_before_delete"
"""Fault point: archival killed after writing the archive, before removing active files."""


@dataclass(frozen=True)
class ArchiveSettings:
    """``hoodie.keep.min.commits`` and ``hoodie.keep.max.commits``; how the archive is
    kept small: on version 6 ``hoodie.archive.merge.enable`` (on here: Tidemark never
    appends, so without merging every archival adds a file), ``.files.batch.size`` and
    ``.small.file.limit.bytes``; on 8 and 9 ``hoodie.timeline.compaction.batch.size``."""

    keep_min: int = DEFAULT_KEEP_MIN
    keep_max: int = DEFAULT_KEEP_MAX
    merge_small_files: bool = True
    merge_batch_size: int = DEFAULT_MERGE_BATCH_SIZE
    merge_small_file_limit: int = DEFAULT_MERGE_SMALL_FILE_LIMIT
    compaction_batch_size: int = DEFAULT_COMPACTION_BATCH_SIZE
    compaction_delta_commits: int = DEFAULT_MAX_DELTA_COMMITS
    """Merge-on-read tables: Hudi's ``hoodie.compact.inline.max.delta.commits``, which its
    archiver reads too: the deltacommits that trigger a compaction stay active."""

    def __post_init__(self) -> None:
        for name in ("merge_batch_size", "compaction_batch_size"):
            if getattr(self, name) < 2:
                raise InvalidArgumentError(f"must be >= 2, got {getattr(self, name)}", field=name)
        require_positive("merge_small_file_limit", self.merge_small_file_limit)
        require_positive("keep_min", self.keep_min)
        require_positive("compaction_delta_commits", self.compaction_delta_commits)
        if self.keep_max <= self.keep_min:
            raise InvalidArgumentError(
                f"keep_max ({self.keep_max}) must be greater than keep_min ({self.keep_min})",
                field="keep_max",
            )

    def check_cleaner(self, cleaner: CleanSettings) -> None:
        """Hudi's rule: the active timeline keeps more writes than the cleaner retains."""
        if (
            cleaner.policy is CleanPolicy.KEEP_LATEST_COMMITS
            and self.keep_min <= cleaner.retain_commits
        ):
            raise InvalidArgumentError(
                f"keep_min ({self.keep_min}) must be greater than the cleaner's retained "
                f"commits ({cleaner.retain_commits})",
                field="keep_min",
            )


@dataclass
class ArchiveResult:
    archived: list[str] = field(default_factory=list)
    """Instants moved to the archive (timestamp.action)."""
    rolled_forward: list[str] = field(default_factory=list)
    """Instants an earlier, interrupted archival had archived, now removed from the active
    timeline."""
    archive_file: str | None = None


def archive(
    table: HoodieTable,
    settings: ArchiveSettings | None = None,
    *,
    keep_from: Callable[[], str | None] = lambda: None,
    wait_s: float = DEFAULT_LOCK_WAIT_S,
    lease_s: float = DEFAULT_LOCK_LEASE_S,
    reload: bool = True,
) -> ArchiveResult:
    """Archive what the settings allow (nothing while the active timeline holds at most
    ``keep_max`` writes and no interrupted archival is left to finish). ``keep_from`` is
    asked, only when there is something to archive, for an instant to keep with every
    later one. ``reload=False`` when the caller just reloaded the timeline (a clean);
    ``lease_s`` is the table lock's lease (how long a killed archival blocks others)."""
    settings = settings or ArchiveSettings()
    result = ArchiveResult()
    if reload:
        table.timeline.reload()
    if not _already_archived(table) and not _to_archive(table, settings, None):
        return result
    floor = keep_from()
    with changing(table, "archive", wait_s=wait_s, lease_s=lease_s, merge_on_read=True):
        if not isinstance(table.archive, LsmTimeline):
            finish_merge(table.storage, archived_log(table.archive))
        table.timeline.reload()
        leftovers = _already_archived(table)
        if leftovers:
            _remove_active(table, leftovers)
            result.rolled_forward = [f"{i.timestamp}.{i.action}" for i in leftovers]
            table.timeline.reload()
        chosen = _to_archive(table, settings, floor)
        if chosen:
            result.archive_file = _write_archive(table, chosen)
            result.archived = [f"{i.timestamp}.{i.action}" for i in chosen]
        if chosen or leftovers:
            _compact_archive(table, settings)
            _fold_column_stats(table, chosen)
    if chosen:
        faults.exit_if_requested(ARCHIVED_POINT)
        _remove_active(table, chosen)
        log.info(
            "archive.completed",
            table=table.uri,
            archived=len(chosen),
            first=chosen[0].timestamp,
            last=chosen[-1].timestamp,
            file=result.archive_file,
        )
        table.timeline.reload()
    return result


def _to_archive(
    table: HoodieTable, settings: ArchiveSettings, keep_from: str | None
) -> list[Instant]:
    """The completed instants to archive, oldest first."""
    timeline = table.timeline
    writes = timeline.completed(WRITE_ACTIONS)
    if len(writes) <= settings.keep_max:
        return []
    bounds = [writes[len(writes) - settings.keep_min].timestamp]
    pending = timeline.pending()
    if pending:
        bounds.append(pending[0].timestamp)
    clean = last_clean(timeline)
    if clean is not None and clean.earliest_commit_to_retain:
        bounds.append(clean.earliest_commit_to_retain)
    else:
        bounds += [i.timestamp for i in writes if i.action == REPLACE_COMMIT][:1]
    if keep_from is not None:
        bounds.append(keep_from)
    if table.config.merge_on_read:
        kept = oldest_to_keep_for_compaction(timeline, settings.compaction_delta_commits)
        bounds += [] if kept is None else [kept]
    if keeps_files(dict(table.config.properties), table.config.table_version):
        bounds.append(last_compaction(table.storage) or "0")
    watermark = read_leftovers_watermark(table.storage)
    unsettled = [
        i.timestamp
        for i in timeline.completed(frozenset({ROLLBACK}))
        if watermark is None or i.timestamp > watermark
    ]
    bounds += unsettled[:1]
    cut = min(bounds)
    return [i for i in timeline.completed() if i.timestamp < cut]


def oldest_to_keep_for_compaction(timeline: Timeline, delta_commits: int) -> str | None:
    """Hudi's ``CompactionUtils.getOldestInstantToRetainForCompaction``, which its archiver
    keeps from on a merge-on-read table, so that the deltacommits the compaction trigger
    counts stay on the active timeline: with fewer than ``delta_commits`` deltacommits
    (pending ones too) after the last completed compaction, that compaction's commit (with
    none, the first deltacommit); with as many or more, the latest ``delta_commits`` of
    them. None without deltacommits. (A pending compaction is kept, with everything after
    it, as every pending instant is.)"""
    compactions = timeline.completed(frozenset({COMMIT}))
    since = compactions[-1].timestamp if compactions else ""
    deltas = [
        i.timestamp for i in timeline.instants() if i.action == DELTA_COMMIT and i.timestamp > since
    ]
    if not deltas:
        return since or None
    if len(deltas) < delta_commits:
        return since or deltas[0]
    return deltas[len(deltas) - delta_commits]


def _write_archive(table: HoodieTable, chosen: list[Instant]) -> str:
    """Add ``chosen`` with every file of theirs to the table's archive; returns the file
    written (its path in the archive folder)."""
    files = {f.path: (f, table.storage.read(f.path)) for f in _files_of(table, chosen)}
    if not isinstance(table.archive, LsmTimeline):
        archived = [ArchivedFile(f, content) for f, content in files.values()]
        return append_to_archive(table.storage, archived_log(table.archive), archived)
    history = [_history_instant(i, files) for i in chosen]
    return f"{table.archive.folder}/{append_history(table.archive, history)}"


def _compact_archive(table: HoodieTable, settings: ArchiveSettings) -> None:
    """Keep the archive's file count bounded, as Hudi's archiver does after writing."""
    if isinstance(table.archive, LsmTimeline):
        compact(table.archive, settings.compaction_batch_size)
    elif settings.merge_small_files:
        merge_small_files(
            table.storage,
            archived_log(table.archive),
            settings.merge_batch_size,
            settings.merge_small_file_limit,
        )


def _fold_column_stats(table: HoodieTable, chosen: list[Instant]) -> None:
    """Fold the column statistics of the writes no longer on the active timeline (those
    archived now, and any an interrupted archival left), leaving out the files the
    archived cleans deleted."""
    archived = {i.timestamp for i in chosen}
    active = sorted({i.timestamp for i in table.timeline.instants()} - archived)
    folded = [
        instant
        for instant in column_stats.recorded_instants(table.storage)
        if instant not in active and (not active or instant < active[0])
    ]
    deleted = []
    for clean in (i for i in chosen if i.action == CLEAN):
        metadata = read_parsed(table.storage, clean.path, CleanMetadata.from_avro)
        deleted += [path for files in metadata.deleted_by_partition.values() for path in files]
    column_stats.fold(table.storage, folded, deleted)


def _history_instant(instant: Instant, files: dict[str, tuple[Instant, bytes]]) -> HistoryInstant:
    """Hudi 1.x's ``HoodieLSMTimelineInstant`` of a completed instant: the completed
    file's content as its metadata; a clean's or a compaction's plan, or a
    replacecommit's requested (or non-empty inflight) content, as its plan."""
    contents = {
        f.state: content for f, content in files.values() if f.timestamp == instant.timestamp
    }
    plan = None
    if instant.action == CLEAN:
        plan = contents.get(State.REQUESTED)
    elif instant.action == COMMIT:  # a compaction completes as a commit: its plan
        compaction = Instant(instant.timestamp, COMPACTION, State.REQUESTED, layout=2)
        plan = files[compaction.path][1] if compaction.path in files else None
    elif instant.action == REPLACE_COMMIT:
        plan = contents.get(State.INFLIGHT) or contents.get(State.REQUESTED)
    assert instant.completion_time is not None
    return HistoryInstant(
        instant.timestamp,
        instant.completion_time,
        instant.action,
        metadata=contents.get(State.COMPLETED) or None,
        plan=plan or None,
    )


def _already_archived(table: HoodieTable) -> list[Instant]:
    """Active completed instants the archive already lists: an interrupted archival's,
    which are all in the newest archive file's last block (each archival writes a new
    file of one block; a merge puts it last in the merged file)."""
    completed = table.timeline.completed()
    if not completed:
        return []
    archived = _newest_archived(table, completed[0].timestamp)
    return [i for i in completed if (i.timestamp, i.action) in archived]


def _newest_archived(table: HoodieTable, first_active: str) -> set[tuple[str, str]]:
    """(time, action) of the completed instants in the archive's newest file (on version
    6 its last block, always read; the LSM history's only when its name reaches
    ``first_active``)."""
    if isinstance(table.archive, LsmTimeline):
        history = table.archive.newest_file_instants(after=first_active)
        return {(i.timestamp, i.action) for i in history}
    newest = max(
        archived_log(table.archive).files(),
        key=lambda info: archive_number(info.path),
        default=None,
    )
    if newest is None:
        return set()
    entries = last_block(table.storage, newest)
    return {(i.timestamp, i.action) for i in entries if i.state == COMPLETED}


def _files_of(table: HoodieTable, instants: list[Instant]) -> list[Instant]:
    """Every state file of each instant that exists, in lifecycle order."""
    folder = TIMELINE_FOLDERS[table.timeline.LAYOUT]
    listed = {info.path for info in table.storage.list_dir(folder).files}
    return [i for i in _state_files(instants) if i.path in listed]


def _state_files(instants: list[Instant]) -> list[Instant]:
    """Each instant's requested, inflight and completed files by name, in that order
    (on layout 2 a clustering's pending files are named ``clustering``; on both layouts
    a compaction's, which completes as a ``commit``, ``compaction``)."""
    files = []
    for instant in instants:
        for state in (State.REQUESTED, State.INFLIGHT):
            files.append(instant.with_state(state))
            if instant.layout == 2 and instant.action == REPLACE_COMMIT:
                files.append(Instant(instant.timestamp, CLUSTERING, state, layout=2))
            if instant.action == COMMIT:
                files.append(Instant(instant.timestamp, COMPACTION, state, layout=instant.layout))
        files.append(instant)
    return files


def _remove_active(table: HoodieTable, instants: list[Instant]) -> None:
    """Requested and inflight files first, completed last: never a pending-looking instant."""
    if not instants:
        return
    files = _state_files(instants)
    for state in State:
        table.storage.delete_many(f.path for f in files if f.state is state)
