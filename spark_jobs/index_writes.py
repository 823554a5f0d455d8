"""Writes and the record index: tagging keys through the index service, and staging each
commit's index changes before its completed instant is published.

A table has a record index once ``tidemark index build`` published it. Then every write
keeps it in step, whatever tags its keys (``--index record|simple``): after the files are
written, what changed — new and moved keys with their new file group, deleted keys as
tombstones — stays a Spark DataFrame (``CHANGES_DDL``), built from the routed rows or the
keys read back from the new files. The executors stage it: rows are grouped by their
index shard (Hudi's key-to-shard hash), each task holds whole shards and sends them,
sorted by shard, to the index service (``IndexClient.stage``) under the write's instant
in chunks of the client's batch size, so a commit writes about one delta file per shard.
The driver only receives counts, checks them against the write stats and then publishes,
so the index changes exactly when the commit completes. Carried and in-place updated
keys keep their entry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import structlog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import StringType, StructField, StructType

from tidemark.clients.index import IndexClient
from tidemark.errors import FailedPreconditionError
from tidemark.index.sharding import shard_of
from tidemark.index.wire import CHANGES, CHANGES_DDL
from tidemark.jobs.buckets import BUCKET, INDEX_CHANGE, IS_DELETE
from tidemark.jobs.errors import run_spark_action
from tidemark.jobs.sizing import WritePlan
from tidemark.jobs.tagging import OLD_FILE_ID, OLD_PARTITION, existing_keys
from tidemark.table import HoodieTable
from tidemark.table.files.view import BaseFile
from tidemark.table.metadata.actions import WRITE_ACTIONS
from tidemark.table.metadata.commit import WriteStat
from tidemark.table.properties.config import TableConfig
from tidemark.table.records.avro_names import INTERNAL_COLUMN_PREFIX
from tidemark.table.records.keys import RECORD_KEY

log = structlog.get_logger(__name__)

TAGGINGS = ("record", "simple")
_SHARD = f"{INTERNAL_COLUMN_PREFIX}shard"
_COUNTS_DDL = "placed long, removed long, staged long"


def choose_tagging(
    requested: str | None, has_index: bool, building: Callable[[], bool] = lambda: False
) -> str:
    """``record`` by default once the table has a record index, ``simple`` otherwise; a
    write asking for ``record`` while the index is being built (``building()``) tags by
    join instead: the build catches up with it before publishing."""
    if requested == "record" and not has_index and building():
        log.warning(
            "write.index_being_built",
            note="the record index is being built: this write tags its keys by join",
        )
        return "simple"
    if requested == "record" and not has_index:
        raise FailedPreconditionError(
            "the table has no record index (build one with `tidemark index build`)",
            field="index",
        )
    return requested or ("record" if has_index else "simple")


def tag_with_index(keyed: DataFrame, client: IndexClient, as_of: str | None) -> DataFrame:
    """``keyed`` plus each key's file group as the record index knows it (the columns
    ``tagging.tag`` adds), looked up by the executors up to the client's batch size of
    keys per call."""
    schema = StructType(
        [
            *keyed.schema.fields,
            StructField(OLD_PARTITION, StringType()),
            StructField(OLD_FILE_ID, StringType()),
        ]
    )

    def lookup(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for rows in _gathered(batches, client.batch_keys):
            located = client.lookup(rows.column(RECORD_KEY), as_of)
            tagged = rows.append_column(OLD_PARTITION, located["partition"]).append_column(
                OLD_FILE_ID, located["file_id"]
            )
            yield from tagged.to_batches()

    return keyed.mapInArrow(lookup, schema)


GATHER_MAX_BYTES = 64 << 20
"""At most this much of a task's rows waits for one service call (wide rows gather fewer)."""


