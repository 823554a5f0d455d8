"""Which base files a read opens: a table's snapshot narrowed, before anything is scanned,
by what the driver knows cheaply.

In order: partition filters (``=``/``IN`` on every partition field list only those
partitions; other filters on partition fields drop the partitions whose values cannot
match), the record index (``=``/``IN`` on every record key field, or keys given outright,
keep only the file groups holding them), and column statistics (``.hoodie/.tidemark/
column-stats/``: files whose min/max/null counts prove no row matches). What is left is
scanned whole by the reader, which applies the filters to the rows.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import structlog

from tidemark.errors import InvalidArgumentError, NotFoundError, TidemarkError
from tidemark.index import layout
from tidemark.index.block_cache import BlockCache
from tidemark.index.record_index import RecordIndex
from tidemark.storage.base import Storage
from tidemark.table import HoodieTable
from tidemark.table.files import column_stats
from tidemark.table.files.column_stats import ColumnStats, FileStats
from tidemark.table.files.reader import (
    Filter,
    Locator,
    files_holding,
    keys_from_filters,
    parse_partition_path,
    prepare_filters,
    snapshot_schema,
)
from tidemark.table.files.view import BaseFile
from tidemark.table.records.keys import DEFAULT_PARTITION, partition_paths
from tidemark.table.records.literals import NO_SESSION_TIME_ZONE, literal

READ_COMPACT_AFTER_DELTAS = 4
"""A read that finds a shard of the record index with this many deltas (or deltas as large
as its base: ``record_index.COMPACT_AT_DELTA_SHARE``) compacts them first: every lookup
reads each delta of the shards it asks, and a job's short-lived embedded services never
run the index service's own compaction."""

READ_INDEXES_KEPT = 4
"""Record indexes of this many tables are kept open between reads in a process."""
READ_CACHE_BYTES = 32 << 20
"""Each one keeping this many bytes of opened shard files and decoded blocks."""

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class SnapshotPlan:
    """The files a read opens, the snapshot's schema (meta columns first) and the checked
    filters (values typed like their columns) the rows must still meet; ``pruned`` says
    how many files each step left, for logs and benchmarks."""

    uri: str
    schema: pa.Schema
    filters: list[Filter]
    files: list[BaseFile]
    pruned: dict[str, int] = field(default_factory=dict)


def plan_snapshot(
    table: HoodieTable,
    filters: Sequence[Filter] = (),
    *,
    as_of: str | None = None,
    keys: Collection[str] | None = None,
    time_zone: str = NO_SESSION_TIME_ZONE,
) -> SnapshotPlan:
    """The base files of the snapshot at ``as_of`` (default latest) that may hold rows
    meeting ``filters`` (``(column, op, value)``, as ``tidemark read --where``) and, with
    ``keys``, having one of those record keys. The record index prunes only the latest
    snapshot: it places keys where they are now, and a key clustered or moved since
    ``as_of`` would be missed. Zone-less timestamps in filters are in ``time_zone``."""
    schema = snapshot_schema(table, as_of)
    checked = prepare_filters(table.config, schema, list(filters), time_zone)
    for column, _, _ in checked:
        if column not in schema.names:
            raise InvalidArgumentError("no such column in the table", field=column)
    view = table.view(as_of)
    files = view.latest_base_files(_partitions_to_list(table, schema, checked))
    pruned = {"listed": len(files)}
    matching = {
        path
        for path in {f.partition_path for f in files}
        if column_stats.may_match(_partition_stats(table, schema, path), checked)
    }
    files = [f for f in files if f.partition_path in matching]
    pruned["partitions"] = len(files)
    if keys is None:
        keys = keys_from_filters(table.config, schema, checked)
    if keys is not None:
        pruned["keys"] = len(keys)
    if as_of is None and keys is not None:
        files = files_holding(table.uri, files, set(keys), index_locator(table.storage))
    pruned["record index"] = len(files)
    files = column_stats.may_hold(table.storage, files, checked)
    pruned["column stats"] = len(files)
    log.debug("read.planned", table=table.uri, **pruned)
    return SnapshotPlan(table.uri, schema, checked, files, pruned)


