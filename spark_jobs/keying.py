"""Preparing input rows: validate fields, compute record keys and partition paths, dedupe.

Keys come from ``tidemark.table.keys`` (the one definition shared with the index and the
readers), computed column-wise on Arrow batches in the executors.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as sf
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StringType, StructField, StructType

from tidemark.errors import InvalidArgumentError
from tidemark.table.keys import (
    META_COLUMNS,
    PARTITION_PATH,
    RECORD_KEY,
    partition_paths,
    record_keys,
)
from tidemark.table.names import INTERNAL_COLUMN_PREFIX
from tidemark.table.properties import TableConfig

_ARRIVAL = f"{INTERNAL_COLUMN_PREFIX}arrival"
_RANK = f"{INTERNAL_COLUMN_PREFIX}rank"


def data_columns(df: DataFrame) -> DataFrame:
    """The user's columns: Hudi meta columns in the input (e.g. read from a table) are dropped."""
    return df.drop(*[name for name in META_COLUMNS if name in df.columns])


def check_fields(df: DataFrame, config: TableConfig) -> None:
    """Every configured key, partition and precombine field must be an input column."""
    named = [("record_key_fields", name) for name in config.record_key_fields]
    named += [("partition_fields", name) for name in config.partition_fields]
    if config.precombine_field:
        named.append(("precombine_field", config.precombine_field))
    for option, name in named:
        if name not in df.columns:
            raise InvalidArgumentError(
                f"{option} names {name!r}, which is not an input column "
                f"(columns: {', '.join(df.columns)})",
                field=option,
            )


def keyed_schema(df: DataFrame) -> StructType:
    """Meta columns first (as in every base file), then the data columns, all nullable."""
    meta = [StructField(name, StringType(), True) for name in META_COLUMNS]
    data = [StructField(f.name, f.dataType, True, f.metadata) for f in df.schema.fields]
    return StructType(meta + data)


def arrow_schema(schema: StructType, spark: SparkSession) -> pa.Schema:
    """The Arrow schema Spark hands to Python for ``schema`` (timestamps in session time)."""
    timezone = spark.conf.get("spark.sql.session.timeZone") or "UTC"
    return to_arrow_schema(schema, timezone=timezone)


def column(name: str) -> Column:
    """A top-level column by name, even when the name contains dots or backticks."""
    return sf.col(f"`{name.replace('`', '``')}`")


def add_key_columns(batch: pa.RecordBatch, config: TableConfig) -> pa.RecordBatch:
    """Meta columns first: record key and partition path computed, the others null."""
    table = pa.Table.from_batches([batch])
    meta = {name: pa.nulls(batch.num_rows, pa.string()) for name in META_COLUMNS}
    meta[RECORD_KEY] = record_keys(table, config)
    meta[PARTITION_PATH] = partition_paths(table, config)
    arrays = list(meta.values()) + list(batch.columns)
    return pa.RecordBatch.from_arrays(arrays, names=list(meta) + batch.schema.names)


def with_keys(df: DataFrame, config: TableConfig) -> DataFrame:
    """Rows with ``_hoodie_record_key`` and ``_hoodie_partition_path`` set (others null)."""

    def add_keys(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield add_key_columns(batch, config)

    return df.mapInArrow(add_keys, keyed_schema(df))


def dedupe(rows: DataFrame, config: TableConfig) -> DataFrame:
    """One row per record key: the largest precombine value wins, ties and no precombine
    field go to the row that came last in the input (numbered before any shuffle). Rows are
    grouped by the key columns, which tell keys apart exactly as the key string does, so
    this works before or after ``with_keys``."""
    arrival = rows.withColumn(_ARRIVAL, sf.monotonically_increasing_id())
    order = [sf.col(_ARRIVAL).desc()]
    if config.precombine_field:
        order.insert(0, column(config.precombine_field).desc_nulls_last())
    keys = Window.partitionBy(*[column(name) for name in config.record_key_fields])
    rank = sf.row_number().over(keys.orderBy(*order))
    return arrival.withColumn(_RANK, rank).where(sf.col(_RANK) == 1).drop(_RANK, _ARRIVAL)
