"""Compaction plans: ``<t>.compaction.requested`` in Hudi's encoding, and how one is made.

Hudi saves a scheduled compaction as a requested ``compaction`` instant whose content is an
Avro object container file with one ``HoodieCompactionPlan`` record (plan version 2): one
operation per file slice to compact (its base instant, base file name, log file names,
file id, partition and IO metrics), the strategy and extra metadata. The schema is
``metadata.compaction``'s (Hudi 1.0's, as in the fixture ``v8_trips_8i3u1d``; Hudi 0.14
writes the same fields). The plan moves to ``<t>.compaction.inflight`` while it runs and
completes as ``<t>.commit`` (operation type ``COMPACT``), whose new base files
``{fileId}_{token}_{t}.parquet`` keep each operation's file id.

Scheduling follows Hudi's defaults (``hoodie.compact.inline.max.delta.commits`` = 5,
``hoodie.compaction.target.io`` = 500 GB): a plan is made once that many deltacommits
completed since the last compaction; each file group whose latest slice has log files is an
operation, taken largest logs first (``LogFileSizeBasedCompactionStrategy``) until the
plan's IO (base and log bytes read, the base written again) reaches the bound, the
operation that crosses it included (``BoundedIOCompactionStrategy``). A file group in a
pending compaction or clustering plan, or one a pending write touches, is never planned.

On table version 6 a log file is named with its slice's base instant, and Hudi's readers
(hudi-rs 0.5 included) place a log written against a pending compaction by that name, so
a write that appended to a file group with a pending compaction would be read wrong after
the compaction (or before it, by hudi-rs). Writers on version 6 therefore refuse such
groups (``refuse_compacting``): run the pending compaction first. On versions 8 and 9 a
log belongs to the slice by its deltacommit's completion time, so writers append beside a
pending compaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from tidemark.checks import require_positive
from tidemark.config import MIB
from tidemark.errors import ConflictError, FailedPreconditionError, InvalidArgumentError
from tidemark.storage.damaged import read_parsed
from tidemark.table import HoodieTable
from tidemark.table.files.file_names import join_path
from tidemark.table.files.view import FileSlice
from tidemark.table.metadata.actions import COMMIT, COMPACTION, DELTA_COMMIT, WRITE_ACTIONS
from tidemark.table.metadata.avro import write_single_record
from tidemark.table.metadata.compaction import COMPACTION_PLAN_SCHEMA, read_compaction_plan
from tidemark.table.plans import clustering
from tidemark.table.timeline.instant import Instant, State, new_instant_time

log = structlog.get_logger(__name__)

PLAN_VERSION = 2
"""``CompactionUtils.LATEST_COMPACTION_METADATA_VERSION``."""
DEFAULT_MAX_DELTA_COMMITS = 5
"""``hoodie.compact.inline.max.delta.commits``."""
DEFAULT_TARGET_IO_MB = 500 * 1024
"""``hoodie.compaction.target.io``: 500 GB, in MB."""
TOTAL_LOG_FILES = "TOTAL_LOG_FILES"
TOTAL_LOG_FILES_SIZE = "TOTAL_LOG_FILES_SIZE"
TOTAL_IO_READ_MB = "TOTAL_IO_READ_MB"
TOTAL_IO_WRITE_MB = "TOTAL_IO_WRITE_MB"
TOTAL_IO_MB = "TOTAL_IO_MB"


@dataclass(frozen=True)
class CompactionOperation:
    """One file slice to compact: its base file (``data_file``, a file name; "" for a
    group of logs only) merged with its log files (``log_files``, file names, in order).
    Hudi stores names, not paths; ``base_path`` and ``log_paths`` are table-relative."""

    partition_path: str
    file_id: str
    base_instant: str
    data_file: str
    log_files: tuple[str, ...]
    metrics: Mapping[str, float] = field(default_factory=dict)
    bootstrap_file_path: str | None = None

    @property
    def base_path(self) -> str | None:
        return join_path(self.partition_path, self.data_file) if self.data_file else None

    @property
    def log_paths(self) -> tuple[str, ...]:
        return tuple(join_path(self.partition_path, name) for name in self.log_files)

    @property
    def io_mb(self) -> float:
        return self.metrics.get(TOTAL_IO_MB, 0.0)

    @classmethod
    def of_slice(cls, piece: FileSlice) -> CompactionOperation:
        """The operation compacting ``piece``, with Hudi's metrics
        (``CompactionStrategy.captureMetrics``): the base file and logs read, the base
        written again."""
        base_bytes = piece.base.size if piece.base is not None else 0
        log_bytes = sum(log.size for log in piece.logs)
        read_mb = (base_bytes + log_bytes) / MIB
        write_mb = base_bytes / MIB
        return cls(
            partition_path=piece.partition_path,
            file_id=piece.file_id,
            base_instant=piece.base.instant if piece.base is not None else "",
            data_file=piece.base.path.rpartition("/")[2] if piece.base is not None else "",
            log_files=tuple(log.path.rpartition("/")[2] for log in piece.logs),
            metrics={
                TOTAL_LOG_FILES: float(len(piece.logs)),
                TOTAL_LOG_FILES_SIZE: float(log_bytes),
                TOTAL_IO_READ_MB: read_mb,
                TOTAL_IO_WRITE_MB: write_mb,
                TOTAL_IO_MB: read_mb + write_mb,
            },
        )

    def to_record(self) -> dict[str, Any]:
        return {
            "baseInstantTime": self.base_instant,
            "deltaFilePaths": list(self.log_files),
            "dataFilePath": self.data_file or None,
            "fileId": self.file_id,
            "partitionPath": self.partition_path,
            "metrics": dict(self.metrics),
            "bootstrapFilePath": self.bootstrap_file_path,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> CompactionOperation:
        """Names are kept as file names: a path a writer stored in full (Hudi 0.x may)
        keeps its last component."""
        file_id = record.get("fileId") or ""
        if not file_id:
            raise InvalidArgumentError(
                "an operation of the compaction plan has no fileId", field="metadata"
            )
        return cls(
            partition_path=record.get("partitionPath") or "",
            file_id=file_id,
            base_instant=record.get("baseInstantTime") or "",
            data_file=(record.get("dataFilePath") or "").rpartition("/")[2],
            log_files=tuple(p.rpartition("/")[2] for p in record.get("deltaFilePaths") or []),
            metrics=dict(record.get("metrics") or {}),
            bootstrap_file_path=record.get("bootstrapFilePath"),
        )


@dataclass(frozen=True)
class CompactionStrategy:
    """``HoodieCompactionStrategy``: the compactor class and its parameters."""

    class_name: str | None = None
    params: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CompactionPlan:
    operations: tuple[CompactionOperation, ...]
    extra_metadata: Mapping[str, str] = field(default_factory=dict)
    strategy: CompactionStrategy | None = None
    preserve_hoodie_metadata: bool = False
    missing_schedule_partitions: tuple[str, ...] = ()
    version: int = PLAN_VERSION

    def __post_init__(self) -> None:
        keys = [(op.partition_path, op.file_id) for op in self.operations]
        if len(set(keys)) != len(keys):
            raise InvalidArgumentError(
                "a file group is in more than one operation of the plan", field="operations"
            )

    def file_groups(self) -> set[tuple[str, str]]:
        """(partition path, file id) of every file group the plan compacts."""
        return {(op.partition_path, op.file_id) for op in self.operations}

    @property
    def io_mb(self) -> float:
        return sum(op.io_mb for op in self.operations)

    def to_record(self) -> dict[str, Any]:
        strategy = self.strategy
        return {
            "operations": [op.to_record() for op in self.operations],
            "extraMetadata": dict(self.extra_metadata),
            "version": self.version,
            "strategy": None
            if strategy is None
            else {
                "compactorClassName": strategy.class_name,
                "strategyParams": dict(strategy.params),
                "version": 1,
            },
            "preserveHoodieMetadata": self.preserve_hoodie_metadata,
            "missingSchedulePartitions": list(self.missing_schedule_partitions),
        }

    def to_avro(self) -> bytes:
        """The ``<t>.compaction.requested`` content."""
        return write_single_record(COMPACTION_PLAN_SCHEMA, self.to_record())

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> CompactionPlan:
        strategy = record.get("strategy")
        return cls(
            operations=tuple(
                CompactionOperation.from_record(op) for op in record.get("operations") or []
            ),
            extra_metadata=dict(record.get("extraMetadata") or {}),
            strategy=None
            if strategy is None
            else CompactionStrategy(
                strategy.get("compactorClassName"), dict(strategy.get("strategyParams") or {})
            ),
            preserve_hoodie_metadata=bool(record.get("preserveHoodieMetadata")),
            missing_schedule_partitions=tuple(record.get("missingSchedulePartitions") or ()),
            version=record.get("version") or 1,
        )

    @classmethod
    def from_avro(cls, data: bytes) -> CompactionPlan:
        """The plan of a ``compaction.requested`` file (an empty file: no operations)."""
        return cls.from_record(read_compaction_plan(data) if data.strip() else {})


@dataclass(frozen=True)
class PendingCompaction:
    """A scheduled compaction not yet completed: requested, or inflight while it runs."""

    instant: Instant
    plan: CompactionPlan

    @property
    def timestamp(self) -> str:
        return self.instant.timestamp


def plan_of(table: HoodieTable, instant: Instant) -> CompactionPlan:
    """The plan of compaction ``instant`` (pending, or completed as a commit)."""
    path = table.timeline.requested(instant).path
    return read_parsed(table.storage, path, CompactionPlan.from_avro)


def pending_compactions(table: HoodieTable, *, reload: bool = True) -> list[PendingCompaction]:
    """Every pending compaction on the timeline, oldest first."""
    timeline = table.timeline
    if reload:
        timeline.refresh()
    return [
        PendingCompaction(instant, plan_of(table, instant))
        for instant in timeline.pending()
        if instant.action == COMPACTION
    ]


def pending_compaction(table: HoodieTable, timestamp: str) -> PendingCompaction:
    """The pending compaction at ``timestamp``; FailedPreconditionError(field="instant")
    naming what the instant is otherwise (a completed compaction, another action),
    NotFoundError when there is none."""
    for candidate in pending_compactions(table):
        if candidate.timestamp == timestamp:
            return candidate
    instant = table.timeline.find(timestamp)
    if instant.is_completed and table.timeline.requested(instant).action == COMPACTION:
        what = "a completed compaction"
    else:
        state = "completed" if instant.is_completed else instant.state.name.lower()
        what = f"a {state} {instant.action}"
    raise FailedPreconditionError(
        f"instant {timestamp} is {what}, not a pending compaction plan", field="instant"
    )


def file_groups_in(pending: Iterable[PendingCompaction]) -> dict[tuple[str, str], str]:
    """(partition path, file id) -> the instant of the pending compaction holding it."""
    return {key: p.timestamp for p in pending for key in p.plan.file_groups()}


def refuse_compacting(table: HoodieTable, file_groups: Iterable[tuple[str, str]]) -> None:
    """On table version 6 (timeline layout 1), ConflictError(field="compaction") when a
    write would append to a file group in a pending compaction (see the module's
    docstring); on versions 8 and 9 writers append beside it."""
    if table.timeline.LAYOUT != 1:
        return
    taken = file_groups_in(pending_compactions(table, reload=False))
    for partition, file_id in sorted(set(file_groups) & taken.keys()):
        raise ConflictError(
            f"file group {file_id} of partition {partition!r} is in pending compaction "
            f"{taken[(partition, file_id)]}; on table version 6 writes to it wait for the "
            "compaction: run `tidemark compaction run` first",
            field="compaction",
        )


@dataclass(frozen=True)
class ScheduleOptions:
    """When and how much to compact, Hudi's defaults."""

    max_delta_commits: int = DEFAULT_MAX_DELTA_COMMITS
    """Plan once this many deltacommits completed since the last compaction."""
    target_io_mb: float = DEFAULT_TARGET_IO_MB
    """The IO (MB read and written) one plan may reach; at least one operation is taken."""

    def __post_init__(self) -> None:
        require_positive("max_delta_commits", self.max_delta_commits)
        require_positive("target_io_mb", self.target_io_mb)


