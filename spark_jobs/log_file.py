"""Appending to one file slice of a merge-on-read table from a task: a new log file holding
a data block of the updated records and a delete block of the deleted keys, as Hudi's
HoodieAppendHandle writes them. Nothing of the base file is read or rewritten.

Log files are never appended to in place (S3 has no append): each write makes a new one.
On table version 6 its name carries the slice's base instant and the next version in the
slice (one listing of the partition finds it); on 8 and 9 it carries the deltacommit's own
instant, version 1. The marker comes first (APPEND on 6, CREATE on 8 and 9, as Hudi's), then
the check that the instant is still inflight, then the file, written whole.
"""

from __future__ import annotations

import pyarrow as pa

from tidemark.jobs.context import WriteContext
from tidemark.jobs.task import TaskIdentity
from tidemark.storage import Storage
from tidemark.table.files.file_names import join_path
from tidemark.table.files.view import BaseFile
from tidemark.table.logfiles.data_blocks import arrow_records, avro_data_block
from tidemark.table.logfiles.delete_blocks import DeleteRecord, delete_block
from tidemark.table.logfiles.file_names import (
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


def append_to_slice(
    *,
    storage: Storage,
    markers: MarkerWriter,
    task: TaskIdentity,
    context: WriteContext,
    base: BaseFile,
    updates: pa.Table,
    deleted_keys: pa.Array,
    seq_start: int,
) -> WriteStat:
    """Append ``updates`` (rows of ``context.file_schema``, keys known to be in the file
    group) and deletes of ``deleted_keys`` to the latest slice of ``base``'s file group;
    the delta write stat of the new log file."""
    instant = context.instant
    config = context.config
    named_by_base = names_slice_by_base_instant(config.table_version)
    name_instant = log_file_instant(config.table_version, base.instant, instant)
    if named_by_base:
        listing = [info.path for info in storage.list_dir(base.partition_path).files]
        name = next_log_file_name(listing, base.file_id, name_instant, task.write_token)
    else:
        name = log_file_name(base.file_id, name_instant, 1, task.write_token)
    path = join_path(base.partition_path, name.name)
    io_type = IOType.APPEND if named_by_base else IOType.CREATE
    markers.create(base.partition_path, name.name, io_type)
    require_inflight(storage, instant, context.action)
    schema_json = with_meta_fields(arrow_to_avro_schema(context.file_schema, config.name))
    blocks: list[LogBlock] = []
    if updates.num_rows:
        stamped = _stamped(updates, instant, base.file_id, task, seq_start)
        blocks.append(avro_data_block(instant, schema_json, arrow_records(stamped)))
    if len(deleted_keys):
        deletes = (DeleteRecord(key, base.partition_path) for key in deleted_keys.to_pylist())
        blocks.append(delete_block(instant, deletes, schema_json))
    size = write_log_file(storage, path, blocks)
    return WriteStat(
        file_id=base.file_id,
        path=path,
        prev_commit=base.instant,
        num_writes=updates.num_rows,
        num_deletes=len(deleted_keys),
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
