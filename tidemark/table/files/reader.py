"""Snapshot reads of a table: the latest committed base files, pruned, filtered.

Pruning uses what is cheap: partition paths (for partition-field filters), the record
index, the table's column statistics and Parquet footer min/max statistics (for record
keys and column filters). Every byte is read
through ``Storage.open_input`` so local and S3 tables behave the same.
"""

from __future__ import annotations

import itertools
import urllib.parse
from collections.abc import Callable, Collection, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import structlog

from tidemark.errors import InvalidArgumentError, TidemarkError
from tidemark.storage.damaged import damaged, describe
from tidemark.table import HoodieTable
from tidemark.table.files import column_stats
from tidemark.table.files.column_stats import UNARY
from tidemark.table.files.view import BaseFile, resolve_as_of
from tidemark.table.properties.config import (
    CUSTOM_KEY_GENERATOR,
    TIMESTAMP_KEY_GENERATOR,
    TableConfig,
)
from tidemark.table.records.keys import (
    DEFAULT_PARTITION,
    META_COLUMNS,
    RECORD_KEY,
    key_source_columns,
    record_keys,
    stored_record_keys,
)
from tidemark.table.records.literals import NO_SESSION_TIME_ZONE, column_scalar, literal
from tidemark.table.records.schema import avro_to_arrow_schema
from tidemark.table.timeline.layout1 import WRITE_ACTIONS

