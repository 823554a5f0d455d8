"""One validation pass over a write's input, before anything touches the table.

Names, types and the table layout are checked from the schema and ``hoodie.properties``.
Everything about values is one Spark aggregation over the key, partition and precombine
columns (JVM only, no Python workers): the row count, the number of distinct record keys
(so a batch without duplicate keys needs no de-duplicating shuffle), null or empty record
keys, composite key parts that Hudi's ``field:value,field:value`` encoding cannot keep
apart, null ordering values. It groups by the key columns first (the key columns, not the
key string: for the supported key types they tell keys apart exactly as the string does),
then by each key's partition values, so the second level's groups are the distinct
partition values (hash aggregations, no ``collect_set``). Their folder names and nesting
are then checked on the driver with the code the writing tasks use to build partition
paths. Only when one key comes with several partition values (a duplicate key moving within
the batch) are the partition values collected in a second pass.
"""

from __future__ import annotations

import functools
import operator
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as sf

from tidemark.errors import InvalidArgumentError
from tidemark.jobs.errors import run_spark_action
from tidemark.jobs.keying import arrow_schema, check_fields, column
from tidemark.jobs.write_options import WriteOptions
from tidemark.table import HoodieTable
from tidemark.table.files.view import partitions_around
from tidemark.table.properties.config import COMPLEX_KEY_GENERATOR, TableConfig
from tidemark.table.records.avro_names import (
    INTERNAL_COLUMN_PREFIX,
    check_partition_nesting,
    check_partition_segment,
    check_write_schema,
    shown,
)
from tidemark.table.records.keys import (
    EMPTY_KEY_PART,
    IS_DELETED,
    NULL_KEY_PART,
    partition_paths,
    partition_segments,
)
from tidemark.table.writes.markers import longest_marker_path

ORDERED_OPERATIONS = frozenset({"insert", "upsert", "insert_overwrite"})
"""Operations that pick one row per key by the precombine field (Hudi's preCombine)."""

_KEY_SEPARATORS = "[,:]"
_ROWS = f"{INTERNAL_COLUMN_PREFIX}rows"
_ORDERING_NULLS = f"{INTERNAL_COLUMN_PREFIX}ordering_nulls"
_KEYS = f"{INTERNAL_COLUMN_PREFIX}keys"
_SPREAD_KEYS = f"{INTERNAL_COLUMN_PREFIX}spread_keys"
_FIRST_PARTITION = f"{INTERNAL_COLUMN_PREFIX}first_partition"
_LAST_PARTITION = f"{INTERNAL_COLUMN_PREFIX}last_partition"
_SAMPLE = f"{INTERNAL_COLUMN_PREFIX}sample_"
"""Aggregate names carry the reserved prefix: they sit beside the user's partition columns."""


def check_layout(config: TableConfig, request: WriteOptions) -> None:
    """The table layout the write asked for (used to create a table, checked otherwise)
    must be what ``hoodie.properties`` says. A precombine field may be given for a table
    without one (Hudi orders that write by it)."""
    for name, asked, actual in (
        ("record_key_fields", request.record_key_fields, config.record_key_fields),
        ("partition_fields", request.partition_fields, config.partition_fields),
    ):
        if asked and asked != actual:
            raise InvalidArgumentError(
                f"the table has {','.join(actual) or '(none)'}, not {','.join(asked)}",
                field=name,
            )
    if request.table_version is not None and request.table_version != config.table_version:
        raise InvalidArgumentError(
            f"the table is at version {config.table_version}, not {request.table_version} "
            "(a write never changes a table's version)",
            field="table_version",
        )
    if request.table_type is not None and request.table_type != config.table_type:
        raise InvalidArgumentError(
            f"the table is {config.table_type}, not {request.table_type} "
            "(a write never changes a table's type)",
            field="table_type",
        )
    if request.precombine_field and config.precombine_field not in (
        None,
        request.precombine_field,
    ):
        raise InvalidArgumentError(
            f"the table orders records by {config.precombine_field!r}, "
            f"not {request.precombine_field!r}",
            field="precombine_field",
        )
    for name, flag, kept, what in (
        ("hive_style", request.hive_style, config.hive_style, "hive-style (field=value)"),
        (
            "url_encode_partitions",
            request.url_encode_partitions,
            config.url_encode_partitions,
            "URL-encoded",
        ),
    ):
        if flag and not kept:
            raise InvalidArgumentError(
                f"the table's partition folders are not {what}; the layout is fixed when "
                "the table is created",
                field=name,
            )


@dataclass(frozen=True)
class InputCounts:
    """Rows of a validated input, its distinct record keys and the partition paths its
    rows go to."""

    rows: int
    keys: int
    partitions: frozenset[str] = frozenset()

    @property
    def has_duplicate_keys(self) -> bool:
        return self.keys < self.rows