def index_locator(storage: Storage) -> Locator | None:
    """A ``Locator`` over the table's record index as it is now; None for a table without
    one. Before a lookup, an index with ``READ_COMPACT_AFTER_DELTAS`` deltas in a shard,
    or deltas as large as its base, is compacted (unless another compaction is running,
    or the reader may not write: then it is read as is)."""
    try:
        properties = layout.IndexProperties.read(storage)
    except NotFoundError:
        return None
    index = _kept_index(storage, properties)
    index.refresh()

    def locate(keys: set[str]) -> set[str]:
        if not keys:
            return set()
        _compact_piled_up(index)
        located = index.lookup(pa.array(sorted(keys), pa.string()))
        return set(located.column("file_id").drop_null().to_pylist())

    return locate


_kept: OrderedDict[tuple[str, layout.IndexProperties], RecordIndex] = OrderedDict()
_kept_lock = threading.Lock()


def _kept_index(storage: Storage, properties: layout.IndexProperties) -> RecordIndex:
    """The index of the table at ``storage.uri`` kept between reads (the last
    ``READ_INDEXES_KEPT`` tables read), over the storage of the read that first opened it,
    with the shard files it opened and the blocks it decoded (a shard file never changes
    under its name; an index rebuilt has other properties, so another entry). It is
    ``single_use``: each read asks different keys, so only the blocks they need are
    decoded, deltas never merged. Its view of the timeline and deltas is re-read by every
    plan (``refresh``)."""
    key = (storage.uri, properties)
    with _kept_lock:
        index = _kept.pop(key, None)
        if index is None:
            index = RecordIndex(storage, properties, BlockCache(READ_CACHE_BYTES), single_use=True)
        _kept[key] = index
        while len(_kept) > READ_INDEXES_KEPT:
            _kept.popitem(last=False)
        return index


def _compact_piled_up(index: RecordIndex) -> None:
    if not index.needs_compaction(READ_COMPACT_AFTER_DELTAS):
        return
    try:
        done = index.compact(1, owner="read")
        log.info("read.index_compacted", shards=len(done.shards), deltas=done.deltas_folded)
    except (TidemarkError, OSError) as error:  # ConflictError: another one runs
        log.warning("read.index_not_compacted", error=str(error))


def _partitions_to_list(
    table: HoodieTable, schema: pa.Schema, filters: list[Filter]
) -> list[str] | None:
    """The partition paths to list when ``=``/``IN`` name values for every partition field
    (every combination), else None (list them all)."""
    fields = table.config.partition_fields
    wanted: dict[str, list[object]] = {}
    for column, op, value in filters:
        if column in fields and op in ("=", "in") and column not in wanted:
            wanted[column] = list(value) if op == "in" else [value]
    if not fields or set(wanted) != set(fields) or any(None in v for v in wanted.values()):
        return None
    combinations = list(itertools.product(*(wanted[name] for name in fields)))
    values = pa.table(
        {
            name: pa.array([c[i] for c in combinations], type=schema.field(name).type)
            for i, name in enumerate(fields)
        }
    )
    try:
        return sorted(set(partition_paths(values, table.config).to_pylist()))
    except TidemarkError:
        return None


def _partition_stats(table: HoodieTable, schema: pa.Schema, partition_path: str) -> FileStats:
    """A partition's values as statistics (each its own min and max) for the values its
    path encodes; none for a path that cannot be decoded (time-based key generators) or
    the default partition (null or empty: either may be stored)."""
    decoded = parse_partition_path(partition_path, table.config) or {}
    columns: dict[str, ColumnStats] = {}
    for name, text in decoded.items():
        if text == DEFAULT_PARTITION or name not in schema.names:
            continue
        try:
            value = literal(text, schema.field(name).type, name)
        except InvalidArgumentError:
            continue
        columns[name] = ColumnStats(value, value, 0)
    return FileStats(1, columns)
