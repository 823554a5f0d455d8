"""Writing one Hudi base file from a task: marker first, then a check that the instant is
still inflight (a rollback deletes the inflight file before it reads the markers, so a
fenced writer's task starts no file the rollback cannot see), then Parquet through storage.

Rows arrive with ``_hoodie_record_key``/``_hoodie_partition_path`` already set; this stamps
the other meta columns (new rows get this instant and a fresh seqno, rows carried over from
the previous version keep theirs) and records what the commit's write stat needs. In a
table with virtual keys (``hoodie.populate.meta.fields=false``) every meta column but the
file name is written null, as Hudi does, and the footer carries no record key range.
"""

from __future__ import annotations

from collections.abc import Collection
from types import TracebackType
from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tidemark.jobs.task import TaskIdentity
from tidemark.storage import Storage
from tidemark.table import HoodieTable
from tidemark.table.files.file_names import base_file_name, join_path
from tidemark.table.metadata.commit import NULL_COMMIT, WriteStat
from tidemark.table.records.keys import (
    COMMIT_SEQNO,
    COMMIT_TIME,
    FILE_NAME,
    PARTITION_PATH,
    RECORD_KEY,
    commit_seqnos,
)
from tidemark.table.records.schema import conform
from tidemark.table.timeline.layout1 import require_inflight
from tidemark.table.writes.markers import IOType, MarkerWriter

COMPRESSION = "snappy"
UNIQUE_COLUMNS = frozenset({COMMIT_SEQNO, RECORD_KEY})
"""Distinct in every row of a file: dictionary-encoding them only costs time."""
VIRTUAL_META = (COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH)
"""Meta columns Hudi leaves null in virtual-key tables (it still writes the file name)."""
MIN_RECORD_KEY = "hoodie_min_record_key"
MAX_RECORD_KEY = "hoodie_max_record_key"


class _CountingSink:
    """Counts bytes handed to the storage stream, so writers can roll over by size."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self.bytes_written = 0
        self.closed = False
        self.discarding = False

    def write(self, data: bytes) -> int:
        if self.discarding:
            return len(data)
        self.bytes_written += len(data)
        return self._stream.write(data)

    def tell(self) -> int:
        return self.bytes_written

    def flush(self) -> None:
        self._stream.flush()

    def close(self) -> None:
        self._stream.close()
        self.closed = True

    def discard(
        self,
        kind: type[BaseException],
        error: BaseException,
        traceback: TracebackType | None,
    ) -> None:
        """Drop the data: the storage stream publishes nothing when left by an error."""
        self._stream.__exit__(kind, error, traceback)
        self.closed = True


class BaseFileWriter:
    """One new base file (a new file group, or a new version of one with the same id);
    ``plain_columns`` are written without a dictionary (Arrow keeps one however many
    values are distinct, until its page limit)."""

    def __init__(
        self,
        *,
        storage: Storage,
        markers: MarkerWriter,
        task: TaskIdentity,
        instant: str,
        action: str,
        partition_path: str,
        file_id: str,
        schema: pa.Schema,
        prev_commit: str = NULL_COMMIT,
        populate_meta_fields: bool = True,
        plain_columns: Collection[str] = UNIQUE_COLUMNS,
    ) -> None:
        self.partition_path = partition_path
        self.file_id = file_id
        self.file_name = base_file_name(file_id, task.write_token, instant)
        self.path = join_path(partition_path, self.file_name)
        self._instant = instant
        self._task = task
        self._schema = schema
        self._prev_commit = prev_commit
        self._populate_meta_fields = populate_meta_fields
        self._storage = storage
        self._rows = 0
        self._new_rows = 0
        self._min_key: str | None = None
        self._max_key: str | None = None
        io_type = IOType.CREATE if prev_commit == NULL_COMMIT else IOType.MERGE
        markers.create(partition_path, self.file_name, io_type)
        require_inflight(storage, instant, action)
        self._sink = _CountingSink(storage.open_output(self.path))
        self._writer = pq.ParquetWriter(
            self._sink,
            schema,
            compression=COMPRESSION,
            use_dictionary=[name for name in schema.names if name not in plain_columns],
        )

    @property
    def bytes_written(self) -> int:
        return self._sink.bytes_written

    @property
    def rows(self) -> int:
        return self._rows

    def write_new(self, rows: pa.Table, seq_start: int) -> None:
        """Rows written by this instant: stamp commit time, seqno and file name."""
        count = rows.num_rows
        stamped = rows.set_column(
            rows.schema.get_field_index(COMMIT_TIME),
            COMMIT_TIME,
            pa.repeat(pa.scalar(self._instant), count),
        ).set_column(
            rows.schema.get_field_index(COMMIT_SEQNO),
            COMMIT_SEQNO,
            commit_seqnos(self._instant, self._task.partition_id, count, seq_start),
        )
        self._new_rows += count
        self._write(stamped)

    def write_carried(self, rows: pa.Table, row_group_rows: int | None = None) -> None:
        """Unchanged rows of the previous version keep their commit time and seqno; in
        row groups of ``row_group_rows`` rows when given (else one, up to Arrow's limit)."""
        self._write(rows, row_group_rows)

    def _write(self, rows: pa.Table, row_group_rows: int | None = None) -> None:
        if rows.num_rows == 0:
            return
        named = rows.set_column(
            rows.schema.get_field_index(FILE_NAME),
            FILE_NAME,
            pa.repeat(pa.scalar(self.file_name), rows.num_rows),
        )
        self._rows += rows.num_rows
        if not self._populate_meta_fields:
            self._writer.write_table(
                conform(named.drop_columns(list(VIRTUAL_META)), self._schema), row_group_rows
            )
            return
        self._writer.write_table(conform(named, self._schema), row_group_rows)
        bounds = pc.min_max(rows.column(RECORD_KEY))
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        self._min_key = low if self._min_key is None or low < self._min_key else self._min_key
        self._max_key = high if self._max_key is None or high > self._max_key else self._max_key

    def close(self, *, num_updates: int = 0, num_deletes: int = 0) -> WriteStat:
        """Finish the file (footer with Hudi's min/max record key) and describe it."""
        if self._min_key is not None and self._max_key is not None:
            self._writer.add_key_value_metadata(
                {MIN_RECORD_KEY: self._min_key, MAX_RECORD_KEY: self._max_key}
            )
        self._writer.close()
        self._sink.close()
        size = self._sink.bytes_written
        return WriteStat(
            file_id=self.file_id,
            path=self.path,
            prev_commit=self._prev_commit,
            num_writes=self._rows,
            num_deletes=num_deletes,
            num_update_writes=num_updates,
            num_inserts=self._new_rows - num_updates,
            total_write_bytes=size,
            file_size_in_bytes=size,
            partition_path=self.partition_path,
            min_record_key=self._min_key,
            max_record_key=self._max_key,
        )

    def __enter__(self) -> BaseFileWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if kind is not None and error is not None and not self._sink.closed:
            self._sink.discarding = True
            self._writer.close()
            self._sink.discard(kind, error, traceback)


def latest_file_schema(table: HoodieTable) -> pa.Schema | None:
    """The newest base file's schema: what every file a write or a compaction adds has."""
    files = table.view().latest_base_files()
    if not files:
        return None
    newest = max(files, key=lambda f: f.instant)
    with table.storage.open_input(newest.path) as stream:
        return pq.read_schema(stream)