DEFAULT_SCHEDULE_OPTIONS = ScheduleOptions()


def last_compaction_time(table: HoodieTable) -> str:
    """Requested time of the latest compaction on the active timeline, pending or
    completed ("" when there is none)."""
    timeline = table.timeline
    compactions = [
        i.timestamp
        for i in timeline.instants()
        if i.action == COMPACTION
        or (i.action == COMMIT and timeline.requested(i).action == COMPACTION)
    ]
    return max(compactions, default="")


def delta_commits_after(table: HoodieTable, after: str) -> list[str]:
    """Instant times of the deltacommits completed after ``after``, oldest first."""
    done = table.timeline.completed(frozenset({DELTA_COMMIT}))
    return [i.timestamp for i in done if i.timestamp > after]


def delta_commits_since_compaction(table: HoodieTable) -> int:
    """Deltacommits completed after the last compaction was requested (Hudi counts from
    the latest compaction, pending or completed, as of its requested time)."""
    return len(delta_commits_after(table, last_compaction_time(table)))


def plan_compaction(
    table: HoodieTable, options: ScheduleOptions = DEFAULT_SCHEDULE_OPTIONS
) -> CompactionPlan | None:
    """The plan to schedule now, or None (too few deltacommits, nothing to compact). Run
    under the table lock, so the pending plans and writes it leaves out stay pending."""
    if delta_commits_since_compaction(table) < options.max_delta_commits:
        return None
    return bounded_plan(compactable_operations(table), options.target_io_mb)


