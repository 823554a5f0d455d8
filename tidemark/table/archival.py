"""Archival as Hudi 0.14's: the active timeline keeps between ``keep_min`` and ``keep_max``
completed writes; older completed instants move to the archived timeline.

Once more than ``keep_max`` completed writes (commits, replacecommits) are active, the
oldest are archived until ``keep_min`` remain, with every clean and rollback older than the
first write kept. Never archived, nor anything after it: a pending instant; the last
clean's earliest commit to retain (the cleaner plans from there, and a replacecommit is
archived only once a clean deleted the file groups it replaced: without any clean, no
replacecommit); a rollback the rolled-back-leftovers scan has not passed yet; and the
caller's ``keep_from`` (the record index's oldest unfolded delta).

An archival writes one archive log file holding every file of those instants, then deletes
their active files, requested first and completed last, so a crash in between leaves each
instant completed on both timelines, never pending. The next archival (every write runs
one) first deletes the active files of instants the archive already holds: none is lost or
listed twice for longer than that. The table lock is held to plan and write the archive;
the active files are deleted after it is released.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from tidemark import faults
from tidemark.errors import InvalidArgumentError
from tidemark.table.archive_writer import ArchivedFile, append_to_archive, archive_number
from tidemark.table.archived_timeline import COMPLETED, parse_archive_log
from tidemark.table.clean_planner import CleanPolicy, CleanSettings
from tidemark.table.commit import read_leftovers_watermark
from tidemark.table.fsview import last_clean
from tidemark.table.instant import REPLACE_COMMIT, ROLLBACK, Instant, State
from tidemark.table.lock import DEFAULT_LOCK_WAIT_S
from tidemark.table.locked import changing
from tidemark.table.table import HoodieTable
from tidemark.table.table_versions import archived_log
from tidemark.table.timeline import TIMELINE_DIR, WRITE_ACTIONS

log = structlog.get_logger(__name__)

DEFAULT_KEEP_MIN = 20
DEFAULT_KEEP_MAX = 30
ARCHIVED_POINT = "archive_before_delete"
"""Fault point: archival killed after writing the archive, before removing active files."""


@dataclass(frozen=True)
class ArchiveSettings:
    """``hoodie.keep.min.commits`` and ``hoodie.keep.max.commits``."""

    keep_min: int = DEFAULT_KEEP_MIN
    keep_max: int = DEFAULT_KEEP_MAX

    def __post_init__(self) -> None:
        if self.keep_min < 1:
            raise InvalidArgumentError(f"must be >= 1, got {self.keep_min}", field="keep_min")
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
    reload: bool = True,
) -> ArchiveResult:
    """Archive what the settings allow (nothing while the active timeline holds at most
    ``keep_max`` writes and no interrupted archival is left to finish). ``keep_from`` is
    asked, only when there is something to archive, for an instant to keep with every
    later one. ``reload=False`` when the caller just reloaded the timeline (a clean)."""
    settings = settings or ArchiveSettings()
    result = ArchiveResult()
    if reload:
        table.timeline.reload()
    if not _already_archived(table) and not _to_archive(table, settings, None):
        return result
    floor = keep_from()
    with changing(table, "archive", wait_s=wait_s):
        table.timeline.reload()
        leftovers = _already_archived(table)
        if leftovers:
            _remove_active(table, leftovers)
            result.rolled_forward = [f"{i.timestamp}.{i.action}" for i in leftovers]
            table.timeline.reload()
        chosen = _to_archive(table, settings, floor)
        if chosen:
            files = [ArchivedFile(i, table.storage.read(i.path)) for i in _files_of(table, chosen)]
            result.archive_file = append_to_archive(
                table.storage, archived_log(table.archive), files
            )
            result.archived = [f"{i.timestamp}.{i.action}" for i in chosen]
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
    watermark = read_leftovers_watermark(table.storage)
    unsettled = [
        i.timestamp
        for i in timeline.completed(frozenset({ROLLBACK}))
        if watermark is None or i.timestamp > watermark
    ]
    bounds += unsettled[:1]
    cut = min(bounds)
    return [i for i in timeline.completed() if i.timestamp < cut]


def _already_archived(table: HoodieTable) -> list[Instant]:
    """Active completed instants the archive already lists: an interrupted archival's,
    which are all in the newest archive file (each archival writes a new one)."""
    completed = table.timeline.completed()
    newest = max(
        archived_log(table.archive).files(),
        key=lambda info: archive_number(info.path),
        default=None,
    )
    if not completed or newest is None:
        return []
    archived = {
        (i.timestamp, i.action)
        for i in parse_archive_log(table.storage.read(newest.path), newest.path)
        if i.state == COMPLETED
    }
    return [i for i in completed if (i.timestamp, i.action) in archived]


def _files_of(table: HoodieTable, instants: list[Instant]) -> list[Instant]:
    """Every state file of each instant that exists, in lifecycle order."""
    listed = {info.path for info in table.storage.list_dir(TIMELINE_DIR).files}
    return [i for i in _state_files(instants) if i.path in listed]


def _state_files(instants: list[Instant]) -> list[Instant]:
    return [Instant(i.timestamp, i.action, state) for i in instants for state in State]


def _remove_active(table: HoodieTable, instants: list[Instant]) -> None:
    """Requested and inflight files first, completed last: never a pending-looking instant."""
    if not instants:
        return
    for state in State:
        table.storage.delete_many(Instant(i.timestamp, i.action, state).path for i in instants)
