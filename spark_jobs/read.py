"""Snapshot reads of a table as Spark DataFrames: the driver resolves the files
(``tidemark.index.pruning.plan_snapshot``: partitions, record index, column statistics);
when few and small files are left it reads them itself (``tidemark.jobs.driver_read``),
else Spark scans them.

Spark's own Parquet reader scans them when it can reach the table (``spark.read.parquet``
over the listed files, with the snapshot's schema: vectorised, row-group pushdown, column
pruning, large files split, no Python worker): always for local tables, for S3 tables
when the session has Hadoop's S3A connector (``hadoop-aws`` on its classpath; ``s3://``
is read as ``s3a://``). Without it the files are read through ``tidemark.storage`` with
pyarrow in Python tasks, several files per task. Either way the filters are applied to
the rows by Spark.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
import structlog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from tidemark.errors import InvalidArgumentError, NotFoundError
from tidemark.index.pruning import SnapshotPlan, plan_snapshot
from tidemark.jobs.driver_read import (
    RowsOverBoundError,
    local_frame,
    prefilter,
    read_files,
    read_pays_in_driver,
    read_slices,
)
from tidemark.jobs.filters import predicate_column
from tidemark.jobs.session import use_driver_python
from tidemark.jobs.task import storage_for
from tidemark.storage.uri import S3Uri, hadoop_uri, parse_uri
from tidemark.table import HoodieTable
from tidemark.table.files.merge import read_slice
from tidemark.table.files.query_types import SNAPSHOT
from tidemark.table.files.view import BaseFile, FileSlice
from tidemark.table.filters.expression import Filter
from tidemark.table.filters.literals import NO_SESSION_TIME_ZONE
from tidemark.table.records.schema import conform

log = structlog.get_logger(__name__)

S3A_FILE_SYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"
READERS = ("auto", "spark", "storage")
"""Of a scan: ``spark``: Spark's Parquet reader; ``storage``: pyarrow through
tidemark.storage in Spark tasks; ``auto``: Spark's whenever the session can reach the
table."""
READ_READERS = (*READERS, "driver", "scan")
"""Of a read: a scan's, ``driver``: pyarrow in the driver (``tidemark.jobs.driver_read``),
or ``scan``: a scan's ``auto``. A read's ``auto`` reads in the driver when that pays
(``driver_read.read_pays_in_driver``: by key, or a few MiB of files) and the rows kept stay
within its bound, else scans."""


def read_dataframe(
    spark: SparkSession,
    table: HoodieTable,
    *,
    where: Mapping[str, Any] | None = None,
    filters: Sequence[Filter] = (),
    columns: Sequence[str] | None = None,
    as_of: str | None = None,
    reader: str = "auto",
    query_type: str = SNAPSHOT,
) -> DataFrame:
    """Rows visible at ``as_of`` (default latest) in a query of ``query_type``
    (``tidemark.table.files.query_types``) meeting ``filters`` (``(column, op,
    value)``: ``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in``, ``not in``, ``is null``,
    ``is not null``) and ``where`` (``column == value``; a list or tuple: ``column in
    value``); meta columns included unless ``columns`` says otherwise. ``reader``: one of
    ``READ_READERS``. Filter values are read as Spark reads literals of their columns'
    types (``tidemark.table.filters.literals``), zone-less timestamps in the session's time zone."""
    if reader not in READ_READERS:
        raise InvalidArgumentError(f"use one of {', '.join(READ_READERS)}", field="reader")
    conditions = [*filters, *where_filters(where or {})]
    time_zone = spark.conf.get(SESSION_TIME_ZONE) or NO_SESSION_TIME_ZONE
    plan = plan_snapshot(table, conditions, as_of=as_of, time_zone=time_zone, query_type=query_type)
    for name in columns or ():
        if name not in plan.schema.names:
            raise InvalidArgumentError("no such column in the table", field=name)
    frame = _in_driver(spark, plan, columns, reader)
    if frame is None:
        frame = scan(spark, plan, scan_reader(reader))
    frame = apply_filters(frame, plan)
    return frame.select(*columns) if columns else frame


