"""The write committed under the table lock (``commit``): against the writes completed
since its batch was tagged, then published (reconciled, completed, markers dropped); on
table version 6 after every write requested before it."""

from __future__ import annotations

import time
from dataclasses import dataclass

import structlog
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from tidemark.errors import ConflictError
from tidemark.index.record_index import RecordIndex
from tidemark.jobs.errors import run_spark_action
from tidemark.jobs.index_writes import new_files
from tidemark.jobs.tagging import OLD_FILE_ID, existing_keys
from tidemark.jobs.write.begin import Begun
from tidemark.jobs.write.job import POLL_S, WriteJob
from tidemark.jobs.write.result import OPERATION_TYPES
from tidemark.jobs.write.undo import roll_back_failed_writes, roll_back_own
from tidemark.table import HoodieTable
from tidemark.table.leases.storage_lease import StorageLease
from tidemark.table.metadata.commit import CommitMetadata
from tidemark.table.plans.clustering import CLUSTER_OPERATION
from tidemark.table.records.keys import RECORD_KEY
from tidemark.table.timeline.instant import Instant
from tidemark.table.writes.commit import IDEMPOTENCY_KEY, complete_commit, other_writes

log = structlog.get_logger(__name__)


class RolledBackError(Exception):
    """A write that conflicted at its commit with one completed meanwhile, rolled back."""

    def __init__(self, conflict: ConflictError) -> None:
        super().__init__(conflict.message)
        self.conflict = conflict


@dataclass(frozen=True)
class Committed:
    """The commit's outcome: the stray files reconcile deleted, or the instant that
    already carries this write's idempotency key (``_commit_locked``); and how long it
    waited for the table lock."""

    outcome: list[str] | str
    lock_wait_s: float


def commit(
    spark: SparkSession,
    table: HoodieTable,
    begun: Begun,
    metadata: CommitMetadata,
    job: WriteJob,
) -> Committed:
    """Publish the write under the table lock. On table version 6, which records no
    completion times, writes complete in instant order (Hudi 0.x's incremental readers
    assume it): while a write requested earlier still runs, the commit waits without the
    lock, up to ``lock_wait_s`` in all."""
    instant = begun.context.instant
    ends = time.monotonic() + job.locking.wait_s
    waiting_for = None
    waited_s = 0.0
    while True:
        with job.locked(table, wait_s=max(0.0, ends - time.monotonic())) as lock:
            waited_s += lock.waited_s
            begun.lease.check()
            running, failed = other_writes(table, instant)
            if failed:  # their writers died while this one ran
                reader = job.markers.reader(table, lock.holder)
                roll_back_failed_writes(table, reader, job, exclude=instant)
            ordered = table.timeline.LAYOUT == 1
            earlier = [other for other in running if ordered and other.timestamp < instant]
            if not earlier:
                outcome = _commit_locked(spark, table, begun, metadata, job, lock)
                return Committed(outcome, waited_s)
        if time.monotonic() >= ends:
            raise ConflictError(
                f"write {earlier[0].timestamp}, requested before this one, did not complete "
                "within lock_wait_s (table version 6 completes writes in instant order)",
                field="instant",
            )
        if waiting_for != earlier[0].timestamp:
            waiting_for = earlier[0].timestamp
            log.info("write.waiting_for_earlier_write", instant=instant, earlier=waiting_for)
        time.sleep(POLL_S)


def _commit_locked(
    spark: SparkSession,
    table: HoodieTable,
    begun: Begun,
    metadata: CommitMetadata,
    job: WriteJob,
    lock: StorageLease,
) -> list[str] | str:
    """Under the table lock, against the writes completed since the batch was tagged: one
    carrying its idempotency key means this batch is in the table already (this instant
    is rolled back, that one returned); a shared file group or a key both inserted is a
    conflict (this instant is rolled back, ConflictError(field="instant"): retry)."""
    instant, action = begun.context.instant, begun.context.action
    reader = job.markers.reader(table, lock.holder)
    try:
        if job.index is None and RecordIndex.exists(table.storage):
            raise ConflictError(
                "a record index was built while this write ran, which staged nothing in it; retry",
                field="index",
            )
        concurrent = table.timeline.concurrent_writes(instant, begun.seen)
        done = _carrying_key(table, concurrent, job.options.idempotency_key)
        if done is not None:
            roll_back_own(table, instant, reader, job)
            return done
        _check_keys_not_inserted(spark, table, begun, metadata, concurrent, job)
        return complete_commit(table, instant, action, metadata, reader, seen=begun.seen)
    except ConflictError as conflict:
        if conflict.field == "lock":
            raise
        roll_back_own(table, instant, reader, job)
        raise RolledBackError(conflict) from conflict


def _carrying_key(table: HoodieTable, writes: list[Instant], key: str | None) -> str | None:
    """The write among ``writes`` whose extraMetadata carries idempotency key ``key``."""
    for instant in writes:
        if (
            key is not None
            and table.timeline.read_metadata(instant).extra_metadata.get(IDEMPOTENCY_KEY) == key
        ):
            return instant.timestamp
    return None


def _check_keys_not_inserted(
    spark: SparkSession,
    table: HoodieTable,
    begun: Begun,
    metadata: CommitMetadata,
    concurrent: list[Instant],
    job: WriteJob,
) -> None:
    """No key this write inserts as new was inserted by a write that completed meanwhile
    (in another file group: the table would hold it twice). Upserts and every write to a
    table with a record index keep keys unique; inserts into a table without one do not
    look keys up even when run one after another. Reads the keys of the other writes'
    files only when there are some; clustering commits insert no key."""
    operation = metadata.operation_type
    unique = operation == OPERATION_TYPES["upsert"] or job.index is not None
    if operation == OPERATION_TYPES["delete"] or not unique:
        return
    if not any(stat.num_inserts for stat in metadata.write_stats):
        return
    written = [
        file
        for other in concurrent
        for other_metadata in [table.timeline.read_metadata(other)]
        if other_metadata.operation_type != CLUSTER_OPERATION
        for file in new_files(other_metadata.write_stats, other.timestamp)
    ]
    if not written:
        return
    if begun.tagged is not None:
        ours = begun.tagged.where(sf.col(OLD_FILE_ID).isNull()).select(RECORD_KEY)
    else:  # a bulk_insert: every key it wrote is new
        mine = new_files(metadata.write_stats, begun.context.instant)
        ours = existing_keys(spark, table.uri, table.config, mine).select(RECORD_KEY)
    theirs = existing_keys(spark, table.uri, table.config, written)
    [clash] = run_spark_action(
        theirs.join(ours, RECORD_KEY, "left_semi")
        .agg(sf.count(sf.lit(1)).alias("keys"), sf.min(RECORD_KEY).alias("key"))
        .collect
    )
    if clash["keys"]:
        raise ConflictError(
            f"key {clash['key']!r} ({clash['keys']} keys in all) was inserted by a write that "
            "completed while this one ran; retry the write",
            field="instant",
        )
