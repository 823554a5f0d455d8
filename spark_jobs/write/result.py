"""What a write reports (``WriteResult``), the operations it knows, and what a writer of
one table keeps from one write to the next (``TableMemo``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import structlog

from tidemark.jobs.checks import require_one_of
from tidemark.jobs.compaction import CompactionResult
from tidemark.jobs.stages import StageClock
from tidemark.retention import RetentionResult
from tidemark.table import HoodieTable
from tidemark.table.files.view import completion_times
from tidemark.table.metadata.commit import WriteStat

log = structlog.get_logger(__name__)

OPERATION_TYPES = {
    "bulk_insert": "BULK_INSERT",
    "insert": "INSERT",
    "upsert": "UPSERT",
    "delete": "DELETE",
    "insert_overwrite": "INSERT_OVERWRITE",
}
DUPLICATING_OPERATIONS = ("bulk_insert", "insert")
"""Operations ``--allow-duplicates`` applies to (Hudi's ``hoodie.combine.before.insert``)."""


def check_operation(operation: str) -> None:
    require_one_of("operation", operation, OPERATION_TYPES, "operation")


@dataclass
class WriteResult:
    """What a write did; ``stage_seconds`` in run order, request counts of the driver.
    ``already_committed``: the idempotency key was found on ``instant``, nothing written.
    ``instant`` is the write's requested time, ``completion_time`` when it completed
    (table versions 8 and 9 record it; on version 6, which records none, the requested
    time, by which version 6 readers order writes); ``as_of`` takes either."""

    instant: str
    operation: str
    rows_written: int
    rows_inserted: int
    rows_updated: int
    rows_deleted: int
    files_written: int
    replaced_file_groups: int = 0
    files_reconciled: int = 0
    stage_seconds: dict[str, float] = field(default_factory=dict)
    storage_requests: dict[str, int] = field(default_factory=dict)
    already_committed: bool = False
    tagging: str = "simple"
    """How keys were tagged: ``record`` (the record index) or ``simple`` (a join)."""
    lock_wait_s: float = 0.0
    """Time spent waiting for the table lock, to begin and to commit."""
    retention: RetentionResult | None = None
    """The inline clean and archival after the commit (None when off or failed)."""
    compactions: list[CompactionResult] = field(default_factory=list)
    """The compactions run inline after the commit (``compact_after``), oldest first."""
    compaction_error: str | None = None
    """Why the inline compaction failed (the write committed all the same; the failed run is
    back to its plan, which the next run or the next such write runs)."""
    empty_input: bool = False
    """The input had no rows: nothing was written and no instant made (``instant`` is "")."""
    completion_time: str = ""


@dataclass
class TableMemo:
    """What a writer that writes one table again and again (a streaming query) keeps from
    one write to the next: the partitions its commits wrote, which exist from then on (a
    partition folder is never removed), so a batch's partition checks do not ask storage
    about them again; and the size of the last input it read (Spark's own measure of the
    cached input), which sizes the next one's tasks when Spark cannot (``coalesced_input``:
    a micro-batch of Kafka or ``rate`` has no size until it is read)."""

    partitions: set[str] = field(default_factory=set)
    input_bytes: int | None = None


def result_of(
    instant: str,
    operation: str,
    stats: list[WriteStat],
    replaced: dict[str, list[str]],
    clock: StageClock,
    table: HoodieTable,
) -> WriteResult:
    """The result of the write that completed ``instant`` with ``stats``."""
    return WriteResult(
        instant=instant,
        completion_time=completion_times(table.timeline)(instant),
        operation=operation,
        rows_written=sum(s.num_writes for s in stats),
        rows_inserted=sum(s.num_inserts for s in stats),
        rows_updated=sum(s.num_update_writes for s in stats),
        rows_deleted=sum(s.num_deletes for s in stats),
        files_written=len(stats),
        replaced_file_groups=sum(len(ids) for ids in replaced.values()),
        stage_seconds=dict(clock.seconds),
        storage_requests=table.storage.requests.snapshot(),
    )


def already_committed(
    table: HoodieTable, earlier: str, operation: str, key: str | None, clock: StageClock
) -> WriteResult:
    """The result of a write whose idempotency ``key`` instant ``earlier`` carries."""
    log.info("write.already_committed", instant=earlier, key=key)
    result = result_of(earlier, operation, [], {}, clock, table)
    result.already_committed = True
    return result
