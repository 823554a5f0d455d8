"""The write, step by step (``write``): prepare the input (``prepare``), then tag its keys
(``tag``; through a served record index, the input's validation pass in the same Spark
job), begin under the table lock (``begin``), write the files and commit
(``files``, ``commit``), again after a conflict or a running clustering plan; then clean
and archive (``retention``) and, on a merge-on-read table with ``compact_after``, compact
(``compaction``), Hudi's order."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace

import structlog
from pyspark.sql import DataFrame, SparkSession

from tidemark.clients.index import IndexClient
from tidemark.errors import InvalidArgumentError, with_note
from tidemark.jobs.job_options import serving_index, serving_markers
from tidemark.jobs.session import cancellable_jobs, check_executors_import
from tidemark.jobs.shuffles import coalesced_input, sized_shuffles
from tidemark.jobs.stages import StageClock, StageListener
from tidemark.jobs.write.begin import begin
from tidemark.jobs.write.commit import RolledBackError
from tidemark.jobs.write.compaction import compact_inline
from tidemark.jobs.write.files import finish
from tidemark.jobs.write.index import check_overwrite_keys
from tidemark.jobs.write.job import POLL_S, WriteJob
from tidemark.jobs.write.prepare import Prepared, WriteRequest, create_or_join, prepare
from tidemark.jobs.write.result import (
    DUPLICATING_OPERATIONS,
    TableMemo,
    WriteResult,
    check_operation,
)
from tidemark.jobs.write.retention import retain, retention_of
from tidemark.jobs.write.tag import Tagged, release, tag_keys
from tidemark.jobs.write_options import DEFAULT_OPTIONS, WriteOptions
from tidemark.storage.uri import canonical_uri
from tidemark.table import HoodieTable
from tidemark.table.leases.plan_run import live_run
from tidemark.table.writes import pending_clustering
from tidemark.table.writes.hudi_metadata_table import prepare_hudi_metadata_table

log = structlog.get_logger(__name__)


def write(
    spark: SparkSession,
    df: DataFrame,
    table_uri: str,
    operation: str,
    options: WriteOptions = DEFAULT_OPTIONS,
    *,
    listener: StageListener | None = None,
    memo: TableMemo | None = None,
) -> WriteResult:
    """Write ``df`` to the table at ``table_uri``, creating it when
    ``options.record_key_fields`` are given and there is no table yet (``WriteOptions``
    documents every option; its defaults are the CLI's). Raises tidemark.errors exceptions
    on bad input. A relative path is made absolute first: executors and the marker service
    run with other working directories. Service markers without an address get an embedded
    marker service in the driver, like Hudi's embedded timeline server.

    The outcome is the completed instant: once it is published the write returns it,
    whatever clean-up fails afterwards. An empty ``df`` (an empty micro-batch) writes
    nothing: the validation pass counts its rows, and with none the write returns before
    any service starts. (A separate emptiness check would stop the input's tasks after one
    row, and PySpark replaces every Python worker whose task stopped early.) A ``memo``
    carries what one write learned about the table to the next."""
    check_operation(operation)
    if options.allow_duplicates and operation not in DUPLICATING_OPERATIONS:
        raise InvalidArgumentError(
            f"only {' and '.join(DUPLICATING_OPERATIONS)} can keep duplicate keys, not {operation}",
            field="allow_duplicates",
        )
    table_uri = canonical_uri(table_uri)
    if options.marker_service_address:  # else an embedded service, started after prepare
        options.marker_options().check_reachable()
    check_executors_import(df.sparkSession)
    if options.index_service_address:
        IndexClient(options.index_service_address, table_uri).check_reachable()
    memo = memo or TableMemo()
    clock = StageClock(listener)
    read = df  # bulk_insert's files are written by the input's partitions
    if operation != "bulk_insert":
        read = coalesced_input(df, options.shuffle_parallelism, memo.input_bytes)
    asked = WriteRequest(read, table_uri, operation, options, frozenset(memo.partitions))
    with sized_shuffles(df, options.shuffle_parallelism):  # df's plan sized once, above
        with clock.stage("prepare"):
            prepared = prepare(asked)
        if prepared.row_count == 0:
            prepared.release()
            return _empty_input(table_uri, operation)
        with serving_markers(options.markers, options.marker_service_address) as address:
            served = replace(asked, options=options.with_marker_service(address))
            return _write(spark, served, prepared, clock, memo)


def _write(
    spark: SparkSession,
    asked: WriteRequest,
    prepared: Prepared,
    clock: StageClock,
    memo: TableMemo,
) -> WriteResult:
    options, operation = asked.options, asked.operation
    retention = retention_of(options)
    try:
        table, prepared = create_or_join(asked, prepared)
        with (
            serving_index(table.uri, prepared.indexed, options.index_service_address) as index,
            cancellable_jobs(spark, f"tidemark-write-{uuid.uuid4().hex}") as cancel,
        ):
            if operation == "insert_overwrite" and index is not None:
                check_overwrite_keys(table, prepared.rows, index)
            job = WriteJob(
                options,
                options.marker_options(),
                prepared.tagging,
                index,
                memo,
                options.locking(cancel),
            )
            tagged = None
            if prepared.checks is not None:
                with clock.stage("index lookup and sizing"):
                    tagged, prepared = _tagged_and_counted(spark, table, prepared, job)
                if prepared.row_count == 0:
                    release(tagged)
                    return _empty_input(table.uri, operation)
            result = _write_retrying(spark, table, prepared, operation, job, clock, tagged)
        memo.input_bytes = prepared.input_bytes
    finally:
        prepared.release()
    if retention is not None and not result.already_committed:
        with clock.stage("clean and archive"):
            result.retention = retain(table, retention, options.lock_wait_s)
    if options.compact_after is not None and not result.already_committed:
        with clock.stage("compaction"):
            ran = compact_inline(spark, table, result.instant, options)
            result.compactions, result.compaction_error = ran
    result.stage_seconds = dict(clock.seconds)
    return result


def _empty_input(table_uri: str, operation: str) -> WriteResult:
    log.info("write.empty_input", table=table_uri, operation=operation)
    return WriteResult("", operation, 0, 0, 0, 0, 0, empty_input=True)


def _tagged_and_counted(
    spark: SparkSession, table: HoodieTable, prepared: Prepared, job: WriteJob
) -> tuple[Tagged | None, Prepared]:
    """The first tagging, the input's validation pass in its job (``prepare`` left it
    there). Duplicate keys: the tagging is dropped, the rows deduplicated are tagged by
    ``_write_retrying``."""
    tagged = tag_keys(spark, table, prepared.rows, prepared.operation, job, prepared.checks)
    assert tagged.counts is not None
    counted = prepared.counted(tagged.counts)
    if tagged.counts.has_duplicate_keys or counted.row_count == 0:
        release(tagged)
        return None, counted
    return tagged, counted


def _write_retrying(
    spark: SparkSession,
    table: HoodieTable,
    prepared: Prepared,
    operation: str,
    job: WriteJob,
    clock: StageClock,
    tagged: Tagged | None,
) -> WriteResult:
    """Tag without the table lock (unless ``tagged`` already), begin under it, write
    without it, commit under it. A write rolled back for a conflict at its commit, or one
    whose file groups a running clustering plan holds (``replan``: it waits for the run to
    end), is tagged and begun again against the table as it now is, until ``lock_wait_s``
    has passed."""
    ends = time.monotonic() + job.locking.wait_s
    abandoned: set[str] = set()
    while True:
        if tagged is None and operation != "bulk_insert":
            with clock.stage("index lookup and sizing"):
                tagged = tag_keys(spark, table, prepared.rows, operation, job)
        try:
            with job.locked(table) as lock:
                if prepared.table is not None:
                    prepare_hudi_metadata_table(
                        table, disable=job.options.disable_hudi_metadata_table
                    )
                begun = begin(
                    spark, table, prepared, operation, job, lock, clock, tagged, abandoned
                )
        except pending_clustering.PlanRunningError as waiting:
            release(tagged)
            tagged = None
            if not _await_plan(table, waiting, ends):
                abandoned.add(waiting.instant)
            continue
        except BaseException:
            release(tagged)
            raise
        if isinstance(begun, WriteResult):
            release(tagged)
            return begun
        tagged = None
        try:
            return finish(spark, table, prepared, operation, job, begun, clock)
        except RolledBackError as rolled_back:
            instant = begun.context.instant
            if time.monotonic() >= ends:
                note = f"instant {instant} was rolled back; retried until lock_wait_s passed"
                raise with_note(rolled_back.conflict, note) from rolled_back
            log.info(
                "write.retrying_after_conflict",
                table=table.uri,
                instant=instant,
                conflict=rolled_back.conflict.message,
            )


def _await_plan(
    table: HoodieTable, waiting: pending_clustering.PlanRunningError, ends: float
) -> bool:
    """Wait, without the table lock, until the clustering plan a ``replan`` write touches
    is no longer running (committed, or failed and rolled back to a plan the write then
    replans) or, for a protected plan, no longer pending. Past ``ends`` (the write's
    ``lock_wait_s``) a protected plan whose run never started is given up (False); a run
    still going fails the write, untouched."""
    protected = isinstance(waiting, pending_clustering.PlanProtectedError)
    log.info(
        "write.waiting_for_clustering", table=table.uri, plan=waiting.instant, protected=protected
    )
    while time.monotonic() < ends:
        time.sleep(POLL_S)
        table.timeline.reload()
        if not any(i.timestamp == waiting.instant for i in table.timeline.pending()):
            return True
        if not protected and live_run(table.storage, waiting.instant) is None:
            return True
    if protected and live_run(table.storage, waiting.instant) is None:
        log.warning("write.protected_plan_not_run", table=table.uri, plan=waiting.instant)
        return False
    raise with_note(waiting, "it did not commit within lock_wait_s; nothing was written")
