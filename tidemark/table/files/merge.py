"""Merging a file slice: its base file's rows with the records and deletes of its committed
log blocks, keyed by record key, as Hudi's merged log record reader does.

Versions of a key are taken in the order written: the base file, then each block. On a
table ordered by event time (``TableConfig.orders_by_event_time``, as upserts are) the
version with the greater ordering value wins and a tie goes to the later one; otherwise
the later version wins (commit-time ordering). A
delete removes its key unless it carries an ordering value below the stored one; the value
Spark SQL's DELETE writes (``IntWrapper(0)``, the natural order) deletes regardless.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tidemark.storage.base import Storage
from tidemark.table.files.slices import committed_blocks
from tidemark.table.files.view import FileSlice
from tidemark.table.logfiles.data_blocks import data_block_table
from tidemark.table.logfiles.delete_blocks import DELETE_REGARDLESS, deleted_records
from tidemark.table.logfiles.framing import BlockType, LogBlock, read_log_file
from tidemark.table.properties.config import TableConfig
from tidemark.table.records.keys import RECORD_KEY
from tidemark.table.records.schema import conform

__all__ = ["merge_slice", "read_slice"]


def read_slice(
    storage: Storage,
    file_slice: FileSlice,
    completed: Mapping[str, str],
    config: TableConfig,
    schema: pa.Schema,
) -> pa.Table:
    """A file slice's rows as a snapshot reads them: its base file (``schema``'s columns;
    none for a slice of logs only) merged with the blocks of its log files that
    deltacommits in ``completed`` wrote."""
    if file_slice.base is None:
        base_rows = schema.empty_table()
    else:
        with storage.open_input(file_slice.base.path) as stream:
            base_rows = pq.read_table(stream, schema=schema)
    if not file_slice.logs:
        return base_rows
    blocks = committed_blocks(
        (read_log_file(storage, log.path) for log in file_slice.logs), completed
    )
    ordering = config.precombine_field if config.orders_by_event_time else None
    return merge_slice(base_rows, blocks, ordering)


def merge_slice(
    base_rows: pa.Table, blocks: Sequence[LogBlock], ordering_field: str | None
) -> pa.Table:
    """``base_rows`` (the slice's base file, meta columns included; empty for a slice of
    logs only) merged with ``blocks`` (``slices.committed_blocks``), in ``base_rows``'s
    schema."""
    schema = base_rows.schema
    versions: list[pa.Table] = [base_rows]
    deletes: list[tuple[int, str, Any]] = []  # (position, key, ordering value or None)
    for block in blocks:
        if block.block_type == BlockType.DELETE:
            position = len(versions)
            deletes.extend(
                (position, record.record_key, _delete_ordering(record.ordering))
                for record in deleted_records(block)
            )
            versions.append(schema.empty_table())
        else:
            versions.append(conform(data_block_table(block), schema))
    return _latest(versions, deletes, ordering_field)


def _latest(
    versions: list[pa.Table], deletes: list[tuple[int, str, Any]], ordering_field: str | None
) -> pa.Table:
    """The winning row of each key over ``versions`` (position = index in the list)."""
    winners: dict[str, tuple[int, int, Any]] = {}  # key -> (position, row, ordering)
    for position, rows in enumerate(versions):
        keys = rows.column(RECORD_KEY).to_pylist()
        orderings = (
            rows.column(ordering_field).to_pylist() if ordering_field else [None] * len(keys)
        )
        for row, (key, ordering) in enumerate(zip(keys, orderings, strict=True)):
            held = winners.get(key)
            if held is None or not _older(ordering, held[2], ordering_field):
                winners[key] = (position, row, ordering)
    for position, key, ordering in deletes:
        held = winners.get(key)
        if held is None or held[0] > position:
            continue
        if ordering is None or not _older(ordering, held[2], ordering_field):
            del winners[key]
    pieces = []
    for position, rows in enumerate(versions):
        taken = sorted(row for held_at, row, _ in winners.values() if held_at == position)
        if taken:
            pieces.append(rows.take(pa.array(taken, pa.int64())))
    if not pieces:
        return versions[0].schema.empty_table()
    merged = pa.concat_tables(pieces)
    return merged.take(pc.sort_indices(merged, [(RECORD_KEY, "ascending")]))


def _older(ordering: Any, held: Any, ordering_field: str | None) -> bool:
    """Whether a later version with ``ordering`` loses to the held one."""
    if ordering_field is None or ordering is None or held is None:
        return False
    return bool(ordering < held)


def _delete_ordering(ordering: Any) -> Any:
    """The ordering value a delete is compared with; None deletes regardless."""
    if ordering is None or ordering == DELETE_REGARDLESS:
        return None
    return ordering.value
