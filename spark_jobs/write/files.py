"""The write's files (``finish``): written by the executors and the index changes staged
without the table lock, fenced by the write's own lease, then the commit under it."""

from __future__ import annotations

from pyspark.sql import SparkSession

from tidemark import faults
from tidemark.errors import NotFoundError, TidemarkError, with_note
from tidemark.jobs.errors import run_spark_action
from tidemark.jobs.stages import StageClock
from tidemark.jobs.stats import stats_from_rows
from tidemark.jobs.write.begin import Begun
from tidemark.jobs.write.commit import commit
from tidemark.jobs.write.index import stage_index_changes
from tidemark.jobs.write.job import WriteJob
from tidemark.jobs.write.prepare import Prepared
from tidemark.jobs.write.result import (
    OPERATION_TYPES,
    WriteResult,
    already_committed,
    result_of,
)
from tidemark.jobs.write.undo import forget_lease_quietly
from tidemark.table import HoodieTable
from tidemark.table.leases.table_lock import holding
from tidemark.table.metadata.commit import CommitMetadata
from tidemark.table.writes import pending_clustering
from tidemark.table.writes.commit import IDEMPOTENCY_KEY


def finish(
    spark: SparkSession,
    table: HoodieTable,
    prepared: Prepared,
    operation: str,
    job: WriteJob,
    begun: Begun,
    clock: StageClock,
) -> WriteResult:
    """Write the files and stage the index changes without the table lock (the write's
    lease fences them), then commit under it."""
    instant = begun.context.instant
    key = job.options.idempotency_key
    with holding(begun.lease):
        try:
            try:
                with clock.stage("write files"):
                    stats = stats_from_rows(run_spark_action(begun.stats_df.collect))
                if job.index is not None:
                    with clock.stage("stage index changes"):
                        stage_index_changes(
                            spark,
                            table,
                            instant,
                            operation,
                            stats,
                            begun.routed,
                            begun.replaced,
                            job.index,
                        )
                faults.exit_if_requested("before_commit")
                faults.hold_if_requested("before_commit")
                metadata = CommitMetadata.from_write_stats(
                    stats,
                    OPERATION_TYPES[operation],
                    prepared.avro_schema,
                    begun.replaced,
                    extra_metadata={
                        **pending_clustering.encode_given_up(begun.given_up),
                        **({IDEMPOTENCY_KEY: key} if key is not None else {}),
                    },
                )
                with clock.stage("commit"):
                    committed = commit(spark, table, begun, metadata, job)
            finally:
                if begun.tagged is not None:
                    begun.tagged.unpersist()
        except TidemarkError as error:
            raise with_note(error, _outcome_of_failed_write(table, instant)) from error
    forget_lease_quietly(table, instant)
    if isinstance(committed.outcome, str):
        return already_committed(table, committed.outcome, operation, key, clock)
    job.memo.partitions.update(metadata.partition_to_write_stats)
    result = result_of(instant, operation, stats, begun.replaced, clock, table)
    result.files_reconciled = len(committed.outcome)
    result.tagging = job.tagging
    result.lock_wait_s = begun.lock_wait_s + committed.lock_wait_s
    return result


def _outcome_of_failed_write(table: HoodieTable, instant: str) -> str:
    """Whether the instant of a write that raised committed, read from the timeline."""
    try:
        table.timeline.reload()
        committed = table.timeline.find(instant).is_completed
    except NotFoundError:
        return f"instant {instant} was rolled back"
    except TidemarkError:
        return (
            f"whether instant {instant} committed is unknown (the timeline cannot be read); "
            "a retry with the same idempotency key is safe"
        )
    if committed:
        return f"instant {instant} is committed"
    return f"instant {instant} was not committed (the next write rolls it back)"