Filter = tuple[str, str, Any]
PartitionFilter = Callable[[str], bool] | Mapping[str, Any]
OPERATORS = ("=", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null")

Locator = Callable[[set[str]], Collection[str]]
"""Record keys -> ids of the file groups holding them (a record index lookup)."""

log = structlog.get_logger(__name__)


def read_snapshot(
    table: HoodieTable,
    *,
    columns: Collection[str] | None = None,
    partition_filter: PartitionFilter | None = None,
    record_keys: Collection[str] | None = None,
    filters: list[Filter] | None = None,
    as_of: str | None = None,
    locate: Locator | None = None,
) -> pa.Table:
    """Rows visible at ``as_of`` (default: latest), meta columns first, Hudi's snapshot.
    With ``locate`` (a record index) and filters naming every record key field, only the
    file groups holding those keys are opened."""
    declared = snapshot_schema(table)
    filters = prepare_filters(table.config, declared, filters or [])
    if record_keys is not None:
        keys: set[str] | None = set(record_keys)
    else:
        keys = keys_from_filters(table.config, declared, filters)
    accept_partition = _partition_predicate(table.config, partition_filter, filters)
    base_files = [
        f for f in table.view(as_of).latest_base_files() if accept_partition(f.partition_path)
    ]
    pieces: list[pa.Table] = []
    schemas: list[pa.Schema] = []
    pruned = files_holding(table.uri, base_files, keys, locate)
    pruned = column_stats.may_hold(table.storage, pruned, filters)
    if len(pruned) < len(base_files):
        schemas.append(declared)  # columns of the files left unopened
    for base_file in pruned:
        try:
            with (
                table.storage.open_input(base_file.path) as stream,
                pq.ParquetFile(stream) as parquet,
            ):
                promoted = _promoted(parquet.schema_arrow, declared)
                schemas.append(promoted)
                if _may_match(parquet, keys, filters):
                    piece = _read_file(parquet, table.config, columns, keys, filters)
                    pieces.append(piece.cast(_promoted(piece.schema, promoted)))
        except (pa.ArrowInvalid, OSError) as error:  # what pyarrow raises for bad Parquet
            raise damaged(f"{table.uri}/{base_file.path}", describe(error)) from error
    schema = pa.unify_schemas(schemas, promote_options="permissive") if schemas else declared
    for name in [f[0] for f in filters] + list(columns or []):
        if name not in schema.names:
            raise InvalidArgumentError("no such column in the table", field=name)
    wanted = pa.schema([schema.field(n) for n in columns]) if columns else schema
    if not pieces:
        return wanted.empty_table()
    rows = pa.concat_tables(pieces, promote_options="permissive")
    for field in wanted:  # a column only files left out by the filters have: null, as hudi-rs
        if field.name not in rows.column_names:
            rows = rows.append_column(field, pa.nulls(rows.num_rows, field.type))
    return rows


def files_holding(
    table_uri: str, files: list[BaseFile], keys: set[str] | None, locate: Locator | None
) -> list[BaseFile]:
    """``files`` reduced to the file groups ``locate`` places ``keys`` in (all of them when
    either is None); the count is logged at debug level (``read.files_opened``)."""
    if keys is not None and locate is not None:
        holding = set(locate(keys))
        files = [f for f in files if f.file_id in holding]
    log.debug("read.files_opened", table=table_uri, files=len(files))
    return files


def parse_partition_path(partition_path: str, config: TableConfig) -> dict[str, str] | None:
    """Partition field values encoded in a path, or None when the path cannot be decoded
    (a time-based key generator writes formatted times, not the field's values)."""
    segments = partition_path.split("/") if partition_path else []
    if len(segments) != len(config.partition_fields) or config.key_generator_class in (
        TIMESTAMP_KEY_GENERATOR,
        CUSTOM_KEY_GENERATOR,
    ):
        return None
    values: dict[str, str] = {}
    for name, segment in zip(config.partition_fields, segments, strict=True):
        if config.hive_style:
            key, sep, value = segment.partition("=")
            if not sep or key != name:
                return None
            values[name] = value
        else:
            values[name] = segment
    if config.url_encode_partitions:
        return {name: urllib.parse.unquote(value) for name, value in values.items()}
    return values


def prepare_filters(
    config: TableConfig,
    schema: pa.Schema,
    filters: list[Filter],
    time_zone: str = NO_SESSION_TIME_ZONE,
) -> list[Filter]:
    """Checked filters with their values typed like their columns by ``literals.literal``
    (an error, not an empty result, for a value its column's type cannot hold; zone-less
    timestamps in ``time_zone``), and equality with ``""`` or None on a partition field
    meaning null or empty, as both are stored under ``__HIVE_DEFAULT_PARTITION__``."""
    prepared: list[Filter] = []
    for item in filters:
        column, op, value = _check_filter(item)
        if (column in config.partition_fields and op == "=" and value in ("", None)) or op in UNARY:
            value = None
        elif column in schema.names:
            kind = schema.field(column).type
            if op in ("in", "not in"):
                value = [literal(member, kind, column, time_zone) for member in value]
            else:
                value = literal(value, kind, column, time_zone)
        prepared.append((column, op, value))
    return prepared


def row_mask(data: pa.Table, condition: Filter) -> pa.ChunkedArray:
    """Rows of ``data`` meeting a prepared filter; equality with None matches null (and,
    for strings, empty) values."""
    column, op, value = condition
    if column not in data.column_names:
        return pa.chunked_array([pa.array([False] * data.num_rows)])
    values = data.column(column)
    if op in UNARY:
        missing = pc.is_null(values)
        return missing if op == "is null" else pc.invert(missing)
    if op == "=" and value is None:
        missing = pc.is_null(values)
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            missing = pc.or_kleene(missing, pc.equal(values, ""))
        return pc.fill_null(missing, False)
    if op in ("in", "not in"):
        typed = [column_scalar(literal(v, values.type, column), values.type) for v in value]
        members = pa.array([m for m in typed if m is not None], type=values.type)
        hit = pc.is_in(values, value_set=members)
        return pc.invert(hit) if op == "not in" else hit
    typed_value = literal(value, values.type, column)
    held = column_scalar(typed_value, values.type)
    scalar = pa.scalar(typed_value) if held is None else held
    compare = {
        "=": pc.equal,
        "!=": pc.not_equal,
        "<": pc.less,
        "<=": pc.less_equal,
        ">": pc.greater,
        ">=": pc.greater_equal,
    }[op]
    return pc.fill_null(compare(values, scalar), False)


def partition_value(value: Any) -> str:
    """A filter value as it appears in a (decoded) partition path."""
    if value is None or value == "":
        return DEFAULT_PARTITION
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def keys_from_filters(
    config: TableConfig, schema: pa.Schema, filters: list[Filter]
) -> set[str] | None:
    """Equality (or ``in``) on every record key field becomes a record key lookup (file
    pruning): the values typed like their columns, keyed as the writer keys them (``id=01``
    is key 1; ``in`` on several key fields gives every combination)."""
    wanted = {column: [value] for column, op, value in filters if op == "="}
    wanted |= {column: list(value) for column, op, value in filters if op == "in"}
    fields = config.record_key_fields
    if not fields or not all(name in wanted and name in schema.names for name in fields):
        return None
    combinations = list(itertools.product(*(wanted[name] for name in fields)))
    rows = pa.table(
        {
            name: pa.array(
                [literal(values[index], schema.field(name).type, name) for values in combinations],
                type=schema.field(name).type,
            )
            for index, name in enumerate(fields)
        }
    )
    try:
        return set(record_keys(rows, config).to_pylist())
    except TidemarkError:
        return None


def _check_filter(item: Filter) -> Filter:
    if not isinstance(item, tuple) or len(item) != 3:
        raise InvalidArgumentError(f"{item!r} is not (column, op, value)", field="filters")
    column, op, value = item
    if op not in OPERATORS:
        raise InvalidArgumentError(
            f"unknown operator {op!r} (use one of {', '.join(OPERATORS)})", field="filters"
        )
    if op in ("in", "not in") and not isinstance(value, list | tuple | set | frozenset):
        raise InvalidArgumentError(f"{op!r} needs a collection of values", field=column)
    return (column, "=" if op == "==" else op, value)


def _partition_predicate(
    config: TableConfig, partition_filter: PartitionFilter | None, filters: list[Filter]
) -> Callable[[str], bool]:
    wanted: dict[str, set[str]] = {}
    if isinstance(partition_filter, Mapping):
        for name, value in partition_filter.items():
            if name not in config.partition_fields:
                raise InvalidArgumentError("not a partition field", field=name)
            wanted[name] = {partition_value(value)}
    for column, op, value in filters:
        if column in config.partition_fields and op in ("=", "in"):
            values = value if op == "in" else [value]
            wanted[column] = wanted.get(column, set()) | {partition_value(v) for v in values}

    def accept(partition_path: str) -> bool:
        if callable(partition_filter) and not partition_filter(partition_path):
            return False
        if not wanted:
            return True
        decoded = parse_partition_path(partition_path, config)
        return decoded is None or all(decoded[name] in values for name, values in wanted.items())

    return accept


def _may_match(parquet: pq.ParquetFile, keys: set[str] | None, filters: list[Filter]) -> bool:
    """False only when footer statistics prove no row group can match."""
    conditions: list[Filter] = list(filters)
    if keys is not None:
        if not keys:
            return False
        conditions.append((RECORD_KEY, "in", keys))
    if not conditions:
        return True
    metadata = parquet.metadata
    names = [metadata.schema.column(i).path for i in range(metadata.num_columns)]
    return any(
        all(_row_group_may_match(metadata.row_group(rg), names, c) for c in conditions)
        for rg in range(metadata.num_row_groups)
    )


def _row_group_may_match(
    row_group: pq.RowGroupMetaData, names: list[str], condition: Filter
) -> bool:
    column = condition[0]
    if column not in names:
        return True
    stats = row_group.column(names.index(column)).statistics
    if stats is None or not stats.has_min_max:
        return True
    bounds = {column: column_stats.ColumnStats(stats.min, stats.max, None)}
    return column_stats.may_match(column_stats.FileStats(row_group.num_rows, bounds), [condition])


def _read_file(
    parquet: pq.ParquetFile,
    config: TableConfig,
    columns: Collection[str] | None,
    keys: set[str] | None,
    filters: list[Filter],
) -> pa.Table:
    needed = None
    if columns is not None:
        extra = [f[0] for f in filters] + (key_source_columns(config) if keys is not None else [])
        needed = list(dict.fromkeys([*columns, *extra]))
        needed = [n for n in needed if n in parquet.schema_arrow.names]
    data = parquet.read(columns=needed)
    mask = None
    if keys is not None:
        stored = stored_record_keys(data, config)
        mask = pc.is_in(stored, value_set=pa.array(sorted(keys), pa.string()))
    for condition in filters:
        matches = row_mask(data, condition)
        mask = matches if mask is None else pc.and_kleene(mask, matches)
    if mask is not None:
        data = data.filter(mask)
    if columns is not None:
        data = data.select([n for n in columns if n in data.column_names])
    return data


def _promoted(schema: pa.Schema, declared: pa.Schema) -> pa.Schema:
    """``schema`` with each scalar column whose type a later write promoted (Hudi's schema
    evolution: int to long, long to string, ...) given its type in the latest writer
    schema, to which Hudi readers (hudi-rs too) cast every file."""
    fields = []
    for field in schema:
        latest = declared.field(field.name) if field.name in declared.names else None
        if latest is not None and latest.type != field.type and _scalar(field.type, latest.type):
            field = field.with_type(latest.type)
        fields.append(field)
    return pa.schema(fields, metadata=schema.metadata)


def _scalar(*kinds: pa.DataType) -> bool:
    return all(
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_string(kind)
        or pa.types.is_binary(kind)
        for kind in kinds
    )


def snapshot_schema(table: HoodieTable, as_of: str | None = None) -> pa.Schema:
    """The snapshot's schema as Hudi readers take it: meta columns plus the writer schema
    of the last commit completed by ``as_of`` (``fsview.resolve_as_of``; the table's
    declared schema before any)."""
    avro = table.config.avro_schema
    at = resolve_as_of(table.timeline, table.archive, as_of) if as_of else None
    done = [i for i in table.timeline.completed(WRITE_ACTIONS) if not at or i.completed_at <= at]
    last = max(done, key=lambda i: i.completed_at, default=None)
    if last is not None:
        avro = table.timeline.read_metadata(last).extra_metadata.get("schema", avro)
    meta = [pa.field(name, pa.string()) for name in META_COLUMNS]
    data = list(avro_to_arrow_schema(avro)) if avro else []
    return pa.schema(meta + data)
