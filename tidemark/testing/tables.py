"""Commits written with pyarrow instead of Spark, for benchmarks and tests of the table
services that need real file groups on a real timeline quickly (the planner's, the
load benchmark's)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from tidemark.table import HoodieTable
from tidemark.table.files.file_names import base_file_name, join_path, new_file_id, write_token
from tidemark.table.files.view import BaseFile
from tidemark.table.metadata.actions import COMMIT
from tidemark.table.metadata.commit import NULL_COMMIT, CommitMetadata, WriteStat
from tidemark.table.records.keys import META_COLUMNS, record_keys, with_meta_columns
from tidemark.table.timeline.instant import new_instant_time
from tidemark.table.writes.commit import complete_commit
from tidemark.table.writes.markers import DirectMarkerWriter, IOType, StorageMarkerReader


def commit_file_groups(
    table: HoodieTable, files: Sequence[tuple[str, pa.Table]], operation: str = "BULK_INSERT"
) -> str:
    """One commit adding a new file group per ``(partition path, rows)`` of ``files``
    (rows without meta columns, all of that partition), with direct markers as a Spark
    task writes them; returns the instant."""
    return _commit(table, [(partition, None, data) for partition, data in files], operation)


def rewrite_file_groups(
    table: HoodieTable, files: Sequence[tuple[BaseFile, pa.Table]], operation: str = "UPSERT"
) -> str:
    """One commit writing a new slice of each file group of ``files`` holding the given
    rows (without meta columns), as a copy-on-write upsert does; returns the instant."""
    return _commit(table, [(f.partition_path, f, data) for f, data in files], operation)


def data_columns(rows: pa.Table) -> pa.Table:
    """``rows`` without Hudi's meta columns (to write them again)."""
    return rows.drop_columns([name for name in META_COLUMNS if name in rows.column_names])


def _commit(
    table: HoodieTable,
    files: Sequence[tuple[str, BaseFile | None, pa.Table]],
    operation: str,
) -> str:
    instant = new_instant_time(after=table.timeline.latest_timestamp())
    table.timeline.create_requested(instant, COMMIT)
    table.timeline.transition_inflight(instant, COMMIT)
    markers = DirectMarkerWriter(table.storage, instant)
    stats = []
    for task, (partition, previous, data) in enumerate(files):
        file_id = previous.file_id if previous else new_file_id()
        name = base_file_name(file_id, write_token(task, 1, 0), instant)
        markers.create(partition, name, IOType.MERGE if previous else IOType.CREATE)
        rows = with_meta_columns(
            data,
            instant=instant,
            task_partition_id=task,
            keys=record_keys(data, table.config),
            partition_path=partition,
            file_name=name,
        )
        path = join_path(partition, name)
        with table.storage.open_output(path) as out:
            pq.write_table(rows, out)
        size = table.storage.size(path)
        count = data.num_rows
        inserts, updates = (0, count) if previous else (count, 0)
        prev_commit = previous.instant if previous else NULL_COMMIT
        stats.append(
            WriteStat(file_id, path, prev_commit, count, 0, updates, inserts, size, size, partition)
        )
    metadata = CommitMetadata.from_write_stats(stats, operation, table.config.avro_schema)
    complete_commit(table, instant, COMMIT, metadata, StorageMarkerReader(table.storage))
    return instant
