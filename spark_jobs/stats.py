"""Write stats travel from tasks to the driver as Arrow rows with this schema."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa
from pyspark.sql import Row

from tidemark.table.metadata.commit import WriteStat

STAT_FIELDS: tuple[tuple[str, pa.DataType], ...] = (
    ("file_id", pa.string()),
    ("path", pa.string()),
    ("prev_commit", pa.string()),
    ("num_writes", pa.int64()),
    ("num_deletes", pa.int64()),
    ("num_update_writes", pa.int64()),
    ("num_inserts", pa.int64()),
    ("total_write_bytes", pa.int64()),
    ("file_size_in_bytes", pa.int64()),
    ("partition_path", pa.string()),
    ("min_record_key", pa.string()),
    ("max_record_key", pa.string()),
    ("log_version", pa.int64()),
    ("log_offset", pa.int64()),
    ("base_file", pa.string()),
    ("log_files", pa.list_(pa.string())),
)
STAT_SCHEMA = pa.schema(STAT_FIELDS)
_DDL_TYPES = {pa.string(): "string", pa.int64(): "bigint", pa.list_(pa.string()): "array<string>"}
STAT_DDL = ", ".join(f"{name} {_DDL_TYPES[kind]}" for name, kind in STAT_FIELDS)


def stats_batch(stats: Iterable[WriteStat]) -> pa.RecordBatch:
    rows = [{name: getattr(stat, name) for name, _ in STAT_FIELDS} for stat in stats]
    return pa.RecordBatch.from_pylist(rows, schema=STAT_SCHEMA)


def stats_from_rows(rows: Iterable[Row]) -> list[WriteStat]:
    return [_stat({name: row[name] for name, _ in STAT_FIELDS}) for row in rows]


def _stat(fields: dict[str, Any]) -> WriteStat:
    """A stat from its row (a list column arrives as a list; the stat holds a tuple)."""
    if fields["log_files"] is not None:
        fields["log_files"] = tuple(fields["log_files"])
    return WriteStat(**fields)
