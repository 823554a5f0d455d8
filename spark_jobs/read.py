"""Snapshot read of a table as a Spark DataFrame, without Hadoop's S3 connector.

The driver lists the latest base files (pruned by partition values in ``where``, and by the
record index when ``where`` names every record key field); executors read them through
``tidemark.storage`` with pyarrow and apply ``where`` as equality (a list: ``in``) filters.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import structlog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from tidemark.errors import InvalidArgumentError
from tidemark.index.pruning import index_locator
from tidemark.jobs.base_file import conform
from tidemark.jobs.task import storage_for
from tidemark.table.fsview import BaseFile
from tidemark.table.reader import (
    Filter,
    files_holding,
    keys_from_filters,
    parse_partition_path,
    partition_value,
    prepare_filters,
    read_snapshot,
    row_mask,
)
from tidemark.table.table import HoodieTable

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class ReadPlan:
    """What a snapshot read opens: the pruned base files, their schema and the checked
    filters every row is tested against."""

    uri: str
    schema: pa.Schema
    filters: list[Filter]
    paths: list[str]


def read_dataframe(
    spark: SparkSession,
    table_uri: str,
    *,
    where: Mapping[str, Any] | None = None,
    columns: Sequence[str] | None = None,
    as_of: str | None = None,
) -> DataFrame:
    """Rows visible at ``as_of`` (default latest) with ``column == value`` (a list or tuple:
    ``column in value``) for each item of ``where``; meta columns included unless
    ``columns`` says otherwise."""
    plan = plan_read(table_uri, where or {}, as_of, columns or ())
    schema = plan.schema
    output = pa.schema([schema.field(n) for n in columns]) if columns else schema
    slices = max(1, min(len(plan.paths), spark.sparkContext.defaultParallelism))
    paths = spark.createDataFrame(
        spark.sparkContext.parallelize([(p,) for p in plan.paths], slices), "path string"
    )

    def read_files(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for path in batch.column(0).to_pylist():
                yield from read_file(plan, path, output).to_batches()

    return paths.mapInArrow(read_files, from_arrow_schema(output))


def plan_read(
    table_uri: str,
    where: Mapping[str, Any],
    as_of: str | None = None,
    columns: Sequence[str] = (),
) -> ReadPlan:
    """The base files that may hold rows meeting ``where`` (``column == value``, a list or
    tuple: ``column in value``): partitions pruned by their values, file groups by the
    record index when ``where`` names every record key field and the read is of the latest
    snapshot (the index places keys where they are now: a key clustered or moved since
    ``as_of`` would be missed). Runs on the driver."""
    table = HoodieTable.open(table_uri)
    conditions = dict(where)
    files = [f for f in table.view(as_of).latest_base_files() if _may_match(f, table, conditions)]
    schema = _schema(table, files, as_of)
    for name in [*conditions, *columns]:
        if name not in schema.names:
            raise InvalidArgumentError("no such column in the table", field=name)
    filters = prepare_filters(
        table.config,
        schema,
        [(n, "in" if isinstance(v, list | tuple) else "=", v) for n, v in conditions.items()],
    )
    if as_of is None:
        files = _holding_keys(table, schema, filters, files)
    return ReadPlan(table.uri, schema, filters, [f.path for f in files])


def read_file(plan: ReadPlan, path: str, output: pa.Schema) -> pa.Table:
    """The rows of one planned base file meeting the plan's filters, as ``output`` (a
    subset of the plan's schema); runs in a task, reading through ``tidemark.storage``."""
    with storage_for(plan.uri).open_input(path) as stream:
        rows = conform(pq.read_table(stream), plan.schema)
    for condition in plan.filters:
        rows = rows.filter(row_mask(rows, condition))
    return conform(rows, output)


def table_schema(table_uri: str, as_of: str | None = None) -> pa.Schema:
    """The snapshot's schema, meta columns first (what ``read_dataframe`` returns with no
    ``where``)."""
    table = HoodieTable.open(table_uri)
    return _schema(table, table.view(as_of).latest_base_files(), as_of)


def _may_match(base: BaseFile, table: HoodieTable, conditions: Mapping[str, Any]) -> bool:
    decoded = parse_partition_path(base.partition_path, table.config)
    if decoded is None:
        return True
    return all(
        decoded[n] in {partition_value(m) for m in (v if isinstance(v, list | tuple) else [v])}
        for n, v in conditions.items()
        if n in decoded
    )


def _holding_keys(
    table: HoodieTable, schema: pa.Schema, filters: list[Filter], files: list[BaseFile]
) -> list[BaseFile]:
    """``files`` reduced to the file groups the record index places the filtered keys in
    (all of them without an index or a filter on every key field)."""
    keys = keys_from_filters(table.config, schema, filters)
    locate = index_locator(table.storage) if keys is not None else None
    return files_holding(table.uri, files, keys, locate)


def _schema(table: HoodieTable, files: Sequence[BaseFile], as_of: str | None) -> pa.Schema:
    """The newest base file's schema; for a table without files, the commit schema."""
    if not files:
        return read_snapshot(table.storage, as_of=as_of).schema
    newest = max(files, key=lambda f: f.instant)
    with table.storage.open_input(newest.path) as stream:
        return pq.read_schema(stream)
