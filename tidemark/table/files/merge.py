"""Merging a file slice: its base file's rows with the records and deletes of its committed
log blocks, keyed by record key, as Hudi's merged log record reader does.

Most of a slice's rows are base rows no block names: they pass through in one vectorised
filter, and only the versions of the keys the blocks (or a repeated base key) name are
merged row by row. A read of some keys (a lookup) skips the base file's row groups whose key
statistics exclude them and drops the other keys' log records before the merge.

Versions of a key are taken in the order written: the base file, then each block. On a
table ordered by event time (``TableConfig.orders_by_event_time``, as upserts are) the
version with the greater ordering value wins and a tie goes to the later one; otherwise
the later version wins (commit-time ordering). A
delete removes its key unless it carries an ordering value below the stored one; the value
Spark SQL's DELETE writes (``IntWrapper(0)``, the natural order) deletes regardless.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

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

_PARQUET = pads.ParquetFileFormat()


def read_slice(
    storage: Storage,
    file_slice: FileSlice,
    completed: Mapping[str, str],
    config: TableConfig,
    schema: pa.Schema,
    keys: Collection[str] | None = None,
    *,
    by_key: bool = False,
) -> pa.Table:
    """A file slice's rows as a snapshot reads them: its base file (``schema``'s columns;
    none for a slice of logs only) merged with the blocks of its log files that
    deltacommits in ``completed`` wrote. With ``keys`` (record keys), only their rows (all
    rows on a table of virtual keys, whose record key column is not written). ``by_key``:
    ordered by record key (``merge_slice``)."""
    if not config.populate_meta_fields:
        keys = None
    base_rows = _base_rows(storage, file_slice, schema, _key_array(keys))
    if not file_slice.logs:
        return _ordered(base_rows) if by_key else base_rows
    blocks = committed_blocks(
        (read_log_file(storage, log.path) for log in file_slice.logs), completed
    )
    ordering = config.precombine_field if config.orders_by_event_time else None
    return merge_slice(base_rows, blocks, ordering, keys, by_key=by_key)


def _base_rows(
    storage: Storage, file_slice: FileSlice, schema: pa.Schema, wanted: pa.Array | None
) -> pa.Table:
    """The slice's base file as ``schema``, read once; with ``wanted`` keys only their rows,
    row groups whose key statistics exclude them unread."""
    if file_slice.base is None:
        return schema.empty_table()
    with storage.open_input(file_slice.base.path) as stream:
        fragment = _PARQUET.make_fragment(stream)
        kept = None if wanted is None else pc.field(RECORD_KEY).isin(wanted)
        return fragment.to_table(schema=schema, filter=kept)


def merge_slice(
    base_rows: pa.Table,
    blocks: Sequence[LogBlock],
    ordering_field: str | None,
    keys: Collection[str] | None = None,
    *,
    by_key: bool = False,
) -> pa.Table:
    """``base_rows`` (the slice's base file, meta columns included; empty for a slice of
    logs only) merged with ``blocks`` (``slices.committed_blocks``), in ``base_rows``'s
    schema: the base rows no block names in their order, then the winners of the keys the
    blocks name; with ``by_key``, ordered by record key instead (a rewritten base file's
    key statistics then bound its row groups, as a bulk insert's do; a scan pays no sort).
    With ``keys`` (record keys), only their rows."""
    schema = base_rows.schema
    wanted = _key_array(keys)
    versions: list[pa.Table] = [_of_keys(base_rows, wanted)]
    deletes: list[tuple[int, str, Any]] = []  # (position, key, ordering value or None)
    for block in blocks:
        if block.block_type == BlockType.DELETE:
            position = len(versions)
            deletes.extend(
                (position, record.record_key, _delete_ordering(record.ordering))
                for record in deleted_records(block)
                if keys is None or record.record_key in keys
            )
            versions.append(schema.empty_table())
        else:
            records = data_block_table(block, keys)
            if records.num_rows:  # a lookup's keys are in few blocks
                versions.append(_of_keys(conform(records, schema), wanted))
    merged = _latest(versions, deletes, ordering_field)
    return _ordered(merged) if by_key else merged


def _key_array(keys: Collection[str] | None) -> pa.Array | None:
    return None if keys is None else pa.array(sorted(keys), pa.string())


def _of_keys(rows: pa.Table, wanted: pa.Array | None) -> pa.Table:
    """``rows`` whose record key is one of ``wanted`` (all of them when None)."""
    if wanted is None:
        return rows
    return rows.filter(pc.is_in(rows.column(RECORD_KEY), value_set=wanted))


def _latest(
    versions: list[pa.Table], deletes: list[tuple[int, str, Any]], ordering_field: str | None
) -> pa.Table:
    """The winning row of each key over ``versions`` (position = index in the list): the
    base rows of keys no other version names, and no other base row, pass through whole;
    the versions of the other keys are compared one by one (``_winners``) and follow."""
    base = versions[0]
    contested = _contested_keys(versions, deletes)
    if len(contested) == 0:
        return base
    named = pc.is_in(base.column(RECORD_KEY), value_set=contested)
    untouched = base.filter(pc.invert(named))
    candidates = [base.filter(named), *(_of_keys(rows, contested) for rows in versions[1:])]
    return pa.concat_tables([untouched, _winners(candidates, deletes, ordering_field)])


def _ordered(rows: pa.Table) -> pa.Table:
    """``rows`` ordered by record key, in one chunk."""
    if rows.num_rows == 0:
        return rows.schema.empty_table()
    rows = rows.combine_chunks()  # a take across chunks costs several times one chunk's
    return rows.take(pc.sort_indices(rows, [(RECORD_KEY, "ascending")]))


def _contested_keys(versions: list[pa.Table], deletes: list[tuple[int, str, Any]]) -> pa.Array:
    """The keys whose winner takes a comparison: those of the blocks (data and deletes),
    and a key the base file holds more than once."""
    base_keys = versions[0].column(RECORD_KEY)
    named = [rows.column(RECORD_KEY) for rows in versions[1:]]
    named.append(pa.chunked_array([pa.array([key for _, key, _ in deletes], pa.string())]))
    if pc.count_distinct(base_keys, mode="all").as_py() < len(base_keys):
        counts = pc.value_counts(base_keys)
        named.append(
            pa.chunked_array([counts.field("values").filter(pc.greater(counts.field("counts"), 1))])
        )
    return pc.unique(pa.chunked_array(named, pa.string()))


def _winners(
    versions: list[pa.Table], deletes: list[tuple[int, str, Any]], ordering_field: str | None
) -> pa.Table:
    """The winning row of each key over ``versions``, compared row by row in the order
    written."""
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
    taken: dict[int, list[int]] = {}
    for position, row, _ in winners.values():
        taken.setdefault(position, []).append(row)
    pieces = [versions[0].schema.empty_table()]
    for position, rows in enumerate(versions):
        if position in taken:
            pieces.append(rows.take(pa.array(sorted(taken[position]), pa.int64())))
    return pa.concat_tables(pieces)


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
