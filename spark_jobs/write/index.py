"""The write and the table's record index: the keys an insert_overwrite or a bulk_insert
must find nowhere else (``check_overwrite_keys``, ``check_new_keys``), and the changes
staged for the commit's instant before it completes (``stage_index_changes``)."""

from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from tidemark.clients.index import IndexClient
from tidemark.jobs.index_writes import (
    bucket_changes,
    check_new_keys,
    file_changes,
    new_files,
    replaced_changes,
    stage_changes,
)
from tidemark.jobs.sizing import WritePlan
from tidemark.table import HoodieTable
from tidemark.table.metadata.commit import WriteStat
from tidemark.table.records.keys import PARTITION_PATH, RECORD_KEY


def check_overwrite_keys(table: HoodieTable, keyed: DataFrame, client: IndexClient) -> None:
    """Before the lock (a refusal leaves the table as it was): an insert_overwrite's keys
    are not held outside the file groups of the partitions it replaces. ``begin.size``
    checks again under the lock, before any file is written, for a writer that came
    between."""
    partitions = {row[0] for row in keyed.select(PARTITION_PATH).distinct().collect()}
    latest = table.view().latest_base_files(partitions)
    replaced = {p: [f.file_id for f in latest if f.partition_path == p] for p in partitions}
    check_keys_new(table, keyed.select(sf.col(RECORD_KEY).alias("key")), replaced, client)


def check_keys_new(
    table: HoodieTable, keys: DataFrame, replaced: dict[str, list[str]], client: IndexClient
) -> None:
    """``keys`` are not in the table outside the ``replaced`` file groups (the index as of
    the last completed instant)."""
    last = table.timeline.last_completed()
    as_of = last.timestamp if last else None
    check_new_keys(client, keys, {f for ids in replaced.values() for f in ids}, as_of)


def stage_index_changes(
    spark: SparkSession,
    table: HoodieTable,
    instant: str,
    operation: str,
    stats: list[WriteStat],
    routed: tuple[DataFrame, WritePlan] | None,
    replaced: dict[str, list[str]],
    client: IndexClient,
) -> None:
    """Stage the commit's index changes (``spark_jobs.index_writes``) before it completes:
    from the routed rows, or the keys of a bulk_insert's new files; an insert_overwrite
    also removes the keys of the file groups it replaced. A bulk_insert first checks that
    its keys are new (the changes are kept for both passes; an insert_overwrite checked
    its keys before writing, in ``begin.size``). Nothing is staged when every row updated
    its key in place."""
    if (
        routed is not None
        and not replaced
        and not any(s.num_inserts or s.num_deletes for s in stats)
    ):
        return  # updates in place keep every entry: no Spark job for a batch of updates
    if routed is None:
        changes = file_changes(spark, table.uri, table.config, new_files(stats, instant))
    else:
        changes = bucket_changes(*routed)
    if replaced:
        gone = {(p, f) for p, ids in replaced.items() for f in ids}
        old = [f for f in table.view().latest_base_files() if (f.partition_path, f.file_id) in gone]
        changes = replaced_changes(spark, table.uri, table.config, old, changes)
    checking = operation == "bulk_insert"
    if checking:
        changes = changes.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        if checking:
            placed = changes.where(sf.col("file_id").isNotNull())
            check_keys_new(table, placed, {}, client)
        stage_changes(client, instant, changes, stats, operation == "delete")
    finally:
        changes.unpersist()