@dataclass(frozen=True)
class InputChecks:
    """The validation pass of one input, its aggregation built but not run: ``frame``'s
    rows are what ``counted`` checks, so the aggregation can ride in another job
    (``collect_together``: a write tagged by a served record index)."""

    df: DataFrame
    config: TableConfig
    table: HoodieTable | None
    frame: DataFrame
    ordering: str | None
    max_path_bytes: int | None
    known_partitions: Collection[str]

    def counted(self, groups: list[Row]) -> InputCounts:
        """The input's counts from ``frame``'s rows, after checking its values; raises
        InvalidArgumentError naming the column and an offending value."""
        config, fields = self.config, self.config.partition_fields
        totals = _combine([group.asDict() for group in groups], fields)
        _raise_key_problems(config, totals)
        if self.ordering and totals[_ORDERING_NULLS]:
            raise InvalidArgumentError(
                f"precombine value is null in {totals[_ORDERING_NULLS]} rows (Hudi refuses a "
                "null ordering value)",
                field=self.ordering,
            )
        paths: frozenset[str] = frozenset()
        if fields:
            if totals[_SPREAD_KEYS]:
                partitions = self.df.groupBy(*[column(name) for name in fields]).count()
                groups = run_spark_action(partitions.collect)
            schema = arrow_schema(self.df.schema, self.df.sparkSession)
            distinct = pa.Table.from_pylist(
                [{name: group[name] for name in fields} for group in groups],
                schema=pa.schema([schema.field(name) for name in fields]),
            )
            paths = _check_partitions(
                config, distinct, self.table, self.max_path_bytes, self.known_partitions
            )
        return InputCounts(rows=int(totals[_ROWS]), keys=int(totals[_KEYS]), partitions=paths)

    def run(self) -> InputCounts:
        """The validation pass as its own Spark job."""
        return self.counted(run_spark_action(self.frame.collect))


def input_checks(
    df: DataFrame,
    config: TableConfig,
    operation: str,
    table: HoodieTable | None,
    max_path_bytes: int | None = None,
    known_partitions: Collection[str] = (),
) -> InputChecks:
    """The input's schema checked now, its values by the returned aggregation (one
    Spark aggregation, not run yet). A delete needs only the key columns
    (``spark_jobs.deletes``). With ``max_path_bytes`` (the storage's), every path the
    write creates must fit in it. ``known_partitions``: partitions the caller saw exist (a
    stream's earlier batches), whose nesting is not asked of storage again."""
    if operation == "delete":
        config = replace(config, partition_fields=(), precombine_field=None)
    check_fields(df, config)
    schema = arrow_schema(df.schema, df.sparkSession)
    check_write_schema(schema, config)
    if operation != "delete":
        _check_delete_flag(schema)
    key_checks = _key_checks(config)
    aggregates = [sf.count(sf.lit(1)).alias(_ROWS), *key_checks.values()]
    ordering = config.precombine_field if operation in ORDERED_OPERATIONS else None
    if ordering:
        aggregates.append(sf.count_if(sf.col(ordering).isNull()).alias(_ORDERING_NULLS))
    frame = _per_partition(_per_key(df, config, aggregates), config.partition_fields)
    return InputChecks(df, config, table, frame, ordering, max_path_bytes, known_partitions)


def _check_delete_flag(schema: pa.Schema) -> None:
    if IS_DELETED in schema.names and not pa.types.is_boolean(schema.field(IS_DELETED).type):
        raise InvalidArgumentError(
            f"Hudi's delete flag must be a boolean column, not {schema.field(IS_DELETED).type}",
            field=IS_DELETED,
        )


def _per_key(df: DataFrame, config: TableConfig, aggregates: list[Column]) -> DataFrame:
    """One row per distinct key: the aggregates and the smallest and largest of its
    partition values (equal unless the key comes with several)."""
    per_key = [*aggregates]
    if config.partition_fields:
        values = sf.struct(*[column(name) for name in config.partition_fields])
        per_key += [sf.min(values).alias(_FIRST_PARTITION), sf.max(values).alias(_LAST_PARTITION)]
    return df.groupBy(*[column(name) for name in config.record_key_fields]).agg(*per_key)


def _per_partition(per_key: DataFrame, fields: tuple[str, ...]) -> DataFrame:
    """The per-key aggregates summed (samples: the smallest) per partition value of each key,
    with the number of keys and of keys with several partition values."""
    combined = [
        (sf.min(name) if name.startswith(_SAMPLE) else sf.sum(name)).alias(name)
        for name in per_key.columns
        if name.startswith(INTERNAL_COLUMN_PREFIX)
        and name not in (_FIRST_PARTITION, _LAST_PARTITION)
    ]
    combined.append(sf.count(sf.lit(1)).alias(_KEYS))
    if not fields:
        return per_key.agg(*combined)
    first, last = sf.col(_FIRST_PARTITION), sf.col(_LAST_PARTITION)
    combined.append(sf.count_if(~first.eqNullSafe(last)).alias(_SPREAD_KEYS))
    return per_key.groupBy(*[first.getField(name).alias(name) for name in fields]).agg(*combined)


