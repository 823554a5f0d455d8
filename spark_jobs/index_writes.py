"""Writes and the record index: tagging keys through the index service, and staging each
commit's index changes before its completed instant is published.

A table has a record index once ``tidemark index build`` published it. Then every write
keeps it in step, whatever tags its keys (``--index record|simple``): after the files are
written the driver collects what changed — new and moved keys with their new file group,
deleted keys as tombstones — checks the count against the write stats and stages it with
the index service (``IndexClient.stage``) under the write's instant, so the index changes
exactly when the commit completes. Carried and in-place updated keys keep their entry.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import StringType, StructField, StructType

from spark_jobs.buckets import BUCKET, INDEX_CHANGE, IS_DELETE
from spark_jobs.sizing import WritePlan
from spark_jobs.tagging import OLD_FILE_ID, OLD_PARTITION, existing_keys
from tidemark.clients.index import IndexClient
from tidemark.errors import FailedPreconditionError, InvalidArgumentError
from tidemark.table.commit_metadata import WriteStat
from tidemark.table.fsview import BaseFile
from tidemark.table.keys import RECORD_KEY
from tidemark.table.properties import TableConfig

TAGGINGS = ("record", "simple")
UNTAGGED_OPERATIONS = ("bulk_insert", "insert_overwrite")
"""Operations that never look keys up: on an indexed table their keys must be new."""
CHANGES = pa.schema([("key", pa.string()), ("partition", pa.string()), ("file_id", pa.string())])
"""What ``IndexClient.stage`` takes: a null partition and file id delete the key."""


def choose_tagging(requested: str | None, has_index: bool) -> str:
    """``record`` by default once the table has a record index, ``simple`` otherwise."""
    if requested is not None and requested not in TAGGINGS:
        raise InvalidArgumentError(
            f"unknown index {requested!r} (use {' or '.join(TAGGINGS)})", field="index"
        )
    if requested == "record" and not has_index:
        raise FailedPreconditionError(
            "the table has no record index (build one with `tidemark index build`)",
            field="index",
        )
    return requested or ("record" if has_index else "simple")


def tag_with_index(keyed: DataFrame, client: IndexClient, as_of: str | None) -> DataFrame:
    """``keyed`` plus each key's file group as the record index knows it (the columns
    ``tagging.tag`` adds), looked up by the executors one Arrow batch per call."""
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
"""At most this much of a task's rows waits for one lookup call (wide rows gather fewer)."""


def _gathered(batches: Iterator[pa.RecordBatch], keys: int) -> Iterator[pa.Table]:
    """Spark's Arrow batches (10k rows by default) gathered into tables of about ``keys``
    rows: the service answers a 100k-key call about three times faster per key."""
    pending: list[pa.RecordBatch] = []
    rows = size = 0
    for batch in batches:
        pending.append(batch)
        rows, size = rows + batch.num_rows, size + batch.nbytes
        if rows >= keys or size >= GATHER_MAX_BYTES:
            yield pa.Table.from_batches(pending)
            pending, rows, size = [], 0, 0
    if pending:
        yield pa.Table.from_batches(pending)


def bucket_changes(routed: DataFrame, plan: WritePlan) -> pa.Table:
    """The index changes of routed rows: each new or moved key to its bucket's file group,
    each key a delete removes as a tombstone."""
    rows = routed.where(sf.col(INDEX_CHANGE)).select(RECORD_KEY, BUCKET, IS_DELETE).toArrow()
    buckets = rows.column(BUCKET).to_numpy()
    deleted = rows.column(IS_DELETE).to_numpy(zero_copy_only=False)
    partitions = np.array([b.partition_path for b in plan.buckets], dtype=object)
    file_ids = np.array([b.file_id for b in plan.buckets], dtype=object)
    return pa.table(
        [
            rows.column(RECORD_KEY),
            pa.array(partitions[buckets], pa.string(), mask=deleted),
            pa.array(file_ids[buckets], pa.string(), mask=deleted),
        ],
        schema=CHANGES,
    )


def file_changes(
    spark: SparkSession, table_uri: str, config: TableConfig, files: Sequence[BaseFile]
) -> pa.Table:
    """Every key of ``files`` at its file group (the new files of a bulk_insert)."""
    if not files:
        return CHANGES.empty_table()
    located = existing_keys(spark, table_uri, config, files).toArrow()
    return pa.table(
        [located.column(RECORD_KEY), located.column(OLD_PARTITION), located.column(OLD_FILE_ID)],
        schema=CHANGES,
    )


def replaced_changes(
    spark: SparkSession,
    table_uri: str,
    config: TableConfig,
    replaced: Sequence[BaseFile],
    written: pa.Table,
) -> pa.Table:
    """Tombstones for the keys of file groups an insert_overwrite replaced that it did not
    write again, after the changes ``written``."""
    if not replaced:
        return written
    gone = existing_keys(spark, table_uri, config, replaced).toArrow().column(RECORD_KEY)
    gone = gone.filter(pc.invert(pc.is_in(gone, value_set=written.column("key"))))
    tombstones = pa.table(
        [gone, pa.nulls(len(gone), pa.string()), pa.nulls(len(gone), pa.string())],
        schema=CHANGES,
    )
    return pa.concat_tables([written, tombstones])


def check_new_keys(
    client: IndexClient, changes: pa.Table, replaced: set[str], as_of: str | None
) -> None:
    """The keys a bulk_insert or insert_overwrite placed must not be in the table already,
    except in the file groups an insert_overwrite replaced: the index would point at the
    new copy and the old one would stay. FailedPreconditionError naming one such key."""
    placed = changes.filter(pc.is_valid(changes.column("file_id"))).column("key")
    located = client.lookup(placed.combine_chunks(), as_of)
    file_ids = located.column("file_id")
    held = pc.and_(
        pc.is_valid(file_ids),
        pc.invert(pc.is_in(file_ids, pa.array(sorted(replaced), pa.string()))),
    )
    if pc.any(held).as_py():
        first = located.filter(held).slice(0, 1).to_pylist()[0]
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


def stage_changes(
    client: IndexClient,
    instant: str,
    changes: pa.Table,
    stats: Sequence[WriteStat],
    deleting: bool,
) -> int:
    """Stage ``changes`` for ``instant`` once they agree with the write stats: as many new
    locations as inserted rows, as many tombstones as deleted rows for a delete."""
    placed = len(changes) - changes.column("file_id").null_count
    removed = changes.column("file_id").null_count
    inserted = sum(stat.num_inserts for stat in stats)
    checks = [("new locations", placed, inserted)]
    if deleting:
        checks.append(("tombstones", removed, sum(stat.num_deletes for stat in stats)))
    for what, staged, written in checks:
        if staged != written:
            raise FailedPreconditionError(
                f"the index changes hold {staged} {what} but the files hold {written}: the "
                f"record index disagrees with the table, instant {instant} is not committed "
                "(rebuild the index with `tidemark index build --rebuild`)",
                field="index",
            )
    staged = client.stage(instant, changes) if len(changes) else 0
    if staged != len(changes):
        raise FailedPreconditionError(
            f"the index service staged {staged} of {len(changes)} changes", field="index"
        )
    return staged
