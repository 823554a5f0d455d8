"""File-system view: the latest committed base file of each live file group, and on
merge-on-read tables its latest file slice (the base file and the log files since,
``slices``).

Mirrors Hudi's view: list the partitions (or read the listing Hudi's metadata table keeps,
``listing``), keep base files whose
instant is committed and not after ``as_of``, take the newest per file group, and drop
groups replaced by a completed replacecommit.

``as_of`` is a completion time: a write is visible once it completed at or before it
(table versions 8 and 9 record when each instant completed; on version 6 the requested
time stands in, as Hudi 0.x does). The requested time of a completed write stands for
its completion time (``resolve_as_of``), so a write's own instant reads that write's
snapshot on every version. A file group's latest base file is the one with the greatest
requested time among the visible ones (the 1.0 spec's reader rule).

Committed means completed on the active timeline, or older than the active timeline and
listed by Hudi's archived timeline as a completed commit or replacecommit
(``archived_timeline``). Being older than the first active instant alone proves nothing:
a table that never archived has no archived commits, and the late files of a rolled-back
write (a writer that lost its lock) carry such instants. Files of pending, failed or
rolled-back instants are thereby invisible.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Protocol

from tidemark.errors import FailedPreconditionError, InvalidArgumentError
from tidemark.storage.base import FileInfo, ListDirResult, Storage
from tidemark.storage.damaged import read_parsed
from tidemark.table.files.file_names import (
    PARTITION_METADATA_FILE,
    is_base_file_name,
    parse_base_file_name,
    partition_of,
)
from tidemark.table.files.slices import LogFile, log_files_in, logs_of_slice
from tidemark.table.metadata.actions import CLEAN, DELTA_COMMIT, REPLACE_COMMIT, WRITE_ACTIONS
from tidemark.table.metadata.clean import CleanMetadata, CleanPlan
from tidemark.table.timeline.archived import META_FOLDER, ArchivedTimeline
from tidemark.table.timeline.instant import State, validate_instant_time
from tidemark.table.timeline.layout1 import Timeline
from tidemark.table.timeline.versions import Archive

FILE_VERSIONS_POLICY = "KEEP_LATEST_FILE_VERSIONS"
"""The cleaner policy (``clean_planner.CleanPolicy``) whose recorded instant is the floor."""


@dataclass(frozen=True)
class BaseFile:
    partition_path: str
    file_id: str
    instant: str
    path: str
    size: int


@dataclass(frozen=True)
class FileSlice:
    """A file group's latest slice: its base file (None for a group of logs only) and the
    log files a reader merges into it, in order."""

    partition_path: str
    file_id: str
    base: BaseFile | None
    logs: tuple[LogFile, ...]

    @property
    def base_instant(self) -> str:
        """Its base file's instant; for a slice of logs only, its first log's."""
        return self.base.instant if self.base is not None else self.logs[0].name.instant

    @property
    def size(self) -> int:
        """Its files' bytes."""
        return (self.base.size if self.base is not None else 0) + sum(log.size for log in self.logs)

    @property
    def paths(self) -> list[str]:
        """Its files: the base file, then the log files."""
        return ([self.base.path] if self.base is not None else []) + [log.path for log in self.logs]


class FileListing(Protocol):
    """Where the view finds a table's files when not by listing storage (Hudi's metadata
    table): the files of some partitions, or of all when None."""

    def list_files(self, partitions: Iterable[str] | None) -> Iterable[FileInfo]: ...


