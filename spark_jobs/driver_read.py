"""Reading a few files in the driver: pyarrow through ``tidemark.storage``, the rows
handed to Spark as a local relation.

A Spark scan costs a job (a few hundred milliseconds) plus a few milliseconds per file
however few rows match; when pruning leaves a few small files (``DRIVER_MAX_FILES``,
``DRIVER_MAX_BYTES``) that is nearly all of a read. The driver then reads them itself,
several at a time, decoding only the columns asked for and skipping the row groups whose
statistics exclude the rows wanted, and collecting the result runs no Spark job.
"""

from __future__ import annotations

import functools
import operator
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from tidemark.index.pruning import SnapshotPlan
from tidemark.jobs.task import storage_for
from tidemark.storage import Storage
from tidemark.storage.local import LocalStorage
from tidemark.table import HoodieTable
from tidemark.table.files.merge import read_slice
from tidemark.table.files.view import BaseFile, FileSlice
from tidemark.table.filters import arrow
from tidemark.table.filters.expression import BoundFilter
from tidemark.table.records.schema import conform

DRIVER_MAX_FILES = 256
"""At most this many files are read in the driver by an ``auto`` read: a file costs the
driver about 1 ms of two cores, so past a few hundred the driver takes longer than Spark's
job, whose executors share the files."""
DRIVER_MAX_BYTES = 64 * 1024 * 1024
"""Nor more than this many bytes of files: the driver decodes every column asked for of
each row group that may hold a wanted row, where Spark's scan, after its job's fixed
cost, decodes only the columns the query keeps (100 keys of ``python -m benchmarks
read``: 90 files of 18 MB, the whole lookup 0.13 s in the driver; 42 files of 66 MB,
0.25 s against 0.30 s for ``spark.read.parquet``'s filtered scan; at ``--rows
10000000``, 85 files past the bound, Spark's scan 0.33 s)."""
DRIVER_SMALL_READ_BYTES = 4 * 1024 * 1024
"""A read not by key is read in the driver only from files this small all told: the driver
reads every column of every row group a filter may keep, where Spark's scan decodes only
the columns the query uses (``python -m benchmarks read``'s sum over a partition of 40
files, 200,000 rows: 2.1 s in the driver, 0.55 s through Spark's scan)."""
DRIVER_MAX_ROW_BYTES = 64 * 1024 * 1024
"""Nor are more rows than this in memory handed to Spark by an ``auto`` read (a filter
that keeps most rows of the files): past it, Spark scans the files instead. Rows of a
local relation live in the driver for the DataFrame's life, as a broadcast's do."""
DRIVER_THREADS = 8
"""Remote files the driver reads at once (pyarrow decodes without the GIL; S3 reads wait
on the network)."""
PARQUET = pads.ParquetFileFormat()
"""Files read in the driver are dataset fragments: each footer is read once, for both its
stored columns and the row groups the filter skips by their statistics."""
LOCAL_FILES = pafs.LocalFileSystem()
_PREFILTERED = ("=", "<", "<=", ">", ">=", "in")
Condition = tuple[str, pc.Expression]
"""A condition pyarrow applies while reading, and the column it reads."""


class RowsOverBoundError(Exception):
    """The files held more rows than a read in the driver may keep: scan them instead."""


def fits_driver(files: Sequence[BaseFile], slices: Sequence[FileSlice] = ()) -> bool:
    """Whether ``files`` and the files of the merge-on-read ``slices`` are few and small
    enough for an ``auto`` lookup in the driver."""
    sizes = _sizes(files, slices)
    return len(sizes) <= DRIVER_MAX_FILES and sum(sizes) <= DRIVER_MAX_BYTES


def read_pays_in_driver(plan: SnapshotPlan) -> bool:
    """Whether an ``auto`` read reads the plan's files in the driver: within the bounds,
    and either its filters name record keys (at most a row per key is kept) or the files
    are so small that reading every column of them costs less than a Spark job. A read
    keeping many rows of larger files goes to Spark, which decodes only the columns the
    query uses."""
    small = sum(_sizes(plan.files, plan.slices)) <= DRIVER_SMALL_READ_BYTES
    return fits_driver(plan.files, plan.slices) and ("keys" in plan.pruned or small)


def _sizes(files: Sequence[BaseFile], slices: Sequence[FileSlice]) -> list[int]:
    merged = [s.base for s in slices if s.base is not None]
    return [f.size for f in [*files, *merged]] + [log.size for s in slices for log in s.logs]


def read_slices(plan: SnapshotPlan, schema: pa.Schema, keep: Sequence[Condition]) -> pa.Table:
    """The plan's merge-on-read slices merged in the driver, several at a time (for the
    plan's keys only, when it has them), as ``schema``'s columns, the rows meeting
    ``keep``."""
    storage = storage_for(plan.uri)
    config = HoodieTable.from_storage(storage).config

    def merged(file_slice: FileSlice) -> pa.Table:
        rows = read_slice(storage, file_slice, plan.deltacommits, config, plan.schema, plan.keys)
        condition = _all_of(keep)
        return (rows if condition is None else rows.filter(condition)).select(schema.names)

    return pa.concat_tables([schema.empty_table(), *_readers().map(merged, plan.slices)])


