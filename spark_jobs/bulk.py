"""bulk_insert: sort by partition and key fields, stream into new file groups.

No index lookup and no small-file handling: each task writes its sorted range into new
files, rolling over to a new file group once the current one reaches the target size.
The sort runs in the JVM on the source columns; keys are computed in the writing task, so
the rows cross into Python once.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql import DataFrame

from spark_jobs import faults
from spark_jobs.base_file import BaseFileWriter
from spark_jobs.context import WriteContext
from spark_jobs.keying import add_key_columns
from spark_jobs.stats import STAT_DDL, stats_batch
from spark_jobs.task import current_task, marker_writer, reserve_seqnos, storage_for
from tidemark.table.commit_metadata import WriteStat
from tidemark.table.keys import PARTITION_PATH
from tidemark.table.naming import new_file_id
from tidemark.table.properties import TableConfig

ROWS_PER_WRITE = 131_072
"""Rows buffered before handing them to Parquet (one row group each)."""


def bulk_insert(
    data: DataFrame,
    config: TableConfig,
    context: WriteContext,
    expected_bytes: int,
    target_file_bytes: int,
) -> DataFrame:
    """Write stats of the new files; one Spark task per sorted range of the input, as many
    as the cores but no more than the expected output needs files."""
    parallelism = data.sparkSession.sparkContext.defaultParallelism
    tasks = max(1, min(parallelism, math.ceil(expected_bytes / target_file_bytes)))
    order = [*config.partition_fields, *config.record_key_fields]
    ordered = data.repartitionByRange(tasks, *order).sortWithinPartitions(*order)

    def write_sorted(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        writer = _RollingWriter(context, target_file_bytes)
        try:
            for batch in batches:
                writer.add(pa.Table.from_batches([add_key_columns(batch, config)]))
            stats = writer.finish()
        except BaseException as error:
            writer.discard(error)
            raise
        if stats:
            yield stats_batch(stats)

    return ordered.mapInArrow(write_sorted, STAT_DDL)


class _RollingWriter:
    """Buffers sorted rows of one partition path; one file at a time, rolled by size."""

    def __init__(self, context: WriteContext, target_file_bytes: int) -> None:
        self._context = context
        self._target = target_file_bytes
        self._task = current_task()
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._partition: str | None = None
        self._writer: BaseFileWriter | None = None
        self._stats: list[WriteStat] = []

    def add(self, rows: pa.Table) -> None:
        partitions = rows.column(PARTITION_PATH).combine_chunks()
        changes = pc.not_equal(partitions[1:], partitions[:-1])
        boundaries = [0, *(i + 1 for i in pc.indices_nonzero(changes).to_pylist()), rows.num_rows]
        for start, end in itertools.pairwise(boundaries):
            run = rows.slice(start, end - start)
            partition = partitions[start].as_py()
            if partition != self._partition:
                self._flush()
                self._close_file()
                self._partition = partition
            self._pending.append(run)
            self._pending_rows += run.num_rows
            if self._pending_rows >= ROWS_PER_WRITE:
                self._flush()

    def finish(self) -> list[WriteStat]:
        self._flush()
        self._close_file()
        return self._stats

    def discard(self, error: BaseException) -> None:
        """A failed attempt publishes no partial file (its marker still names it)."""
        if self._writer is not None:
            self._writer.__exit__(type(error), error, error.__traceback__)
            self._writer = None

    def _flush(self) -> None:
        if not self._pending_rows or self._partition is None:
            return
        rows = pa.concat_tables(self._pending)
        self._pending, self._pending_rows = [], 0
        if self._writer is None:
            self._writer = BaseFileWriter(
                storage=storage_for(self._context.table_uri),
                markers=marker_writer(self._context.markers),
                task=self._task,
                instant=self._context.instant,
                partition_path=self._partition,
                file_id=new_file_id(),
                schema=self._context.file_schema,
            )
        self._writer.write_new(rows, reserve_seqnos(self._task, rows.num_rows))
        if self._writer.bytes_written >= self._target:
            self._close_file()

    def _close_file(self) -> None:
        if self._writer is None:
            return
        self._stats.append(self._writer.close())
        self._writer = None
        context = TaskContext.get()
        if context is not None:
            faults.fail_task_after_file_written(context)