def _in_driver(
    spark: SparkSession, plan: SnapshotPlan, columns: Sequence[str] | None, reader: str
) -> DataFrame | None:
    """The plan's files read in the driver, when ``reader`` has it read there: the columns
    asked for and those filtered on, the rows its filters certainly drop left out (Spark
    applies them all again); None when the scan should read them. Merge-on-read slices
    are merged in the driver too (``driver_read.read_slices``)."""
    if not (reader == "driver" or (reader == "auto" and read_pays_in_driver(plan))):
        return None
    wanted = set(columns or plan.schema.names) | set(plan.filters.columns)
    schema = pa.schema([field for field in plan.schema if field.name in wanted])
    keep = prefilter(plan.filters)
    try:
        rows = read_files(plan.uri, plan.files, schema, keep, bounded=reader == "auto")
    except RowsOverBoundError as over:
        log.debug("read.driver_gave_up", table=plan.uri, reason=str(over))
        return None
    if plan.slices:
        merged = read_slices(plan, schema, keep)
        rows = pa.concat_tables([rows, merged]).combine_chunks()
    log.debug(
        "read.driver",
        table=plan.uri,
        files=len(plan.files),
        slices=len(plan.slices),
        rows=rows.num_rows,
    )
    return local_frame(spark, rows)


def scan_reader(reader: str) -> str:
    """The scan's reader for one of ``READ_READERS`` not read in the driver."""
    return "auto" if reader in ("auto", "scan") else reader


def where_filters(where: Mapping[str, Any]) -> list[Filter]:
    """``{column: value}`` as filters (a list or tuple value: ``in``)."""
    return [(n, "in" if isinstance(v, list | tuple) else "=", v) for n, v in where.items()]


def scan(spark: SparkSession, plan: SnapshotPlan, reader: str = "auto") -> DataFrame:
    """Every row of the planned files and merged slices, in the snapshot's schema."""
    if reader not in READERS:
        raise InvalidArgumentError(f"use one of {', '.join(READERS)}", field="reader")
    schema = from_arrow_schema(plan.schema)
    frame = spark.createDataFrame([], schema)
    if plan.files:
        native = reader == "spark" or (reader == "auto" and spark_reaches(spark, plan.uri))
        log.debug("read.scan", table=plan.uri, files=len(plan.files), native=native)
        frame = _parquet_scan(spark, plan, schema) if native else _storage_scan(spark, plan)
    if plan.slices:
        log.debug("read.merge", table=plan.uri, slices=len(plan.slices))
        merged = _merged_scan(spark, plan)
        frame = merged if not plan.files else frame.unionByName(merged)
    return frame


def _parquet_scan(spark: SparkSession, plan: SnapshotPlan, schema: StructType) -> DataFrame:
    """Spark's Parquet reader over the plan's files, given as their partition folders and
    a filter naming the files: Spark lists each folder once in the driver, where it would
    stat a list of files past ``spark.sql.sources.parallelPartitionDiscovery.threshold``
    (32) in a Spark job of a task per file, most of a key query's time. A file gone since
    planning (cleaned) is a NotFoundError, as Spark's own missing path would be; a folder
    holding a file named like one of the plan's in another folder (a copy) is read by
    naming each file."""
    base = hadoop_uri(plan.uri)
    folders = sorted({f"{base}/{f.partition_path}".rstrip("/") for f in plan.files})
    names = glob_of_names(f.path.rsplit("/", 1)[-1] for f in plan.files)
    frame = spark.read.schema(schema).option("pathGlobFilter", names).parquet(*folders)
    found = {_relative(path, base) for path in frame.inputFiles()}
    expected = {f.path for f in plan.files}
    if found == expected:
        return frame
    for path in sorted(expected - found):
        raise NotFoundError(
            "a base file of the snapshot is gone (cleaned since?): read again", field=path
        )
    return spark.read.schema(schema).parquet(*[f"{base}/{path}" for path in sorted(expected)])


def _relative(path: str, base: str) -> str | None:
    """``path`` (a URI as Spark lists it, percent-encoded) relative to the table's
    ``base``; None outside it."""
    where, table = urlsplit(path), urlsplit(base)
    folder, local = f"{table.path.rstrip('/')}/", unquote(where.path)
    if where.netloc != table.netloc or not local.startswith(folder):
        return None
    return local[len(folder) :]


def glob_of_names(names: Iterable[str]) -> str:
    """A Hadoop glob matching exactly ``names`` (``{a,b}``, special characters escaped)."""
    return "{" + ",".join(re.sub(r"([\\*?\[\]{},^!])", r"\\\1", n) for n in names) + "}"