def read_files(
    table_uri: str,
    files: Sequence[BaseFile],
    schema: pa.Schema,
    keep: Sequence[Condition],
    *,
    bounded: bool = False,
) -> pa.Table:
    """The rows of ``files`` meeting every condition of ``keep`` (a file without the
    column has only nulls there, which these conditions drop as Spark's filter would), as
    ``schema``'s columns (those a file lacks are null), in one chunk. ``bounded``: raises
    ``RowsOverBoundError`` once they pass ``DRIVER_MAX_ROW_BYTES`` in memory (the files
    left are not read)."""
    storage = storage_for(table_uri)
    stop = threading.Event()
    if isinstance(storage, LocalStorage):
        batches = _scan_local(storage, files, schema, keep)
    else:
        batches = _read_each(storage, files, schema, keep, stop)
    pieces: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        pieces.append(batch)
        held += batch.nbytes
        if bounded and held > DRIVER_MAX_ROW_BYTES:
            stop.set()
            raise RowsOverBoundError(f"{held} bytes of rows after {len(pieces)} batches")
    rows = pa.Table.from_batches(pieces, schema=schema)
    return rows.combine_chunks()  # PySpark 4.3's createDataFrame stops at an empty chunk


def _scan_local(
    storage: LocalStorage,
    files: Sequence[BaseFile],
    schema: pa.Schema,
    keep: Sequence[Condition],
) -> Iterator[pa.RecordBatch]:
    """Local base files scanned as one pyarrow dataset: its scanner opens, decodes and
    filters them on Arrow's own threads, each footer read once (the 90 files of a 100-key
    lookup of ``python -m benchmarks read``: 0.089 s against 0.125 s read a file per task
    on Python threads, alternating in one diagnostic run). Columns a file lacks read as
    nulls, others are cast to ``schema``; a file gone since planning is the storage's
    NotFoundError."""
    paths = [str(storage.local_file(base.path)) for base in files]
    dataset = pads.FileSystemDataset.from_paths(
        paths, schema=schema, format=PARQUET, filesystem=LOCAL_FILES
    )
    try:
        yield from dataset.to_batches(filter=_all_of(keep))
    except FileNotFoundError:
        for base in files:
            storage.size(base.path)  # NotFoundError naming the first one gone
        raise


def _read_each(
    storage: Storage,
    files: Sequence[BaseFile],
    schema: pa.Schema,
    keep: Sequence[Condition],
    stop: threading.Event,
) -> Iterator[pa.RecordBatch]:
    """Remote base files through the storage's streams, several at a time; once ``stop``
    is set the files not yet read are skipped."""

    def read(base: BaseFile) -> pa.Table:
        if stop.is_set():
            return schema.empty_table()
        with storage.open_input(base.path) as stream:
            fragment = PARQUET.make_fragment(stream)  # its footer read once, here
            stored = fragment.physical_schema.names
            needed = [name for name in schema.names if name in stored]
            kept = [(name, condition) for name, condition in keep if name in stored]
            return conform(fragment.to_table(columns=needed, filter=_all_of(kept)), schema)

    for piece in _readers().map(read, files):
        yield from piece.to_batches()


def _all_of(keep: Sequence[Condition]) -> pc.Expression | None:
    conditions = [condition for _, condition in keep]
    return functools.reduce(operator.and_, conditions) if conditions else None


def local_frame(spark: SparkSession, rows: pa.Table) -> DataFrame:
    """``rows`` as a DataFrame over a local relation (its actions run no Spark job)."""
    return spark.createDataFrame(rows, from_arrow_schema(rows.schema))


def prefilter(bound: BoundFilter) -> list[Condition]:
    """The predicates pyarrow applies exactly as Spark does (``arrow.predicate_expression``
    of comparisons and ``in`` whose values are of their column's own kind and held exactly
    by its type: integers in its range, strings, booleans, dates, decimals, timestamps with
    a zone; floats on double columns, as a float column's values are compared in double by
    Spark). Spark applies every filter again to what is read: these only let the driver
    skip row groups and rows, never keep fewer rows than Spark would."""
    return [
        (p.column, arrow.predicate_expression(p))
        for p in bound
        if p.op in _PREFILTERED
        and p.values
        and all(v.exact and _same_kind(v.value, p.kind) for v in p.values)
    ]


def _same_kind(value: Any, kind: pa.DataType) -> bool:
    if isinstance(value, bool):
        return pa.types.is_boolean(kind)
    if pa.types.is_integer(kind):
        return isinstance(value, int)
    if pa.types.is_float64(kind):
        return isinstance(value, int | float)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return isinstance(value, str)
    if pa.types.is_decimal(kind):
        return isinstance(value, Decimal)
    if pa.types.is_timestamp(kind):
        return kind.tz is not None and isinstance(value, datetime) and value.tzinfo is not None
    return pa.types.is_date(kind) and isinstance(value, date) and not isinstance(value, datetime)


@functools.cache
def _readers() -> ThreadPoolExecutor:
    """The driver's reading threads, started by its first read and kept: starting
    threads costs more than reading a few files."""
    return ThreadPoolExecutor(DRIVER_THREADS, thread_name_prefix="tidemark-driver-read")
