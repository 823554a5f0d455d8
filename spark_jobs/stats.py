"""Write stats travel from tasks to the driver as Arrow rows with this schema."""

from __future__ import annotations

from collections.abc import Iterable

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
)
STAT_SCHEMA = pa.schema(STAT_FIELDS)
STAT_DDL = ", ".join(
    f"{name} {'string' if kind == pa.string() else 'bigint'}" for name, kind in STAT_FIELDS
)


def stats_batch(stats: Iterable[WriteStat]) -> pa.RecordBatch:
    rows = [{name: getattr(stat, name) for name, _ in STAT_FIELDS} for stat in stats]
    return pa.RecordBatch.from_pylist(rows, schema=STAT_SCHEMA)


def stats_from_rows(rows: Iterable[Row]) -> list[WriteStat]:
    return [WriteStat(**{name: row[name] for name, _ in STAT_FIELDS}) for row in rows]
