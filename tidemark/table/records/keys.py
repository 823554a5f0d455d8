"""Record keys, partition paths and meta columns, computed column-wise with pyarrow.

The one definition of keys, shared by writes, tagging, deletes and reads. Matches Hudi's
key generators: a simple key is the value as a string, a complex key ``f1:v1,f2:v2``
(``__null__``/``__empty__`` for missing parts); the timestamp-based generator keys like
the simple one and the custom one like simple (one field) or complex. Partition paths:
simple values that are null or empty become ``__HIVE_DEFAULT_PARTITION__``; timestamp
fields (timestamp-based and custom generators) are formatted by ``timestamp_keys``.
Tables with virtual keys (``hoodie.populate.meta.fields=false``) store no keys:
``stored_record_keys`` derives them from the key fields.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemark.errors import FailedPreconditionError, InvalidArgumentError
from tidemark.table.properties.config import (
    COMPLEX_KEY_GENERATOR,
    CUSTOM_KEY_GENERATOR,
    NON_PARTITIONED_KEY_GENERATOR,
    SIMPLE_KEY_GENERATOR,
    TIMESTAMP_KEY_GENERATOR,
    TableConfig,
)
from tidemark.table.records.timestamp_keys import timestamp_partition_values

PARTITION_FIELDS = "hoodie.table.partition.fields"

COMMIT_TIME = "_hoodie_commit_time"
COMMIT_SEQNO = "_hoodie_commit_seqno"
RECORD_KEY = "_hoodie_record_key"
PARTITION_PATH = "_hoodie_partition_path"
FILE_NAME = "_hoodie_file_name"
META_COLUMNS = (COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME)
OPERATION = "_hoodie_operation"
"""Hudi's changelog meta column (``hoodie.allow.operation.metadata.field``), not kept here."""
IS_DELETED = "_hoodie_is_deleted"
"""Hudi's delete flag: a data column (kept in the schema) whose true rows delete their key."""
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
NULL_KEY_PART = "__null__"
EMPTY_KEY_PART = "__empty__"
_ESCAPED = frozenset([chr(code) for code in range(0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))
SUPPORTED_KEY_GENERATORS = (
    SIMPLE_KEY_GENERATOR,
    COMPLEX_KEY_GENERATOR,
    NON_PARTITIONED_KEY_GENERATOR,
    TIMESTAMP_KEY_GENERATOR,
    CUSTOM_KEY_GENERATOR,
)
SIMPLE = "SIMPLE"
TIMESTAMP = "TIMESTAMP"


def record_keys(table: pa.Table, config: TableConfig) -> pa.Array:
    """``_hoodie_record_key`` for every row; a null or empty key is an error."""
    check_key_generator(config)
    if config.key_generator_class != COMPLEX_KEY_GENERATOR and len(config.record_key_fields) == 1:
        name = config.record_key_fields[0]
        values = _as_string(table, name)
        if values.null_count or pc.any(pc.equal(values, "")).as_py():
            raise InvalidArgumentError("record key is null or empty in some rows", field=name)
        return values
    parts = []
    all_missing: pa.Array | None = None
    for name in config.record_key_fields:
        values = _as_string(table, name)
        missing = pc.or_(pc.is_null(values), pc.equal(pc.fill_null(values, ""), ""))
        all_missing = missing if all_missing is None else pc.and_(all_missing, missing)
        filled = pc.if_else(pc.equal(values, ""), EMPTY_KEY_PART, values)
        parts.append(
            pc.binary_join_element_wise(f"{name}:", pc.fill_null(filled, NULL_KEY_PART), "")
        )
    if all_missing is not None and pc.any(all_missing).as_py():
        raise InvalidArgumentError(
            "every record key field is null or empty in some rows",
            field=",".join(config.record_key_fields),
        )
    return pc.binary_join_element_wise(*parts, ",")


def partition_paths(table: pa.Table, config: TableConfig) -> pa.Array:
    """``_hoodie_partition_path`` for every row (``""`` for non-partitioned tables)."""
    segments = partition_segments(table, config)
    if not segments:
        return pa.array([""] * table.num_rows, type=pa.string())
    if len(segments) == 1:
        return segments[0]
    return pc.binary_join_element_wise(*segments, "/")


def partition_segments(table: pa.Table, config: TableConfig) -> list[pa.Array]:
    """What each partition field contributes to the partition path, in field order: the
    value (``__HIVE_DEFAULT_PARTITION__`` when null or empty), URL-encoded when the table
    says so, ``field=``-prefixed when hive-style. Empty for non-partitioned tables."""
    check_key_generator(config)
    if not config.partition_fields or config.key_generator_class == NON_PARTITIONED_KEY_GENERATOR:
        return []
    segments = []
    props = dict(config.properties)
    for name, kind in zip(config.partition_fields, partition_field_kinds(config), strict=True):
        if kind == TIMESTAMP:
            if name not in table.column_names:
                raise InvalidArgumentError("column is missing from the data", field=name)
            values = timestamp_partition_values(table.column(name).combine_chunks(), props, name)
        else:
            values = _as_string(table, name)
            values = pc.if_else(pc.equal(pc.fill_null(values, ""), ""), DEFAULT_PARTITION, values)
        if config.url_encode_partitions:
            values = _url_encode(values)
        if config.hive_style:
            values = pc.binary_join_element_wise(f"{name}=", values, "")
        segments.append(values)
    return segments


def escape_partition_value(value: str) -> str:
    """Hudi's ``PartitionPathEncodeUtils.escapePathName``: control characters and
    ``"#%'*/:=?\\{[]^`` and DEL become ``%XX``; everything else (non-ASCII included) stays."""
    return "".join(f"%{ord(char):02X}" if char in _ESCAPED else char for char in value)


def stored_record_keys(rows: pa.Table, config: TableConfig) -> pa.Array:
    """Record keys of rows read from a base file: the meta column, or in a table with
    virtual keys (no meta fields) the keys derived from the key fields."""
    if config.populate_meta_fields:
        return rows.column(RECORD_KEY).combine_chunks()
    return record_keys(rows, config)


def key_source_columns(config: TableConfig) -> list[str]:
    """The base-file columns ``stored_record_keys`` needs."""
    return [RECORD_KEY] if config.populate_meta_fields else list(config.record_key_fields)


def commit_seqnos(instant: str, task_partition_id: int, num_rows: int, start: int = 0) -> pa.Array:
    """``<instant>_<taskPartitionId>_<seq>`` for ``num_rows`` consecutive records."""
    sequence = pc.cast(pa.array(np.arange(start, start + num_rows, dtype=np.int64)), pa.string())
    return pc.binary_join_element_wise(f"{instant}_{task_partition_id}_", sequence, "")


def with_meta_columns(
    table: pa.Table,
    *,
    instant: str,
    task_partition_id: int,
    keys: pa.Array,
    partition_path: str,
    file_name: str,
) -> pa.Table:
    """The rows of one base file with Hudi's five meta columns first, in Hudi's order."""
    data = table.drop_columns([name for name in META_COLUMNS if name in table.column_names])
    num_rows = data.num_rows
    meta = {
        COMMIT_TIME: pa.array([instant] * num_rows, type=pa.string()),
        COMMIT_SEQNO: commit_seqnos(instant, task_partition_id, num_rows),
        RECORD_KEY: keys,
        PARTITION_PATH: pa.array([partition_path] * num_rows, type=pa.string()),
        FILE_NAME: pa.array([file_name] * num_rows, type=pa.string()),
    }
    columns = list(meta.values()) + list(data.columns)
    return pa.Table.from_arrays(columns, names=list(meta) + data.column_names)


def check_key_generator(config: TableConfig) -> None:
    if config.key_generator_class not in SUPPORTED_KEY_GENERATORS:
        raise FailedPreconditionError(
            f"value {config.key_generator_class!r} is not supported "
            f"(use {', '.join(name.rpartition('.')[2] for name in SUPPORTED_KEY_GENERATORS)})",
            field="hoodie.table.keygenerator.class",
        )


def partition_field_kinds(config: TableConfig) -> tuple[str, ...]:
    """SIMPLE or TIMESTAMP for each partition field: the custom key generator reads them
    from ``hoodie.table.partition.fields`` (``field:TYPE``), the timestamp-based one has
    a single TIMESTAMP field."""
    check_key_generator(config)
    fields = config.partition_fields
    if config.key_generator_class == TIMESTAMP_KEY_GENERATOR:
        if len(fields) != 1:
            raise FailedPreconditionError(
                f"value {','.join(fields)!r} must name one field for the timestamp-based "
                "key generator",
                field=PARTITION_FIELDS,
            )
        return (TIMESTAMP,)
    if config.key_generator_class != CUSTOM_KEY_GENERATOR:
        return (SIMPLE,) * len(fields)
    declared = dict(config.properties).get(PARTITION_FIELDS, "")
    kinds = tuple(part.partition(":")[2].strip().upper() for part in declared.split(",") if part)
    if len(kinds) != len(fields) or not set(kinds) <= {SIMPLE, TIMESTAMP}:
        raise FailedPreconditionError(
            f"value {declared!r} must give each field a type, field:SIMPLE or "
            "field:TIMESTAMP, for the custom key generator",
            field=PARTITION_FIELDS,
        )
    return kinds


def check_key_type(field: pa.Field) -> None:
    """Record key and partition fields must have a type Hudi turns into a stable string."""
    kind = field.type
    if not (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_integer(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_date32(kind)
    ):
        raise InvalidArgumentError(
            f"type {kind} cannot be a record key or partition field "
            "(use string, integer, boolean or date)",
            field=field.name,
        )


def _as_string(table: pa.Table, name: str) -> pa.Array:
    if name not in table.column_names:
        raise InvalidArgumentError("column is missing from the data", field=name)
    check_key_type(table.schema.field(name))
    column = table.column(name).combine_chunks()
    return column if pa.types.is_string(column.type) else pc.cast(column, pa.string())


def _url_encode(values: pa.Array) -> pa.Array:
    """URL-encode the distinct values only (few per batch), then map back."""
    unique = pc.unique(values)
    encoded = pa.array(
        [escape_partition_value(value) for value in unique.to_pylist()], type=pa.string()
    )
    return pc.take(encoded, pc.index_in(values, value_set=unique))
