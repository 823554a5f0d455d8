"""Preparing input rows: validate fields, compute record keys and partition paths, dedupe.

Keys come from ``tidemark.table.records.keys`` (the one definition shared with the index and the
readers), computed column-wise on Arrow batches in the executors.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as sf
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StringType, StructField, StructType

from tidemark.errors import InvalidArgumentError
from tidemark.table.properties.config import TableConfig
from tidemark.table.records.avro_names import INTERNAL_COLUMN_PREFIX
from tidemark.table.records.keys import (
    META_COLUMNS,
    PARTITION_PATH,
    RECORD_KEY,
    partition_paths,
    record_keys,
)

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
    """The Arrow schema Spark hands to Python for ``schema`` (timestamps in session time).

    PySpark 4.2 added ``to_arrow_schema(timezone=)``; before it, timestamps convert to
    UTC ones, whose zone is set to the session's here."""
    return arrow_schema_in_zone(schema, spark.conf.get("spark.sql.session.timeZone") or "UTC")


def arrow_schema_in_zone(schema: StructType, timezone: str) -> pa.Schema:
    """``schema`` in Arrow with timestamps in ``timezone``, on every PySpark the bounds
    admit."""
    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(schema, timezone=timezone)
    in_utc = to_arrow_schema(schema)
    return pa.schema([field.with_type(_in_zone(field.type, timezone)) for field in in_utc])


def _in_zone(kind: pa.DataType, timezone: str) -> pa.DataType:
    """``kind`` with every zoned timestamp in it (nested ones too) in ``timezone``."""
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        return pa.timestamp(kind.unit, tz=timezone)
    if pa.types.is_struct(kind):
        return pa.struct(
            [
                kind.field(i).with_type(_in_zone(kind.field(i).type, timezone))
                for i in range(kind.num_fields)
            ]
        )
    if pa.types.is_map(kind):
        return pa.map_(_in_zone(kind.key_type, timezone), _in_zone(kind.item_type, timezone))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        item = kind.value_field.with_type(_in_zone(kind.value_type, timezone))
        return pa.large_list(item) if pa.types.is_large_list(kind) else pa.list_(item)
    return kind


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