class FileSystemView:
    """``archive`` is the table's archived timeline (a fresh reader of the default folder
    when None), read only if a file is older than the active timeline; ``listing`` lists
    the table's files instead of storage (None: storage is listed)."""

    def __init__(
        self,
        storage: Storage,
        timeline: Timeline,
        as_of: str | None = None,
        archive: Archive | None = None,
        listing: FileListing | None = None,
    ) -> None:
        self.storage = storage
        self.listing = listing
        self.timeline = timeline
        self.archive = archive or ArchivedTimeline(storage)
        self.as_of = resolve_as_of(timeline, self.archive, as_of) if as_of else None
        instants = timeline.instants()
        self._completed = {
            i.timestamp for i in instants if i.is_completed and self._in_range(i.completed_at)
        }
        self._pending = {i.timestamp for i in instants if not i.is_completed}
        self._timeline_start = instants[0].timestamp if instants else None
        self._archived: frozenset[str] | None = None
        self._logs_before_start = False
        """Whether a listed log file is named older than the active timeline (its
        deltacommits may be archived)."""
        self._replaced = self._replaced_file_groups()

    def latest_base_files(self, partitions: Iterable[str] | None = None) -> list[BaseFile]:
        """One BaseFile per live file group, sorted by partition then file id."""
        return self._latest(self._list(partitions))

    def _latest(self, listing: Iterable[FileInfo]) -> list[BaseFile]:
        latest: dict[tuple[str, str], BaseFile] = {}
        for base_file in self._committed(listing):
            key = (base_file.partition_path, base_file.file_id)
            if key in self._replaced:
                continue
            if key not in latest or latest[key].instant < base_file.instant:
                latest[key] = base_file
        return sorted(latest.values(), key=lambda f: (f.partition_path, f.file_id))

    def latest_file_slices(self, partitions: Iterable[str] | None = None) -> list[FileSlice]:
        """One FileSlice per live file group, sorted by partition then file id; groups
        written only to logs count when a visible deltacommit wrote them."""
        listing = list(self._list(partitions))
        bases = {(b.partition_path, b.file_id): b for b in self._latest(listing)}
        logs: dict[tuple[str, str], list[LogFile]] = {}
        for log in self._log_files(listing):
            logs.setdefault(log.file_group, []).append(log)
        completed_at = self.completed_deltacommits()
        slices = []
        for group in sorted(set(bases) | set(logs)):
            if group in self._replaced:
                continue
            base = bases.get(group)
            read = logs_of_slice(
                logs.get(group, []),
                base.instant if base else None,
                self.timeline.LAYOUT == 1,
                completed_at,
            )
            if base is not None or read:
                slices.append(FileSlice(group[0], group[1], base, tuple(read)))
        return slices

    def file_slices(self, partitions: Iterable[str] | None = None) -> list[FileSlice]:
        """Every slice of every file group, replaced groups too (what the cleaner chooses
        from), by partition, file id and base instant: each committed base file with the
        log files of its slice (a slice of logs only where no committed base file starts
        it). On version 6 a log file belongs to the slice its name's instant starts (a
        pending compaction's, named after it, too); on 8 and 9 to the latest base file at
        or before its deltacommit's completion, and log files of deltacommits not
        completed are left out (rollback's and orphan removal's)."""
        listing = list(self._list(partitions))
        slices: dict[tuple[str, str, str], tuple[BaseFile | None, list[LogFile]]] = {}
        starts: dict[tuple[str, str], list[str]] = {}
        for base in sorted(self._committed(listing), key=lambda b: b.instant):
            slices[(base.partition_path, base.file_id, base.instant)] = (base, [])
            starts.setdefault((base.partition_path, base.file_id), []).append(base.instant)
        logs = self._log_files(listing)
        completed_at = self.completed_deltacommits() if self.timeline.LAYOUT == 2 else {}
        for log in logs:
            if self.timeline.LAYOUT == 1:
                start = log.name.instant
            elif log.name.instant in completed_at:
                done = completed_at[log.name.instant]
                start = max((s for s in starts.get(log.file_group, []) if s <= done), default="")
            else:
                continue
            slices.setdefault((*log.file_group, start), (None, []))[1].append(log)
        return [
            FileSlice(partition, file_id, base, tuple(logs))
            for (partition, file_id, _), (base, logs) in sorted(slices.items())
        ]

    def _log_files(self, listing: Iterable[FileInfo]) -> list[LogFile]:
        """The log files among ``listing``, noting whether one is named older than the
        active timeline (``completed_deltacommits`` then reads the archive)."""
        logs = log_files_in(listing)
        start = self._timeline_start
        if logs and (start is None or min(log.name.instant for log in logs) < start):
            self._logs_before_start = True
        return logs

    def completed_deltacommits(self) -> dict[str, str]:
        """Requested time -> completion time of each deltacommit visible at ``as_of``:
        those on the active timeline and, once this view listed a log file named older
        than the active timeline, the archived ones before it."""
        active = {
            instant.timestamp: instant.completed_at
            for instant in self.timeline.completed(frozenset({DELTA_COMMIT}))
            if instant.timestamp in self._completed
        }
        if not self._logs_before_start:
            return active
        archived = {
            timestamp: completed_at
            for timestamp, completed_at in self.archive.completed_deltacommits().items()
            if (self._timeline_start is None or timestamp < self._timeline_start)
            and self._in_range(completed_at)
        }
        return {**archived, **active}

    def committed_base_files(self, partitions: Iterable[str] | None = None) -> list[BaseFile]:
        """Every committed base file: each file group's every slice, replaced groups too
        (what the cleaner chooses from)."""
        return self._committed(self._list(partitions))

    def _committed(self, listing: Iterable[FileInfo]) -> list[BaseFile]:
        found = (self._visible_base_file(info) for info in listing)
        return [base_file for base_file in found if base_file is not None]

    def replaced_file_groups(self) -> dict[tuple[str, str], str]:
        """(partition path, file id) -> the completed replacecommit that replaced it."""
        return dict(self._replaced)

    def file_groups_by_partition(
        self, partitions: Iterable[str] | None = None
    ) -> dict[str, list[BaseFile]]:
        grouped: dict[str, list[BaseFile]] = {}
        for base_file in self.latest_base_files(partitions):
            grouped.setdefault(base_file.partition_path, []).append(base_file)
        return grouped

    def partitions(self) -> list[str]:
        """Partitions holding at least one live file group."""
        return sorted(self.file_groups_by_partition())

    def _in_range(self, timestamp: str) -> bool:
        return self.as_of is None or timestamp <= self.as_of

    def _is_committed(self, timestamp: str) -> bool:
        if timestamp in self._completed:
            return True
        before_start = self._timeline_start is not None and timestamp < self._timeline_start
        return before_start and self._in_range(timestamp) and self._is_archived(timestamp)

    def _is_archived(self, timestamp: str) -> bool:
        """Asked lazily: only tables with files older than the active timeline read it."""
        if self._archived is None:
            self._archived = self.archive.completed_writes()
        return timestamp in self._archived

    def _visible_base_file(self, info: FileInfo) -> BaseFile | None:
        name = info.path.rpartition("/")[2]
        if info.path.startswith(".hoodie/") or not is_base_file_name(name):
            return None
        parsed = parse_base_file_name(name)
        if not self._is_committed(parsed.instant):
            return None
        return BaseFile(
            partition_of(info.path), parsed.file_id, parsed.instant, info.path, info.size
        )

    def _list(self, partitions: Iterable[str] | None) -> Iterable[FileInfo]:
        if self.listing is not None:
            yield from self.listing.list_files(partitions)
            return
        if partitions is None:
            for listing in partition_listings(self.storage).values():
                yield from listing.files
            return
        for partition in sorted(set(partitions)):
            yield from self.storage.list_dir(partition).files

    def _replaced_file_groups(self) -> dict[tuple[str, str], str]:
        replaced: dict[tuple[str, str], str] = {}
        for instant in self.timeline.completed(frozenset({REPLACE_COMMIT})):
            if instant.timestamp not in self._completed:
                continue
            metadata = self.timeline.read_metadata(instant)
            for partition, file_ids in metadata.partition_to_replace_file_ids.items():
                replaced.update(((partition, file_id), instant.timestamp) for file_id in file_ids)
        return replaced


