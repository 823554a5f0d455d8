"""Names Hudi readers accept: Avro names for tables and columns, folder names for partitions.

Hudi keeps the writer schema as Avro (every commit), so a column or table name that is not an
Avro name makes the table unreadable (hudi-rs: "Invalid field name"). A partition path is a
folder path under the table: each ``/``-separated segment must be a folder name on every
store, never ``.hoodie`` (readers skip it), and no partition may lie inside another one
(readers stop listing at a partition folder). These checks run before anything is written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath

import pyarrow as pa

from tidemark.errors import InvalidArgumentError
from tidemark.table.properties.config import AVRO_NAME, TableConfig
from tidemark.table.records.keys import (
    META_COLUMNS,
    OPERATION,
    TIMESTAMP,
    check_key_generator,
    check_key_type,
    partition_field_kinds,
)

INTERNAL_COLUMN_PREFIX = "_tm_"
"""Columns Tidemark's jobs add while writing (``_tm_bucket``, ...); refused as input."""

MAX_SEGMENT_BYTES = 255
"""The longest file or folder name local file systems (and HDFS) accept."""

_NOT_AVRO_CHAR = re.compile(r"[^A-Za-z0-9_]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_META_FOLDER_PREFIX = ".hoodie"
_SHOWN_CHARS = 40


def is_avro_name(name: str) -> bool:
    return AVRO_NAME.fullmatch(name) is not None


def avro_name(text: str) -> str:
    """Hudi's ``HoodieAvroUtils.sanitizeName``: invalid characters (and an invalid first
    character) become ``__``, as Hudi does for the record name it derives from a table name."""
    if text and not re.match(r"[A-Za-z_]", text[0]):
        text = "__" + text[1:]
    return _NOT_AVRO_CHAR.sub("__", text)


def table_name_from_uri(uri: str) -> str:
    """The default table name: the table folder's name made an Avro name (``café`` ->
    ``caf_``, ``2024-sales`` -> ``t_2024_sales``)."""
    name = _NOT_AVRO_CHAR.sub("_", PurePosixPath(uri.rstrip("/")).name) or "tidemark_table"
    return name if is_avro_name(name) else f"t_{name}"


def check_write_schema(schema: pa.Schema, config: TableConfig) -> None:
    """Column names Hudi readers accept, and key and partition fields of key types."""
    check_key_generator(config)
    check_column_names(schema)
    kinds = dict(zip(config.partition_fields, partition_field_kinds(config), strict=True))
    for name in dict.fromkeys((*config.record_key_fields, *config.partition_fields)):
        if kinds.get(name) != TIMESTAMP:
            check_key_type(schema.field(name))


def check_column_names(schema: pa.Schema) -> None:
    """Every column (and nested struct field) an Avro name; no column that only differs
    from another, or from a Hudi meta column, in case; none with the internal prefix."""
    seen: dict[str, str] = {}
    meta = {name.lower(): name for name in META_COLUMNS}
    for position, field in enumerate(schema, start=1):
        if not field.name:
            raise InvalidArgumentError(
                f"has an empty name ({_neighbours(schema, position)}); name every column",
                field=f"column {position}",
            )
        lowered = field.name.lower()
        if lowered.startswith(INTERNAL_COLUMN_PREFIX):
            raise InvalidArgumentError(
                f"column names starting with {INTERNAL_COLUMN_PREFIX!r} are reserved for "
                "Tidemark's internal columns; rename the column",
                field=field.name,
            )
        if lowered == OPERATION:
            raise InvalidArgumentError(
                "is Hudi's changelog operation column (hoodie.allow.operation.metadata.field), "
                "which copy-on-write tables written by Tidemark do not keep: rename it, or "
                "send deletes as _hoodie_is_deleted = true",
                field=field.name,
            )
        if lowered in meta:
            raise InvalidArgumentError(
                f"column name clashes with Hudi's meta column {meta[lowered]!r}",
                field=field.name,
            )
        if lowered in seen:
            raise InvalidArgumentError(
                f"column name differs from column {seen[lowered]!r} only in case "
                "(Spark and Hive resolve column names ignoring case)",
                field=field.name,
            )
        seen[lowered] = field.name
        _check_field_names(field, field.name)


def _neighbours(schema: pa.Schema, position: int) -> str:
    """Where the ``position``-th (1-based) column stands, by the names around it."""
    before = schema.names[position - 2] if position > 1 else None
    after = schema.names[position] if position < len(schema.names) else None
    return (
        ", ".join(
            f"{side} {name!r}" for side, name in (("after", before), ("before", after)) if name
        )
        or "the only column"
    )


def _check_field_names(field: pa.Field, path: str) -> None:
    if not field.name:
        raise InvalidArgumentError("a struct field has an empty name; name it", field=path)
    if not is_avro_name(field.name):
        raise InvalidArgumentError(
            "column name is not an Avro name (ASCII letters, digits and '_', not starting "
            "with a digit; Hudi readers cannot read the table otherwise); rename the column",
            field=path,
        )
    kind = field.type
    while pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_map(kind):
        kind = kind.item_type if pa.types.is_map(kind) else kind.value_type
    if pa.types.is_struct(kind):
        for index in range(kind.num_fields):
            child = kind.field(index)
            _check_field_names(child, f"{path}.{child.name}")


def check_partition_segment(field: str, value: str, segment: str) -> None:
    """``segment`` is what ``value`` of partition ``field`` becomes in the partition path
    (encoded, maybe ``field=``-prefixed); it may contain ``/`` (several folders)."""
    for name in segment.split("/"):
        problem = _folder_problem(name)
        if problem:
            raise InvalidArgumentError(f"partition value {shown(value)} {problem}", field=field)


def _folder_problem(name: str) -> str | None:
    if name == "":
        return "makes an empty folder name (a leading, trailing or doubled '/')"
    if name in (".", ".."):
        return f"makes a folder named {name!r}, which is no folder"
    if name.startswith(_META_FOLDER_PREFIX):
        return f"makes a folder named {name!r}; names starting with '.hoodie' are Hudi's"
    if _CONTROL.search(name):
        return (
            "contains a control character (a table created with --urlencode-partitions "
            "stores it encoded)"
        )
    if "\\" in name:
        return (
            "contains a backslash (a table created with --urlencode-partitions stores it encoded)"
        )
    size = len(name.encode())
    if size > MAX_SEGMENT_BYTES:
        return f"makes a folder name of {size} bytes (at most {MAX_SEGMENT_BYTES})"
    return None


def check_partition_nesting(new_paths: Mapping[str, str], existing_paths: Iterable[str]) -> None:
    """No partition folder inside another: ``new_paths`` maps each partition path of the
    batch to the partition field to blame; ``existing_paths`` are the table's partitions."""
    everything = set(new_paths) | set(existing_paths)
    for path in sorted(new_paths):
        for outer in _ancestors(path):
            if outer in everything:
                raise InvalidArgumentError(
                    f"partition path {shown(path)} would lie inside partition {shown(outer)} "
                    "(readers never look below a partition folder)",
                    field=new_paths[path],
                )
    for path in sorted(set(existing_paths) - set(new_paths)):
        for outer in _ancestors(path):
            if outer in new_paths:
                raise InvalidArgumentError(
                    f"partition path {shown(outer)} would contain the table's partition "
                    f"{shown(path)} (readers never look below a partition folder)",
                    field=new_paths[outer],
                )


def _ancestors(path: str) -> Iterable[str]:
    parts = path.split("/")
    return ("/".join(parts[:depth]) for depth in range(1, len(parts)))


def shown(value: object) -> str:
    """A value for a one-line message: repr, long ones cut."""
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else f"{text[: _SHOWN_CHARS - 4]}...{text[-1]}"
