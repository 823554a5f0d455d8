"""Key lookups as Spark DataFrames: the record index names the files holding the keys, and
the rows are read where that is cheapest.

A Spark scan costs a job (a few hundred milliseconds) plus a few milliseconds per file
however few rows match, which for a handful of keys is nearly all of the lookup. So when
the index leaves few files (``DRIVER_MAX_FILES``, ``DRIVER_MAX_BYTES``), the driver reads
them itself with pyarrow, through ``tidemark.storage``, keeping only the rows whose key
columns match (row groups whose statistics exclude every key are skipped), and hands Spark
the rows as a local relation: no Spark job. Past those bounds the files go to the readers
of ``tidemark.jobs.read.scan``. Every reader gives the same rows in the snapshot's schema.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import structlog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.pandas.types import from_arrow_schema

from tidemark.errors import InvalidArgumentError
from tidemark.index.pruning import SnapshotPlan, plan_snapshot
from tidemark.jobs.base_file import conform
from tidemark.jobs.read import READERS, scan
from tidemark.jobs.task import storage_for
from tidemark.table.fsview import BaseFile
from tidemark.table.keys import record_keys
from tidemark.table.reader import snapshot_schema
from tidemark.table.table import HoodieTable

log = structlog.get_logger(__name__)

LOOKUP_READERS = (*READERS, "driver")
"""``driver``: pyarrow in the driver, the rows handed to Spark as a local relation;
``auto``: the driver for lookups within the bounds below, else ``scan``'s ``auto``."""
DRIVER_MAX_FILES = 256
"""At most this many files are read in the driver by an ``auto`` lookup: a file costs
the driver about 2 ms of two cores, so past a few hundred the driver takes longer than
Spark's job, whose executors share the files."""
DRIVER_MAX_BYTES = 64 * 1024 * 1024
"""Nor more than this many bytes of files: the driver decodes every column of each row
group that may hold a key (about 12 ms a MB on two cores), where Spark's scan, after its
job's fixed cost, decodes only the columns the query keeps, on every executor
(100 keys of ``python -m benchmarks read``: in 90 files of 18 MB, 0.28-0.34 s in the
driver; in 42 files of 66 MB, 0.61 s, against 0.75 s through Spark's scan)."""
DRIVER_THREADS = 8
"""Files the driver reads at once (pyarrow decodes without the GIL; S3 reads wait on
the network)."""
PARQUET = pads.ParquetFileFormat()
"""A file read in the driver is one dataset fragment: its footer is read once, for both
its stored columns and the row groups the key filter skips by their statistics."""


@dataclass(frozen=True)
class LookupPlan:
    """The files holding the keys (``snapshot.files``), and the keys as a table with a
    column per key field, typed as the snapshot's columns, without duplicates."""

    snapshot: SnapshotPlan
    keys: pa.Table

    def in_driver(self, reader: str) -> bool:
        """Whether ``reader`` reads this lookup's files in the driver."""
        files = self.snapshot.files
        small = len(files) <= DRIVER_MAX_FILES and sum(f.size for f in files) <= DRIVER_MAX_BYTES
        return reader == "driver" or (reader == "auto" and small)


def lookup_dataframe(
    spark: SparkSession,
    table_uri: str,
    keys: Sequence[Any] | DataFrame,
    *,
    columns: Sequence[str] | None = None,
    as_of: str | None = None,
    reader: str = "auto",
) -> DataFrame:
    """The rows visible at ``as_of`` (default latest) with the given record keys: ``keys``
    a list of values of the key field (tuples of the key fields' values for a composite
    key) or a DataFrame with a column per key field. ``reader``: one of
    ``LOOKUP_READERS``."""
    if reader not in LOOKUP_READERS:
        raise InvalidArgumentError(f"use one of {', '.join(LOOKUP_READERS)}", field="reader")
    plan = plan_lookup(table_uri, keys, as_of=as_of)
    for name in columns or ():
        if name not in plan.snapshot.schema.names:
            raise InvalidArgumentError("no such column in the table", field=name)
    in_driver = plan.in_driver(reader)
    log.debug(
        "read.lookup",
        table=plan.snapshot.uri,
        keys=plan.keys.num_rows,
        files=len(plan.snapshot.files),
        reader="driver" if in_driver else reader,
    )
    if in_driver:
        rows = read_in_driver(plan, columns)
        return spark.createDataFrame(rows, from_arrow_schema(rows.schema))
    frame = _matching(scan(spark, plan.snapshot, reader), plan.keys)
    return frame.select(*columns) if columns else frame