def last_clean(timeline: Timeline) -> CleanMetadata | None:
    """The metadata of the newest completed clean on the active timeline (one read)."""
    cleans = timeline.completed(frozenset({CLEAN}))
    if not cleans:
        return None
    return read_parsed(timeline.storage, cleans[-1].path, CleanMetadata.from_avro)


def completion_times(timeline: Timeline) -> Callable[[str], str]:
    """Requested time -> completion time of the completed instants on the active
    timeline (the requested time itself for any other, and on version 6)."""
    done = {i.timestamp: i.completed_at for i in timeline.completed()}
    return lambda timestamp: done.get(timestamp, timestamp)


def resolve_as_of(timeline: Timeline, archive: Archive, as_of: str) -> str:
    """``as_of`` as the completion time a snapshot is read at: the requested time of a
    completed write on the active timeline is that write's completion time (on version 6
    the same time), any other time is taken as a completion time. InvalidArgumentError
    before the table's first commit, FailedPreconditionError below the retention floor
    (``check_readable``); both name ``as_of``."""
    validate_instant_time(as_of, field="as_of")
    writes = timeline.completed(WRITE_ACTIONS)
    resolved = next((i.completed_at for i in writes if i.timestamp == as_of), as_of)
    first = min((i.completed_at for i in writes), default=None)
    if first is None or resolved < first:
        archived = min(archive.completed_writes(), default=None)
        first = archived or first
    if first is None or resolved < first:
        raise InvalidArgumentError(
            f"as_of {as_of} is before the table's first commit"
            + (f" ({first})" if first else " (it has none)"),
            field="as_of",
        )
    check_readable(timeline, resolved)
    return resolved


