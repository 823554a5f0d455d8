"""Appending to file slices of a merge-on-read table from a task: per slice a new log file
holding a data block of the updated records (Parquet or Avro, ``log_block_format``) and a
delete block of the deleted keys, as Hudi's HoodieAppendHandle writes them. Nothing of the
base file is read or rewritten.

Log files are never appended to in place (S3 has no append): each write makes a new one.
On table version 6 its name carries the slice's base instant and the next version in the
slice (one listing of the partition finds it); on 8 and 9 it carries the deltacommit's own
instant, version 1. The markers come first (APPEND on 6, CREATE on 8 and 9, as Hudi's), all
of a task's log files in one call, then the check that the instant is still inflight, then
the files, each written whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from tidemark.jobs.context import WriteContext
from tidemark.jobs.task import TaskIdentity
from tidemark.storage import Storage
from tidemark.table.files.file_names import join_path
from tidemark.table.files.view import BaseFile
from tidemark.table.logfiles.data_blocks import data_block
from tidemark.table.logfiles.delete_blocks import DeleteRecord, delete_block
from tidemark.table.logfiles.file_names import (
    FIRST_VERSION,
    LogFileName,
    log_file_instant,
    log_file_name,
    names_slice_by_base_instant,
    next_log_file_name,
)
from tidemark.table.logfiles.framing import LogBlock, write_log_file
from tidemark.table.metadata.commit import WriteStat
from tidemark.table.records.keys import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME, commit_seqnos
from tidemark.table.records.schema import arrow_to_avro_schema, with_meta_fields
from tidemark.table.timeline.layout1 import require_inflight
from tidemark.table.writes.markers import IOType, MarkerWriter


@dataclass(frozen=True)
class SliceAppend:
    """What a task appends to the latest slice of ``base``'s file group: ``updates`` (rows
    of the write's file schema, keys known to be in the group), deletes of
    ``deleted_keys``, the updates numbered from ``seq_start``."""

    base: BaseFile
    updates: pa.Table
    deleted_keys: pa.Array
    seq_start: int


def append_to_slices(
    *,
    storage: Storage,
    markers: MarkerWriter,
    task: TaskIdentity,
    context: WriteContext,
    appends: Sequence[SliceAppend],
) -> list[WriteStat]:
    """A log file for each of a task's ``appends``; their delta write stats. The markers
    of all of them are created in one call (one wait for the service's flush, not one per
    log file) and the instant checked inflight once, before any file is written."""
    config = context.config
    named_by_base = names_slice_by_base_instant(config.table_version)
    names = _log_file_names(storage, task, context, [append.base for append in appends])
    io_type = IOType.APPEND if named_by_base else IOType.CREATE
    markers.create_many(
        [
            (append.base.partition_path, name.name, io_type)
            for append, name in zip(appends, names, strict=True)
        ]
    )
    require_inflight(storage, context.instant, context.action)
    schema_json = with_meta_fields(arrow_to_avro_schema(context.file_schema, config.name))
    return [
        _write_log_file(storage, task, context, append, name, schema_json)
        for append, name in zip(appends, names, strict=True)
    ]


def _log_file_names(
    storage: Storage, task: TaskIdentity, context: WriteContext, bases: Sequence[BaseFile]
) -> list[LogFileName]:
    """The new log file of each base's file group: on version 6 the next version in its
    slice (one listing per partition), on 8 and 9 version 1 under the instant."""
    version = context.config.table_version
    if not names_slice_by_base_instant(version):
        return [
            log_file_name(base.file_id, context.instant, FIRST_VERSION, task.write_token)
            for base in bases
        ]
    listings = {
        partition: [info.path for info in storage.list_dir(partition).files]
        for partition in {base.partition_path for base in bases}
    }
    return [
        next_log_file_name(
            listings[base.partition_path],
            base.file_id,
            log_file_instant(version, base.instant, context.instant),
            task.write_token,
        )
        for base in bases
    ]


def _write_log_file(
    storage: Storage,
    task: TaskIdentity,
    context: WriteContext,
    append: SliceAppend,
    name: LogFileName,
    schema_json: str,
) -> WriteStat:
    instant, base, updates = context.instant, append.base, append.updates
    blocks: list[LogBlock] = []
    if updates.num_rows:
        stamped = _stamped(updates, instant, base.file_id, task, append.seq_start)
        blocks.append(data_block(context.log_block_format, instant, schema_json, stamped))
    if len(append.deleted_keys):
        keys = append.deleted_keys.to_pylist()
        deletes = (DeleteRecord(key, base.partition_path) for key in keys)
        blocks.append(delete_block(instant, deletes, schema_json))
    path = join_path(base.partition_path, name.name)
    size = write_log_file(storage, path, blocks)
    return WriteStat(
        file_id=base.file_id,
        path=path,
        prev_commit=base.instant,
        num_writes=updates.num_rows,
        num_deletes=len(append.deleted_keys),
        num_update_writes=updates.num_rows,
        num_inserts=0,
        total_write_bytes=size,
        file_size_in_bytes=size,
        partition_path=base.partition_path,
        log_version=name.version,
        log_offset=0,
        base_file=base.path.rpartition("/")[2],
        log_files=(name.name,),
    )


def _stamped(
    rows: pa.Table, instant: str, file_id: str, task: TaskIdentity, seq_start: int
) -> pa.Table:
    """Hudi's meta columns of appended records: this instant, a fresh seqno, and the file
    id as the file name (a log record names its file group, not a file)."""
    count = rows.num_rows
    for column, values in (
        (COMMIT_TIME, pa.repeat(pa.scalar(instant), count)),
        (COMMIT_SEQNO, commit_seqnos(instant, task.partition_id, count, seq_start)),
        (FILE_NAME, pa.repeat(pa.scalar(file_id), count)),
    ):
        rows = rows.set_column(rows.schema.get_field_index(column), column, values)
    return rows