def _combine(groups: list[dict[str, Any]], partition_fields: Collection[str]) -> dict[str, Any]:
    """The whole input's aggregates from its partitions': counts add up, a sample is the
    smallest of the partitions' samples. No groups (empty partitioned input) count zero,
    and so does the one group of an empty input without partition columns (SQL's sum of
    no rows is null)."""
    totals: dict[str, Any] = {}
    for group in groups:
        for name, value in group.items():
            if name in partition_fields:
                continue
            if name.startswith(_SAMPLE):
                present = [v for v in (totals.get(name), value) if v is not None]
                totals[name] = min(present, default=None)
            else:
                totals[name] = totals.get(name, 0) + (value or 0)
    return defaultdict(int, totals)


def _is_composite(config: TableConfig) -> bool:
    return len(config.record_key_fields) > 1 or config.key_generator_class == COMPLEX_KEY_GENERATOR


def _key_checks(config: TableConfig) -> dict[str, Column]:
    """Aggregates over the key columns, by name: counts of bad rows and a sample value."""
    fields = config.record_key_fields
    text = {name: sf.col(name).cast("string") for name in fields}
    if not _is_composite(config):
        (name,) = fields
        checks = {
            _check("null_keys"): sf.count_if(text[name].isNull()),
            _check("empty_keys"): sf.count_if(text[name] == ""),
        }
    else:
        missing = [text[name].isNull() | (text[name] == "") for name in fields]
        checks = {_check("missing_keys"): sf.count_if(functools.reduce(operator.and_, missing))}
        for index, name in enumerate(fields):
            ambiguous = text[name].rlike(_KEY_SEPARATORS) | text[name].isin(
                NULL_KEY_PART, EMPTY_KEY_PART
            )
            checks[_check(f"ambiguous_{index}")] = sf.count_if(ambiguous)
            checks[f"{_SAMPLE}{index}"] = sf.min(sf.when(ambiguous, text[name]))
    return {alias: column.alias(alias) for alias, column in checks.items()}


def _check(name: str) -> str:
    return f"{INTERNAL_COLUMN_PREFIX}{name}"


def _raise_key_problems(config: TableConfig, totals: dict[str, Any]) -> None:
    fields = config.record_key_fields
    if not _is_composite(config):
        for count, what in (("null_keys", "null"), ("empty_keys", "empty ('')")):
            if rows := totals[_check(count)]:
                raise InvalidArgumentError(f"record key is {what} in {rows} rows", field=fields[0])
        return
    if rows := totals[_check("missing_keys")]:
        raise InvalidArgumentError(
            f"every record key field is null or empty in {rows} rows", field=",".join(fields)
        )
    for index, name in enumerate(fields):
        if rows := totals[_check(f"ambiguous_{index}")]:
            raise InvalidArgumentError(
                f"composite record key value {shown(totals[f'{_SAMPLE}{index}'])} "
                f"(and {rows} rows in all) contains ',' or ':' or is "
                f"{NULL_KEY_PART!r} or {EMPTY_KEY_PART!r}: Hudi's key field:value,field:value "
                "could not tell such rows apart",
                field=name,
            )


def _check_partitions(
    config: TableConfig,
    values: pa.Table,
    table: HoodieTable | None,
    max_path_bytes: int | None,
    known: Collection[str],
) -> frozenset[str]:
    """Folder names of every distinct partition value, the length of the longest path a
    file of each partition gets, then nesting against each other and the table's
    partitions around them (``partitions_around``: what the batch's paths could nest with,
    asked of storage only when the table exists, at a cost by the batch's partitions, not
    the table's); returns the partition paths."""
    fields = config.partition_fields
    segments = [column.to_pylist() for column in partition_segments(values, config)]
    for index, name in enumerate(fields):
        for value, segment in zip(values.column(name).to_pylist(), segments[index], strict=True):
            check_partition_segment(name, "" if value is None else str(value), segment)
    blame = {}
    for position, path in enumerate(partition_paths(values, config).to_pylist()):
        nested = [name for index, name in enumerate(fields) if "/" in segments[index][position]]
        blame[path] = (nested or list(fields))[0]
        longest = len(longest_marker_path(path).encode())
        if max_path_bytes is not None and longest > max_path_bytes:
            raise InvalidArgumentError(
                f"partition path {shown(path)} ({len(path.encode())} bytes) is too long for "
                f"the storage: its files' markers would need {longest} bytes of path under the "
                f"table, which has room for {max_path_bytes}",
                field=blame[path],
            )
    existing = partitions_around(table.storage, blame, known) if table is not None else set()
    check_partition_nesting(blame, existing)
    return frozenset(blame)