def earliest_readable(timeline: Timeline) -> str | None:
    """The oldest ``as_of`` whose snapshot is whole; None when nothing was ever cleaned.
    It is read from the newest clean, a pending one included (its deletes may be under
    way; cleans keep it monotonic): under the commit-based policies the cleaner keeps
    each file group's latest slice completed before the earliest commit to retain, so
    the write completed just before that commit is whole too (when it is still on the
    active timeline); under KEEP_LATEST_FILE_VERSIONS the instant recorded is the floor."""
    policy, retained = _newest_retained(timeline)
    if not retained:
        return None
    done = sorted(timeline.completed(WRITE_ACTIONS), key=lambda i: i.completed_at)
    at = next((n for n, i in enumerate(done) if i.timestamp == retained), None)
    if at is None:
        return completion_times(timeline)(retained)
    if policy != FILE_VERSIONS_POLICY and at > 0:
        return done[at - 1].completed_at
    return done[at].completed_at


def _newest_retained(timeline: Timeline) -> tuple[str, str | None]:
    """The newest clean's policy and earliest commit to retain (a pending clean's plan
    first)."""
    pending = [i for i in timeline.pending() if i.action == CLEAN]
    if pending:
        requested = pending[-1].with_state(State.REQUESTED)
        plan = read_parsed(timeline.storage, requested.path, CleanPlan.from_avro)
        if plan.earliest_to_retain is not None:
            return plan.policy, plan.earliest_to_retain.timestamp
    clean = last_clean(timeline)
    if clean is None:
        return "", None
    return clean.policy, clean.earliest_commit_to_retain or None


def check_readable(timeline: Timeline, as_of: str) -> None:
    """FailedPreconditionError(field="as_of") when cleaning removed files the snapshot at
    ``as_of`` needs: a read never silently misses files."""
    floor = earliest_readable(timeline)
    if floor is not None and as_of < floor:
        raise FailedPreconditionError(
            f"as_of {as_of} is older than the table's retention: the earliest instant "
            f"still readable is {floor}",
            field="as_of",
        )


def partition_listings(storage: Storage, root: str = "") -> dict[str, ListDirResult]:
    """Every partition (folder holding ``.hoodie_partition_metadata``) with its listing,
    at or below ``root`` (the table's base by default).

    Hudi's discovery without the metadata table: list folder by folder from the root,
    never entering ``.hoodie`` (markers, temp files) nor the folders below a partition,
    so a table with P partitions costs about P list requests.
    """
    found: dict[str, ListDirResult] = {}
    folders = deque([root])
    while folders:
        folder = folders.popleft()
        listing = storage.list_dir(folder)
        if _is_partition(listing):
            found[folder] = listing
        else:
            folders.extend(d for d in listing.dirs if d.rpartition("/")[2] != META_FOLDER)
    return found


def partitions_around(
    storage: Storage, paths: Iterable[str], known: Collection[str] = ()
) -> set[str]:
    """The table's partitions a write to partition ``paths`` could nest with: each path
    that is a partition, the partition among its ancestors (the first one discovery from
    the base meets) and the partitions below it; what ``partition_listings`` would give
    for those paths, at a cost proportionate to the paths, not to the table. A path in
    ``known`` (partitions a writer saw exist before, and a partition folder is never
    removed) asks storage nothing."""
    found: set[str] = set()
    listing = functools.cache(storage.list_dir)
    for path in sorted(set(paths)):
        if path in known:
            found.add(path)
            continue
        parts = path.split("/")
        outer = next(
            (
                ancestor
                for ancestor in ("/".join(parts[:depth]) for depth in range(1, len(parts)))
                if ancestor in known or _is_partition(listing(ancestor))
            ),
            None,
        )
        if outer is not None:
            found.add(outer)
        elif _is_partition(listing(path)):
            found.add(path)
        else:
            for folder in listing(path).dirs:
                if folder.rpartition("/")[2] != META_FOLDER:
                    found.update(partition_listings(storage, folder))
    return found


def _is_partition(listing: ListDirResult) -> bool:
    """Hudi names the metafile ``.hoodie_partition_metadata``, with a base-format suffix
    (``.parquet``) when written in the base file format."""
    return any(
        info.path.rpartition("/")[2].startswith(PARTITION_METADATA_FILE) for info in listing.files
    )