def compactable_operations(table: HoodieTable) -> list[CompactionOperation]:
    """An operation for each latest file slice with log files whose group no pending
    compaction, clustering plan or write holds, largest logs first
    (``LogFileSizeBasedCompactionStrategy``'s order)."""
    busy = set(file_groups_in(pending_compactions(table, reload=False)))
    busy |= set(clustering.file_groups_in(clustering.pending_plans(table, reload=False)))
    busy |= pending_write_groups(table)
    candidates = [
        CompactionOperation.of_slice(piece)
        for piece in table.view().latest_file_slices()
        if piece.logs and (piece.partition_path, piece.file_id) not in busy
    ]
    candidates.sort(key=lambda op: -op.metrics[TOTAL_LOG_FILES_SIZE])
    return candidates


def bounded_plan(
    candidates: Iterable[CompactionOperation], target_io_mb: float
) -> CompactionPlan | None:
    """The first ``candidates`` until their IO reaches ``target_io_mb``, the operation that
    crosses it included (``BoundedIOCompactionStrategy``); None without candidates."""
    operations: list[CompactionOperation] = []
    remaining = target_io_mb
    for operation in candidates:
        operations.append(operation)
        remaining -= operation.io_mb
        if remaining <= 0:
            break
    return CompactionPlan(tuple(operations)) if operations else None