def spark_reaches(spark: SparkSession, table_uri: str) -> bool:
    """Whether Spark's own readers can open the table's files: local ones always, S3 ones
    when Hadoop's S3A connector is on the session's classpath."""
    if not isinstance(parse_uri(table_uri), S3Uri):
        return True
    try:
        spark._jvm.java.lang.Class.forName(S3A_FILE_SYSTEM)  # type: ignore[union-attr]
    except Exception:
        return False
    return True


def apply_filters(frame: DataFrame, plan: SnapshotPlan) -> DataFrame:
    """``frame`` narrowed to the rows meeting the plan's filters."""
    for predicate in plan.filters:
        frame = frame.where(predicate_column(predicate))
    return frame


SESSION_TIME_ZONE = "spark.sql.session.timeZone"


def pack(files: Sequence[BaseFile], tasks: int) -> list[list[str]]:
    """``files``' paths in at most ``tasks`` groups of about equal bytes: a Python task
    per file would cost far more than reading small files."""
    return [[files[i].path for i in group] for group in balanced([f.size for f in files], tasks)]


def balanced(sizes: Sequence[int], tasks: int) -> list[list[int]]:
    """The indices of ``sizes`` in at most ``tasks`` groups of about equal sums (largest
    first, each to the lightest group)."""
    groups: list[tuple[int, int, list[int]]] = [(0, i, []) for i in range(max(1, tasks))]
    for item in sorted(range(len(sizes)), key=lambda i: sizes[i], reverse=True):
        size, index, members = heapq.heappop(groups)
        members.append(item)
        heapq.heappush(groups, (size + sizes[item], index, members))
    return [members for _, _, members in sorted(groups, key=lambda g: g[1]) if members]


def read_file(table_uri: str, path: str, output: pa.Schema) -> pa.Table:
    """One base file's rows as ``output`` (columns added since it was written are null);
    runs in a task, reading through ``tidemark.storage``."""
    with storage_for(table_uri).open_input(path) as stream:
        return conform(pq.read_table(stream), output)


def merged_slice(
    table_uri: str,
    file_slice: FileSlice,
    deltacommits: Mapping[str, str],
    output: pa.Schema,
    keys: Collection[str] | None = None,
) -> pa.Table:
    """A merge-on-read slice's rows, its base file merged with the log blocks of
    ``deltacommits``, as ``output`` (only the rows of ``keys``, when given); runs in a
    task."""
    table = HoodieTable.from_storage(storage_for(table_uri))
    return read_slice(table.storage, file_slice, deltacommits, table.config, output, keys)


def _merged_scan(spark: SparkSession, plan: SnapshotPlan) -> DataFrame:
    """The plan's merge-on-read slices, merged in Python tasks (for the plan's keys only,
    when it has them): as many tasks as the session runs at once, each merging slices of
    about equal bytes one after the other, as a Python task costs more than merging a small
    slice."""
    use_driver_python(spark)
    groups = balanced([s.size for s in plan.slices], spark.sparkContext.defaultParallelism)
    tasks = spark.createDataFrame(
        spark.sparkContext.parallelize([(group,) for group in groups], len(groups)),
        "slices array<int>",
    )
    uri, slices, deltacommits, output = plan.uri, plan.slices, plan.deltacommits, plan.schema
    keys = plan.keys

    def merge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for group in batch.column(0).to_pylist():
                for index in group:
                    rows = merged_slice(uri, slices[index], deltacommits, output, keys)
                    yield from rows.to_batches()

    return tasks.mapInArrow(merge, from_arrow_schema(plan.schema))


def _storage_scan(spark: SparkSession, plan: SnapshotPlan) -> DataFrame:
    use_driver_python(spark)
    groups = pack(plan.files, spark.sparkContext.defaultParallelism)
    tasks = spark.createDataFrame(
        spark.sparkContext.parallelize([(group,) for group in groups], len(groups)),
        "paths array<string>",
    )
    uri, output = plan.uri, plan.schema

    def read_files(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for group in batch.column(0).to_pylist():
                for path in group:
                    yield from read_file(uri, path, output).to_batches()

    return tasks.mapInArrow(read_files, from_arrow_schema(output))