def plan_lookup(
    table_uri: str, keys: Sequence[Any] | DataFrame, *, as_of: str | None = None
) -> LookupPlan:
    """The files holding ``keys`` (as ``lookup_dataframe`` takes them) in the snapshot at
    ``as_of``."""
    table = HoodieTable.open(table_uri)
    fields = list(table.config.record_key_fields)
    if not fields:
        raise InvalidArgumentError("the table declares no record key fields", field="table")
    wanted = _key_table(keys, fields, snapshot_schema(table, as_of))
    snapshot = plan_snapshot(
        table_uri, keys=set(record_keys(wanted, table.config).to_pylist()), as_of=as_of
    )
    return LookupPlan(snapshot, wanted)


def read_in_driver(plan: LookupPlan, columns: Sequence[str] | None = None) -> pa.Table:
    """The rows of the plan's files having its keys, in the snapshot's schema (only
    ``columns``, when given), in one chunk. Only the columns asked and the key fields are
    decoded."""
    keys = plan.keys
    candidates = functools.reduce(
        operator.and_, (pc.field(name).isin(keys.column(name)) for name in keys.column_names)
    )
    storage = storage_for(plan.snapshot.uri)
    schema = plan.snapshot.schema
    names = list(dict.fromkeys([*keys.column_names, *columns])) if columns else schema.names
    read_schema = pa.schema([schema.field(name) for name in names])

    def read(base: BaseFile) -> pa.Table:
        with storage.open_input(base.path) as stream:
            fragment = PARQUET.make_fragment(stream)  # its footer read once, here
            stored = fragment.physical_schema.names
            needed = [name for name in read_schema.names if name in stored]
            return conform(fragment.to_table(columns=needed, filter=candidates), read_schema)

    pieces = list(_readers().map(read, plan.snapshot.files))
    rows = pa.concat_tables(pieces) if pieces else read_schema.empty_table()
    if keys.num_columns > 1:
        rows = rows.join(keys, keys=keys.column_names, join_type="left semi")
    rows = rows.select(list(columns) if columns else schema.names)
    return rows.combine_chunks()  # PySpark 4.3's createDataFrame stops at an empty chunk


@functools.cache
def _readers() -> ThreadPoolExecutor:
    """The driver's reading threads, started by its first lookup and kept: starting
    threads costs more than reading a few files."""
    return ThreadPoolExecutor(DRIVER_THREADS, thread_name_prefix="tidemark-lookup")


def _matching(frame: DataFrame, keys: pa.Table) -> DataFrame:
    """``frame``'s rows having one of ``keys`` (Spark applies it to the scan)."""
    if keys.num_columns == 1:
        name = keys.column_names[0]
        return frame.where(sf.col(f"`{name}`").isin(keys.column(0).to_pylist()))
    wanted = frame.sparkSession.createDataFrame(keys)
    return frame.join(sf.broadcast(wanted), on=keys.column_names, how="left_semi")


def _key_table(keys: Sequence[Any] | DataFrame, fields: list[str], schema: pa.Schema) -> pa.Table:
    """The distinct keys as a table of the key fields, typed as the snapshot's columns."""
    types = pa.schema([schema.field(name) for name in fields])
    if isinstance(keys, DataFrame):
        missing = [name for name in fields if name not in keys.columns]
        if missing:
            raise InvalidArgumentError(f"needs the key fields {', '.join(missing)}", field="keys")
        collected = keys.select(*[sf.col(f"`{name}`") for name in fields]).toArrow()
        return _distinct(lambda: collected.cast(types))
    composite = len(fields) > 1
    rows = [key if composite else (key,) for key in keys]
    if any(not isinstance(row, tuple) or len(row) != len(fields) for row in rows):
        raise InvalidArgumentError(
            f"each key must be a tuple of {len(fields)} values ({', '.join(fields)})",
            field="keys",
        )
    return _distinct(
        lambda: pa.table(
            [pa.array([row[i] for row in rows], type=f.type) for i, f in enumerate(types)],
            schema=types,
        )
    )


def _distinct(typed: Callable[[], pa.Table]) -> pa.Table:
    try:
        keys = typed()
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError) as error:
        raise InvalidArgumentError(
            f"keys do not fit the key fields: {error}", field="keys"
        ) from error
    return keys.group_by(keys.column_names, use_threads=False).aggregate([])
