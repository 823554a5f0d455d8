"""bulk_insert: stream the input into new file groups, with Hudi's three sort modes.

No index lookup and no small-file handling. ``none`` (Hudi's default since 0.13) writes
each input partition as it comes, one open file per partition path, like
``DataFrame.write.parquet``; ``partition_sort`` sorts each input partition by partition
and key fields first; ``global_sort`` range-partitions and sorts the whole input, giving
the fewest files with the tightest key ranges (best for later key pruning). Files roll
over to a new file group once they reach the target size. Keys are computed in the
writing task, so the rows cross into Python once.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql import DataFrame

from tidemark import faults
from tidemark.jobs.base_file import BaseFileWriter
from tidemark.jobs.context import WriteContext
from tidemark.jobs.keying import add_key_columns
from tidemark.jobs.stats import STAT_DDL, stats_batch
from tidemark.jobs.task import (
    TaskIdentity,
    current_task,
    marker_writer,
    reserve_seqnos,
    storage_for,
)
from tidemark.table.files.file_names import new_file_id
from tidemark.table.metadata.commit import WriteStat
from tidemark.table.properties.config import TableConfig
from tidemark.table.records.keys import PARTITION_PATH

SORT_MODES = ("none", "partition_sort", "global_sort")
DEFAULT_SORT_MODE = "none"
ROWS_PER_WRITE = 131_072
"""Rows buffered per partition path before handing them to Parquet (one row group each)."""
MAX_BUFFERED_ROWS = 4 * ROWS_PER_WRITE
"""Rows buffered over all partition paths of a task; past it every buffer is written."""


def bulk_insert(
    data: DataFrame,
    config: TableConfig,
    context: WriteContext,
    expected_bytes: int,
    target_file_bytes: int,
    sort_mode: str = DEFAULT_SORT_MODE,
) -> DataFrame:
    """Write stats of the new files, one Arrow row per file (``sort_mode`` checked by
    the caller)."""
    order = [*config.partition_fields, *config.record_key_fields]
    if sort_mode == "global_sort":
        parallelism = data.sparkSession.sparkContext.defaultParallelism
        tasks = max(1, min(parallelism, math.ceil(expected_bytes / target_file_bytes)))
        data = data.repartitionByRange(tasks, *order).sortWithinPartitions(*order)
    elif sort_mode == "partition_sort":
        data = data.sortWithinPartitions(*order)
    sorted_input = sort_mode != "none"

    def write_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        writer = _TaskWriter(context, target_file_bytes, sorted_input)
        try:
            for batch in batches:
                writer.add(pa.Table.from_batches([add_key_columns(batch, config)]))
            stats = writer.finish()
        except BaseException as error:
            writer.discard(error)
            raise
        if stats:
            yield stats_batch(stats)

    return data.mapInArrow(write_task, STAT_DDL)


def split_by_partition(rows: pa.Table) -> Iterator[tuple[str, pa.Table]]:
    """The rows of each partition path, in first-seen order, each keeping input order."""
    encoded = rows.column(PARTITION_PATH).combine_chunks().dictionary_encode()
    if len(encoded.dictionary) == 1:
        yield encoded.dictionary[0].as_py(), rows
        return
    order = pc.sort_indices(encoded.indices)
    grouped = rows.take(order)
    codes = encoded.indices.take(order)
    changes = pc.not_equal(codes[1:], codes[:-1])
    boundaries = [0, *(i + 1 for i in pc.indices_nonzero(changes).to_pylist()), rows.num_rows]
    for start, end in itertools.pairwise(boundaries):
        yield encoded.dictionary[codes[start].as_py()].as_py(), grouped.slice(start, end - start)


class _TaskWriter:
    """One rolling file per partition path seen by the task.

    With sorted input a partition path never comes back, so its file is closed as soon as
    the next one starts: one open file at a time.
    """

    def __init__(self, context: WriteContext, target_file_bytes: int, sorted_input: bool) -> None:
        self._context = context
        self._target = target_file_bytes
        self._sorted_input = sorted_input
        self._task = current_task()
        self._files: dict[str, _RollingFile] = {}
        self._stats: list[WriteStat] = []

    def add(self, rows: pa.Table) -> None:
        for partition, run in split_by_partition(rows):
            rolling = self._files.get(partition)
            if rolling is None:
                if self._sorted_input:
                    self._close_all()
                rolling = _RollingFile(self._context, self._task, partition, self._target)
                self._files[partition] = rolling
            self._stats.extend(rolling.add(run))
        if sum(f.buffered_rows for f in self._files.values()) > MAX_BUFFERED_ROWS:
            for rolling in self._files.values():
                self._stats.extend(rolling.flush())

    def finish(self) -> list[WriteStat]:
        self._close_all()
        return self._stats

    def discard(self, error: BaseException) -> None:
        """A failed attempt publishes no partial file (its marker still names it)."""
        for rolling in self._files.values():
            rolling.discard(error)
        self._files.clear()

    def _close_all(self) -> None:
        for rolling in self._files.values():
            self._stats.extend(rolling.close())
        self._files.clear()


class _RollingFile:
    """Buffered rows of one partition path, written to one file group at a time."""

    def __init__(
        self, context: WriteContext, task: TaskIdentity, partition: str, target_file_bytes: int
    ) -> None:
        self._context = context
        self._task = task
        self._partition = partition
        self._target = target_file_bytes
        self._pending: list[pa.Table] = []
        self.buffered_rows = 0
        self._writer: BaseFileWriter | None = None
        self._rows_in_file = 0
        self._bytes_per_row: float | None = None

    def add(self, rows: pa.Table) -> list[WriteStat]:
        self._pending.append(rows)
        self.buffered_rows += rows.num_rows
        return self.flush() if self.buffered_rows >= ROWS_PER_WRITE else []

    def flush(self) -> list[WriteStat]:
        """Write the buffer, rolling over to a new file group whenever one reaches the
        target; the stats of the files it filled up."""
        if not self.buffered_rows:
            return []
        rows = pa.concat_tables(self._pending)
        self._pending, self.buffered_rows = [], 0
        per_row = self._bytes_per_row or max(1.0, rows.nbytes / rows.num_rows)
        stats: list[WriteStat] = []
        while rows.num_rows:
            writer = self._open_file()
            room = math.ceil((self._target - writer.bytes_written) / per_row)
            taken = rows.slice(0, min(rows.num_rows, max(1, room)))
            writer.write_new(taken, reserve_seqnos(self._task, taken.num_rows))
            rows = rows.slice(taken.num_rows)
            self._rows_in_file += taken.num_rows
            per_row = self._bytes_per_row = writer.bytes_written / self._rows_in_file
            if writer.bytes_written + per_row > self._target:
                stats.extend(self._close_file())
        return stats

    def _open_file(self) -> BaseFileWriter:
        """The file being filled, or a new file group's (rows go to Parquet as they come:
        a row group per write, sized so that a small target makes small files; the first
        write's size guess is the rows' Arrow size, larger than their Parquet size)."""
        if self._writer is None:
            self._writer = BaseFileWriter(
                storage=storage_for(self._context.table_uri),
                markers=marker_writer(self._context.markers),
                task=self._task,
                instant=self._context.instant,
                action=self._context.action,
                partition_path=self._partition,
                file_id=new_file_id(),
                schema=self._context.file_schema,
                populate_meta_fields=self._context.config.populate_meta_fields,
            )
            self._rows_in_file = 0
        return self._writer

    def close(self) -> list[WriteStat]:
        return [*self.flush(), *self._close_file()]

    def discard(self, error: BaseException) -> None:
        if self._writer is not None:
            self._writer.__exit__(type(error), error, error.__traceback__)
            self._writer = None

    def _close_file(self) -> list[WriteStat]:
        if self._writer is None:
            return []
        stat = self._writer.close()
        self._writer = None
        context = TaskContext.get()
        if context is not None:
            faults.fail_task_after_file_written(context)
        return [stat]
