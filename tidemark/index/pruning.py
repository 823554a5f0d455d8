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

import threading
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import structlog

from tidemark.errors import NotFoundError, TidemarkError
from tidemark.index import layout
from tidemark.index.block_cache import BlockCache
from tidemark.index.record_index import RecordIndex
from tidemark.storage.base import Storage
from tidemark.table import HoodieTable
from tidemark.table.files import column_stats
from tidemark.table.files.query_types import SNAPSHOT, queried_slices
from tidemark.table.files.reader import Locator, files_holding, groups_holding, snapshot_schema
from tidemark.table.files.view import BaseFile, FileSlice
from tidemark.table.filters import partitions
from tidemark.table.filters.expression import BoundFilter, Filter, bind
from tidemark.table.filters.literals import NO_SESSION_TIME_ZONE
from tidemark.table.filters.record_keys import keys_of

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
    """The files a read opens, the snapshot's schema (meta columns first) and the bound
    filters the rows must still meet; ``pruned`` says how many files each step left, for
    logs and benchmarks."""

    uri: str
    schema: pa.Schema
    filters: BoundFilter
    files: list[BaseFile]
    pruned: dict[str, int] = field(default_factory=dict)
    slices: list[FileSlice] = field(default_factory=list)
    """Merge-on-read slices with committed logs: read merged (``files.merge.read_slice``),
    never as their base files, and never pruned by the base files' statistics."""
    deltacommits: dict[str, str] = field(default_factory=dict)
    """Requested -> completion time of the deltacommits the slices' blocks may come from."""
    keys: frozenset[str] | None = None
    """The record keys every row read must have (a lookup, or filters naming every record
    key field): the slices are merged for these keys only."""


def plan_snapshot(
    table: HoodieTable,
    filters: Sequence[Filter] = (),
    *,
    as_of: str | None = None,
    keys: Collection[str] | None = None,
    time_zone: str = NO_SESSION_TIME_ZONE,
    query_type: str = SNAPSHOT,
) -> SnapshotPlan:
    """The base files of the snapshot at ``as_of`` (default latest) that may hold rows
    meeting ``filters`` (``(column, op, value)``, as ``tidemark read --where``) and, with
    ``keys``, having one of those record keys. The record index prunes only the latest
    snapshot: it places keys where they are now, and a key clustered or moved since
    ``as_of`` would be missed. Zone-less timestamps in filters are in ``time_zone``.
    ``query_type`` (``query_types.QUERY_TYPES``): a ``read_optimized`` plan has no merged
    slices, every latest base file is in ``files``, its logs ignored."""
    schema = snapshot_schema(table, as_of)
    bound = bind(
        filters, schema, partition_fields=table.config.partition_fields, time_zone=time_zone
    )
    view = table.view(as_of)
    listed = queried_slices(view, partitions.partitions_to_list(bound, table.config), query_type)
    pruned = {"listed": len(listed)}
    matching = {
        path
        for path in {s.partition_path for s in listed}
        if partitions.may_hold(bound, path, table.config)
    }
    listed = [s for s in listed if s.partition_path in matching]
    slices = [s for s in listed if s.logs]
    files = [s.base for s in listed if s.base is not None and not s.logs]
    pruned["partitions"] = len(files)
    if keys is None:
        keys = keys_of(bound, table.config)
    if keys is not None:
        pruned["keys"] = len(keys)
    if as_of is None and keys is not None:
        holding = groups_holding(set(keys), index_locator(table.storage))
        files = files_holding(table.uri, files, holding)
        slices = [s for s in slices if holding is None or s.file_id in holding]
    pruned["record index"] = len(files)
    pruned["slices"] = len(slices)
    files = column_stats.may_hold(table.storage, files, bound)
    pruned["column stats"] = len(files)
    log.debug("read.planned", table=table.uri, **pruned)
    deltacommits = view.completed_deltacommits() if slices else {}
    merge_keys = None if keys is None else frozenset(keys)
    return SnapshotPlan(table.uri, schema, bound, files, pruned, slices, deltacommits, merge_keys)


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