def pending_write_groups(table: HoodieTable) -> set[tuple[str, str]]:
    """File groups the pending writes name in their inflight files (Tidemark's and Hudi's
    workload profile, written before the write starts its files, under the table lock)."""
    timeline = table.timeline
    groups: set[tuple[str, str]] = set()
    for instant in timeline.pending():
        if instant.action in WRITE_ACTIONS and instant.state is State.INFLIGHT:
            profile = read_parsed(table.storage, instant.path, timeline.decode_metadata)
            groups |= profile.touched_file_groups()
    return groups


def save_plan(table: HoodieTable, plan: CompactionPlan) -> Instant:
    """Write ``plan`` as a new ``<t>.compaction.requested``. The caller holds the table
    lock (its fence set on the timeline); a plan overlapping a pending compaction or
    clustering plan is refused."""
    timeline = table.timeline
    if timeline.fence is None:
        raise FailedPreconditionError(
            "saving a compaction plan requires the table lock", field="lock"
        )
    taken = file_groups_in(pending_compactions(table))
    taken |= clustering.file_groups_in(clustering.pending_plans(table, reload=False))
    overlap = sorted(plan.file_groups() & taken.keys())
    if overlap:
        partition, file_id = overlap[0]
        raise ConflictError(
            f"file group {file_id} of partition {partition!r} is already in pending plan "
            f"{taken[(partition, file_id)]}",
            field="plan",
        )
    timestamp = new_instant_time(after=timeline.latest_timestamp())
    instant = timeline.create_requested(timestamp, COMPACTION, plan.to_avro())
    log.info(
        "compaction.plan_saved",
        table=table.uri,
        instant=timestamp,
        operations=len(plan.operations),
        io_mb=round(plan.io_mb, 3),
    )
    return instant


def slices_needed_by_compactions(table: HoodieTable) -> dict[tuple[str, str], str]:
    """(partition path, file id) -> the oldest base instant a pending compaction needs of
    that file group: its slices from that instant on are kept. A pending compaction reads,
    for each file group of its plan, the slice at the plan's base instant, and the slice at
    its own instant (Hudi opens an empty one there when it schedules the compaction)
    collects the logs written meanwhile: Hudi's cleaner keeps every slice of such a group
    from the plan's base instant on (``CleanPlanner.isFileSliceNeededForPendingCompaction``),
    and so does Tidemark's (the timeline as last loaded)."""
    needed: dict[tuple[str, str], str] = {}
    for pending in pending_compactions(table, reload=False):
        for operation in pending.plan.operations:
            group = (operation.partition_path, operation.file_id)
            needed[group] = min(needed.get(group, operation.base_instant), operation.base_instant)
    return needed