def _gathered(batches: Iterator[pa.RecordBatch], keys: int) -> Iterator[pa.Table]:
    """Spark's Arrow batches (10k rows by default) gathered into tables of ``keys`` rows
    (fewer at the end, or once ``GATHER_MAX_BYTES`` wait): the service answers a 100k-key
    call about three times faster per key, and a stage call of rows sorted by shard
    writes one delta file per shard it holds."""
    pending: list[pa.RecordBatch] = []
    rows = size = 0
    for batch in batches:
        pending.append(batch)
        rows, size = rows + batch.num_rows, size + batch.nbytes
        if rows >= keys or size >= GATHER_MAX_BYTES:
            gathered = pa.Table.from_batches(pending)
            done = rows if size >= GATHER_MAX_BYTES else rows - rows % keys
            for start in range(0, done, keys):
                yield gathered.slice(start, min(keys, done - start))
            rest = gathered.slice(done)
            pending, rows, size = rest.to_batches(), rest.num_rows, rest.nbytes
    if rows:
        yield pa.Table.from_batches(pending)


def bucket_changes(routed: DataFrame, plan: WritePlan) -> DataFrame:
    """The index changes of routed rows: each new or moved key to its bucket's file group,
    each key a delete removes as a tombstone."""
    partitions = pa.array([b.partition_path for b in plan.buckets], pa.string())
    file_ids = pa.array([b.file_id for b in plan.buckets], pa.string())
    none = pa.scalar(None, pa.string())

    def locate(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            buckets, deleted = batch.column(BUCKET), batch.column(IS_DELETE)
            yield pa.RecordBatch.from_arrays(
                [
                    batch.column(RECORD_KEY),
                    pc.if_else(deleted, none, partitions.take(buckets)),
                    pc.if_else(deleted, none, file_ids.take(buckets)),
                ],
                schema=CHANGES,
            )

    rows = routed.where(sf.col(INDEX_CHANGE)).select(RECORD_KEY, BUCKET, IS_DELETE)
    return rows.mapInArrow(locate, CHANGES_DDL)


def file_changes(
    spark: SparkSession, table_uri: str, config: TableConfig, files: Sequence[BaseFile]
) -> DataFrame:
    """Every key of ``files`` at its file group (the new files of a bulk_insert or of a
    clustering run)."""
    return existing_keys(spark, table_uri, config, files).select(
        sf.col(RECORD_KEY).alias("key"),
        sf.col(OLD_PARTITION).alias("partition"),
        sf.col(OLD_FILE_ID).alias("file_id"),
    )


def replaced_changes(
    spark: SparkSession,
    table_uri: str,
    config: TableConfig,
    replaced: Sequence[BaseFile],
    written: DataFrame,
) -> DataFrame:
    """``written`` plus tombstones for the keys of file groups an insert_overwrite replaced
    that it did not write again."""
    if not replaced:
        return written
    gone = existing_keys(spark, table_uri, config, replaced).select(sf.col(RECORD_KEY).alias("key"))
    tombstones = gone.join(written.select("key"), on="key", how="left_anti").select(
        "key",
        sf.lit(None).cast("string").alias("partition"),
        sf.lit(None).cast("string").alias("file_id"),
    )
    return written.unionByName(tombstones)


def check_new_keys(
    client: IndexClient, keys: DataFrame, replaced: set[str], as_of: str | None
) -> None:
    """The keys (column ``key``) a bulk_insert or insert_overwrite places must not be in the
    table already, except in the file groups an insert_overwrite replaces: the index would
    point at the new copy and the old one would stay. Each task looks its keys up and
    reports its first such key; FailedPreconditionError naming one."""
    replaced_ids = pa.array(sorted(replaced), pa.string())

    def first_held(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for chunk in _gathered(batches, client.batch_keys):
            located = client.lookup(chunk.column("key"), as_of)
            file_ids = located.column("file_id")
            held = pc.and_(pc.is_valid(file_ids), pc.invert(pc.is_in(file_ids, replaced_ids)))
            if pc.any(held).as_py():
                first = located.filter(held).select(CHANGES.names).slice(0, 1)
                yield pa.RecordBatch.from_pylist(first.to_pylist(), schema=CHANGES)
                return

    held = run_spark_action(keys.select("key").mapInArrow(first_held, CHANGES_DDL).collect)
    if held:
        first = held[0]
        raise FailedPreconditionError(
            f"key {first['key']!r} is already in the table (file group {first['file_id']} of "
            f"partition {first['partition']!r}); with a record index, bulk_insert and "
            "insert_overwrite only add new keys: use upsert or insert",
            field="key",
        )


def new_files(stats: Sequence[WriteStat], instant: str) -> list[BaseFile]:
    """The files a write created, as base files of ``instant``."""
    return [
        BaseFile(s.partition_path, s.file_id, instant, s.path, s.file_size_in_bytes) for s in stats
    ]


def files_written_after(table: HoodieTable, after: str) -> list[BaseFile]:
    """The base files created by the writes that completed after instant ``after`` (by
    completion time on table versions 8 and 9), as their write stats name them (the
    timeline as last loaded)."""
    return [
        file
        for instant in table.timeline.completed(WRITE_ACTIONS)
        if instant.completed_at > after
        for file in new_files(table.timeline.read_metadata(instant).write_stats, instant.timestamp)
    ]


@dataclass(frozen=True)
class StagedCounts:
    """What the tasks staged: new locations, tombstones, and changes the service took."""

    placed: int
    removed: int
    staged: int


def stage(client: IndexClient, instant: str, changes: DataFrame) -> StagedCounts:
    """Stage ``changes`` for ``instant`` from the executors: rows grouped by index shard
    (at most one task per shard or per core), each task sending its rows sorted by shard
    and key in chunks of the client's batch size, so about one delta file per shard is
    written (a retried task sends the same chunks: the service rewrites the same files)."""
    shards = client.status().shards
    spark = changes.sparkSession
    tasks = max(1, min(shards, spark.sparkContext.defaultParallelism))

    def with_shard(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            shard = pa.array(shard_of(batch.column("key"), shards).astype(np.int32))
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, shard], names=[*batch.schema.names, _SHARD]
            )

    def stage_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        placed = removed = staged = 0
        for chunk in _gathered(batches, client.batch_keys):
            removed += chunk.column("file_id").null_count
            placed += chunk.num_rows - chunk.column("file_id").null_count
            staged += client.stage(instant, chunk.select(CHANGES.names))
        yield pa.RecordBatch.from_pydict(
            {"placed": [placed], "removed": [removed], "staged": [staged]}
        )

    by_shard = (
        changes.select(*CHANGES.names)
        .mapInArrow(with_shard, f"{CHANGES_DDL}, {_SHARD} int")
        .repartition(tasks, _SHARD)
        .sortWithinPartitions(_SHARD, "key")
    )
    counts = run_spark_action(by_shard.mapInArrow(stage_task, _COUNTS_DDL).collect)
    return StagedCounts(  # no row at all when there was nothing to stage
        *(sum(row[name] for row in counts) for name in ("placed", "removed", "staged"))
    )


def stage_changes(
    client: IndexClient,
    instant: str,
    changes: DataFrame,
    stats: Sequence[WriteStat],
    deleting: bool,
) -> int:
    """Stage ``changes`` for ``instant`` (``stage``) and check them against the write
    stats: as many new locations as inserted rows, as many tombstones as deleted rows for
    a delete. On a mismatch the write fails before its commit, so its staged deltas never
    show and its rollback discards them."""
    counts = stage(client, instant, changes)
    inserted = sum(stat.num_inserts for stat in stats)
    checks = [("new locations", counts.placed, inserted)]
    if deleting:
        checks.append(("tombstones", counts.removed, sum(stat.num_deletes for stat in stats)))
    for what, staged, written in checks:
        if staged != written:
            raise FailedPreconditionError(
                f"the index changes hold {staged} {what} but the files hold {written}: the "
                f"record index disagrees with the table, instant {instant} is not committed "
                "(rebuild the index with `tidemark index build --rebuild`)",
                field="index",
            )
    total = counts.placed + counts.removed
    if counts.staged != total:
        raise FailedPreconditionError(
            f"the index service staged {counts.staged} of {total} changes", field="index"
        )
    return counts.staged
