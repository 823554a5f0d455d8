"""insert / upsert / delete / insert_overwrite: route records to planned file groups and
write each group once (a new file group, or a new version merging the previous one; on a
merge-on-read table a log file appended to it).

Routing is column-wise (numpy/Arrow on each batch): an update goes to the bucket of the file
group that holds its key, an insert to a bucket of its partition chosen by the hash of its
key, weighted by the plan's shares; a record whose partition changed is inserted in the new
partition and deleted from its old file group.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql import DataFrame
from pyspark.sql import functions as sf
from pyspark.sql.types import BooleanType, IntegerType, StructField, StructType

from tidemark import faults
from tidemark.jobs.base_file import BaseFileWriter
from tidemark.jobs.context import WriteContext
from tidemark.jobs.log_file import SliceAppend, append_to_slices
from tidemark.jobs.shuffles import SHUFFLE_PARTITIONS
from tidemark.jobs.sizing import Bucket, WritePlan
from tidemark.jobs.stats import STAT_DDL, stats_batch
from tidemark.jobs.tagging import OLD_FILE_ID, OLD_PARTITION
from tidemark.jobs.task import (
    TaskIdentity,
    current_task,
    marker_writer,
    reserve_seqnos,
    storage_for,
)
from tidemark.storage import Storage
from tidemark.table.metadata.commit import WriteStat
from tidemark.table.records.avro_names import INTERNAL_COLUMN_PREFIX
from tidemark.table.records.keys import IS_DELETED, PARTITION_PATH, RECORD_KEY, stored_record_keys
from tidemark.table.records.ordering import newer_than_stored
from tidemark.table.records.schema import conform

BUCKET = f"{INTERNAL_COLUMN_PREFIX}bucket"
IS_DELETE = f"{INTERNAL_COLUMN_PREFIX}delete"
INDEX_CHANGE = f"{INTERNAL_COLUMN_PREFIX}index_change"
"""Whether the row changes its key's index entry: an insert, a move's insert, a delete."""
_HASH = f"{INTERNAL_COLUMN_PREFIX}hash"
_HASH_RANGE = 1 << 31


def route(tagged: DataFrame, plan: WritePlan, *, deleting: bool) -> DataFrame:
    """Rows of the file columns plus their bucket, whether they delete their key and
    whether they change its index entry (``INDEX_CHANGE``).

    ``tagged`` has the old location columns (null for new keys). With ``deleting`` every
    known key becomes a delete and unknown keys are dropped; so do rows whose Hudi delete
    flag (``_hoodie_is_deleted``) is true.
    """
    hashed = tagged.withColumn(_HASH, sf.pmod(sf.xxhash64(RECORD_KEY), sf.lit(_HASH_RANGE)))
    fields = [f for f in tagged.schema.fields if f.name not in (OLD_PARTITION, OLD_FILE_ID)]
    schema = StructType(
        [
            *fields,
            StructField(BUCKET, IntegerType(), False),
            StructField(IS_DELETE, BooleanType()),
            StructField(INDEX_CHANGE, BooleanType()),
        ]
    )
    names = [f.name for f in fields]
    file_ids = pa.array(list(plan.bucket_of_file), type=pa.string())
    file_buckets = np.array(list(plan.bucket_of_file.values()), dtype=np.int32)

    def assign(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = pa.Table.from_batches([batch])
            old_file = rows.column(OLD_FILE_ID).combine_chunks()
            known = pc.is_valid(old_file).to_numpy(zero_copy_only=False)
            old_bucket = np.full(rows.num_rows, -1, dtype=np.int32)
            if known.any():
                positions = pc.index_in(old_file, value_set=file_ids).to_numpy(zero_copy_only=False)
                old_bucket[known] = file_buckets[positions[known].astype(np.int64)]
            flagged = _flagged_deleted(rows) | deleting
            gone = known & flagged
            if gone.any():
                yield _with_bucket(rows.filter(pa.array(gone)), names, old_bucket[gone], True, True)
            moved = known & _partition_changed(rows) & ~flagged
            inserts = (~known | moved) & ~flagged
            known &= ~flagged
            yield _with_bucket(
                rows.filter(pa.array(known & ~moved)),
                names,
                old_bucket[known & ~moved],
                False,
                False,
            )
            if moved.any():
                yield _with_bucket(
                    rows.filter(pa.array(moved)), names, old_bucket[moved], True, False
                )
            if inserts.any():
                new_rows = rows.filter(pa.array(inserts))
                yield _with_bucket(new_rows, names, _insert_buckets(new_rows, plan), False, True)

    return hashed.mapInArrow(assign, schema)


def _flagged_deleted(rows: pa.Table) -> np.ndarray:
    if IS_DELETED not in rows.column_names:
        return np.zeros(rows.num_rows, dtype=bool)
    return pc.fill_null(rows.column(IS_DELETED), False).to_numpy(zero_copy_only=False)


def _partition_changed(rows: pa.Table) -> np.ndarray:
    changed = pc.not_equal(rows.column(PARTITION_PATH), rows.column(OLD_PARTITION))
    return pc.fill_null(changed, False).to_numpy(zero_copy_only=False)


def _insert_buckets(rows: pa.Table, plan: WritePlan) -> np.ndarray:
    partitions = rows.column(PARTITION_PATH).combine_chunks()
    fractions = rows.column(_HASH).to_numpy() / _HASH_RANGE
    buckets = np.empty(rows.num_rows, dtype=np.int32)
    for partition in pc.unique(partitions).to_pylist():
        mask = pc.equal(partitions, partition).to_numpy(zero_copy_only=False)
        shares = plan.inserts[partition]
        index = np.searchsorted(np.array(shares.cumulative), fractions[mask], side="right")
        index = np.minimum(index, len(shares.bucket_ids) - 1)
        buckets[mask] = np.array(shares.bucket_ids, dtype=np.int32)[index]
    return buckets


def _with_bucket(
    rows: pa.Table, names: list[str], buckets: np.ndarray, is_delete: bool, index_change: bool
) -> pa.RecordBatch:
    selected = rows.select(names).combine_chunks()
    columns = [*selected.columns, pa.array(buckets, type=pa.int32())]
    columns.append(pa.repeat(pa.scalar(is_delete), rows.num_rows))
    columns.append(pa.repeat(pa.scalar(index_change), rows.num_rows))
    table = pa.Table.from_arrays(columns, names=[*names, BUCKET, IS_DELETE, INDEX_CHANGE])
    return table.to_batches()[0] if table.num_rows else pa.RecordBatch.from_pylist([], table.schema)


LOG_BUFFER_BYTES = 64 * 1024 * 1024
"""Rows of log-file groups a task holds before appending them (their markers in one call)."""


def write_buckets(routed: DataFrame, plan: WritePlan, context: WriteContext) -> DataFrame:
    """Write stats, one per bucket that received rows: a new base file, or on a
    merge-on-read table a log file for a bucket of an existing file group.

    Each task gets whole buckets, one after the other (shuffled and sorted by bucket). A
    base file is written as soon as its bucket's rows are all there; log files are
    appended a batch at a time (``LOG_BUFFER_BYTES``, or the task's end), so that one
    marker call covers the batch's log files. The tasks are the write's shuffle
    partitions, at most one a bucket that writes a base file, a number adaptive execution
    keeps: it coalesces a shuffle by its bytes, which put a small batch's 40 rewritten file
    groups in one task on one core, where such a task's cost is the base files it
    rewrites, not the rows shuffled to it. Log appends cost their few rows: one task
    appends them all, with one marker call."""

    def write_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task = current_task()
        storage = storage_for(context.table_uri)
        appends: list[SliceAppend] = []
        buffered = 0
        for bucket_id, group in bucket_groups(batches):
            bucket = plan.buckets[bucket_id]
            deleting = group.column(IS_DELETE).combine_chunks()
            incoming = conform(group.filter(pc.invert(deleting)), context.file_schema)
            deleted_keys = group.filter(deleting).column(RECORD_KEY).combine_chunks()
            if context.config.merge_on_read and bucket.base is not None:
                seq_start = reserve_seqnos(task, incoming.num_rows)
                appends.append(SliceAppend(bucket.base, incoming, deleted_keys, seq_start))
                buffered += group.nbytes
                if buffered >= LOG_BUFFER_BYTES:
                    yield _appended(storage, task, context, appends)
                    appends, buffered = [], 0
            else:
                stat = _write_base_file(storage, task, context, bucket, incoming, deleted_keys)
                yield _written([stat])
        if appends:
            yield _appended(storage, task, context, appends)

    shuffle_partitions = int(routed.sparkSession.conf.get(SHUFFLE_PARTITIONS) or 1)
    appends = context.config.merge_on_read
    base_files = sum(1 for b in plan.buckets if not (appends and b.base is not None))
    tasks = max(1, min(shuffle_partitions, base_files))
    ordered = routed.repartition(tasks, BUCKET).sortWithinPartitions(BUCKET)
    return ordered.mapInArrow(write_task, STAT_DDL)


def bucket_groups(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[int, pa.Table]]:
    """The rows of a task's input sorted by bucket, one bucket at a time."""
    pending: list[pa.Table] = []
    for batch in batches:
        if not batch.num_rows:
            continue
        rows = pa.Table.from_batches([batch])
        buckets = rows.column(BUCKET).to_numpy()
        bounds = [0, *(np.flatnonzero(np.diff(buckets)) + 1).tolist(), len(buckets)]
        for start, end in itertools.pairwise(bounds):
            if pending and _bucket_of(pending[0]) != buckets[start]:
                yield _bucket_of(pending[0]), pa.concat_tables(pending)
                pending = []
            pending.append(rows.slice(start, end - start))
    if pending:
        yield _bucket_of(pending[0]), pa.concat_tables(pending)


def _bucket_of(rows: pa.Table) -> int:
    return int(rows.column(BUCKET)[0].as_py())


def _appended(
    storage: Storage, task: TaskIdentity, context: WriteContext, appends: list[SliceAppend]
) -> pa.RecordBatch:
    markers = marker_writer(context.markers)
    return _written(
        append_to_slices(
            storage=storage, markers=markers, task=task, context=context, appends=appends
        )
    )


def _written(stats: list[WriteStat]) -> pa.RecordBatch:
    """The stats of files just written; a fault test may fail the task here."""
    task_context = TaskContext.get()
    if task_context is not None:
        faults.fail_task_after_file_written(task_context)
    return stats_batch(stats)


def _write_base_file(
    storage: Storage,
    task: TaskIdentity,
    context: WriteContext,
    bucket: Bucket,
    incoming: pa.Table,
    deleted_keys: pa.Array,
) -> WriteStat:
    """A new file group, or the next version of ``bucket.base``: its rows merged with
    ``incoming`` (the greater ordering value kept on a table ordered by event time) less
    ``deleted_keys``."""
    carried = incoming.slice(0, 0)
    updates = deletes = 0
    if bucket.base is not None:
        with storage.open_input(bucket.base.path) as stream:
            old = pq.read_table(stream)
        old_keys = stored_record_keys(old, context.config)
        if context.config.orders_by_event_time:
            incoming = newer_than_stored(incoming, old, old_keys, context.config)
        updated = pc.is_in(old_keys, value_set=incoming.column(RECORD_KEY).combine_chunks())
        removed = pc.is_in(old_keys, value_set=deleted_keys)
        updates = pc.sum(updated).as_py() or 0
        deletes = pc.sum(removed).as_py() or 0
        carried = old.filter(pc.invert(pc.or_(updated, removed)))
    with BaseFileWriter(
        storage=storage,
        markers=marker_writer(context.markers),
        task=task,
        instant=context.instant,
        action=context.action,
        partition_path=bucket.partition_path,
        file_id=bucket.file_id,
        schema=context.file_schema,
        prev_commit=bucket.prev_commit,
        populate_meta_fields=context.config.populate_meta_fields,
    ) as writer:
        writer.write_carried(carried)
        writer.write_new(incoming, reserve_seqnos(task, incoming.num_rows))
        return writer.close(num_updates=updates, num_deletes=deletes)
