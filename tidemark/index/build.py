"""Building a table's record index: what the Spark bootstrap calls per shard, then once.

``write_base_shard`` writes one shard's base file as of the instant the build read the
table; ``stage_caught_up`` adds what writes that completed meanwhile changed;
``publish_index`` writes ``index.properties`` last, so a build killed half-way
leaves no index (a new build overwrites its stray base files). The shard count follows
Hudi: sized from the record count at ``ESTIMATED_BYTES_PER_ENTRY`` per entry and a
maximum shard size, between 10 and 10000 shards.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pyarrow as pa

from tidemark.checks import require_non_negative, require_positive
from tidemark.errors import InvalidArgumentError
from tidemark.index import layout
from tidemark.index.record_index import delta_files, write_stage
from tidemark.index.shard_file import KIND_BASE, contiguous, write_shard
from tidemark.index.sharding import group_by_shard, shard_of
from tidemark.storage.base import Storage
from tidemark.table.leases.storage_lease import DEFAULT_LOCK_LEASE_S, StorageLease
from tidemark.table.timeline.instant import validate_instant_time

MIN_SHARDS = 10
MAX_SHARDS = 10000
NO_COMMIT = "19700101000000000"
"""The ``as_of`` of an index built before the table's first commit: earlier than every
instant, so every later commit's changes count."""
MAX_SHARD_BYTES = 1 << 30
ESTIMATED_BYTES_PER_ENTRY = 48
"""Hudi's sizing estimate; our files are smaller, so shards stay well under the maximum."""
GROWTH_FACTOR = 2.0
"""Room for the table to grow before shards reach the maximum size (Hudi's factor)."""


@dataclass(frozen=True)
class BuildStatus:
    """A table's index as the service's BuildStatus answers it and its clients read it."""

    exists: bool
    shards: int
    as_of: str
    build_in_progress: bool
    format_version: int


def shard_count_for(records: int, max_shard_bytes: int = MAX_SHARD_BYTES) -> int:
    """Shards for ``records`` entries, as Hudi sizes its record index."""
    require_non_negative("records", records)
    require_positive("max_shard_bytes", max_shard_bytes)
    needed = math.ceil(records * ESTIMATED_BYTES_PER_ENTRY * GROWTH_FACTOR / max_shard_bytes)
    return min(MAX_SHARDS, max(MIN_SHARDS, needed))


def write_base_shard(
    storage: Storage,
    shard: int,
    num_shards: int,
    keys: pa.Array,
    partitions: pa.Array,
    file_ids: pa.Array,
    instants: pa.Array,
    as_of: str,
) -> int:
    """Write shard ``shard``'s base file (the caller routed the keys with ``shard_of``);
    returns its size in bytes. Idempotent: a retried task writes the same file."""
    validate_instant_time(as_of, field="as_of")
    if not 0 <= shard < num_shards:
        raise InvalidArgumentError(f"{shard} is not in [0, {num_shards})", field="shard")
    data = write_shard(keys, partitions, file_ids, instants, kind=KIND_BASE, as_of=as_of)
    storage.write(layout.base_path(shard, as_of), data)
    return len(data)


def write_empty_shards(storage: Storage, shards: Iterable[int], num_shards: int, as_of: str) -> int:
    """Base files without an entry for ``shards``; returns their bytes."""
    empty = pa.array([], pa.string())
    return sum(
        write_base_shard(storage, shard, num_shards, empty, empty, empty, empty, as_of)
        for shard in shards
    )


def create_empty_index(storage: Storage, num_shards: int) -> None:
    """A record index without an entry, as of ``NO_COMMIT`` (earlier than every instant),
    for a table without a commit: its writes fill it, as Hudi's record index enabled on a
    new table."""
    write_empty_shards(storage, range(num_shards), num_shards, NO_COMMIT)
    publish_index(storage, num_shards, NO_COMMIT)


def publish_index(storage: Storage, num_shards: int, as_of: str) -> None:
    """Write ``index.properties`` once every shard's base file exists (the caller's
    job); from then on the table has a record index as of ``as_of``."""
    validate_instant_time(as_of, field="as_of")
    require_positive("num_shards", num_shards)
    storage.write(layout.PROPERTIES_PATH, layout.IndexProperties(num_shards, as_of).to_bytes())


def build_lease(
    storage: Storage,
    owner: str,
    lease_s: float = DEFAULT_LOCK_LEASE_S,
    on_lost: Callable[[], None] | None = None,
) -> StorageLease:
    """The lease a running build holds (``layout.BUILD_LEASE_DIR``)."""
    return StorageLease(
        storage,
        owner,
        lease_s,
        on_lost=on_lost,
        lock_dir=layout.BUILD_LEASE_DIR,
        subject="record index build",
    )


def index_building(storage: Storage) -> bool:
    """A build of the table's record index is under way (its lease is live)."""
    return build_lease(storage, "build-check").live_lease() is not None


def stage_caught_up(storage: Storage, num_shards: int, instant: str, changes: pa.Table) -> None:
    """Before ``publish_index``: the changes of the writes that completed while the bases
    were built, as one delta of the newest of them (``instant``, completed, so visible
    at once)."""
    staged = delta_files(instant, changes, num_shards)
    if staged is not None:
        write_stage(storage, *staged)


def build_index(
    storage: Storage,
    keys: pa.Array,
    partitions: pa.Array,
    file_ids: pa.Array,
    instants: pa.Array,
    *,
    as_of: str,
    num_shards: int | None = None,
) -> int:
    """The whole build in this process (small tables, tests, benchmarks): route keys to
    shards, write every shard's base, publish. Returns the shard count."""
    shards = num_shards or shard_count_for(len(keys))
    order, bounds = group_by_shard(shard_of(keys, shards), shards)
    for shard in range(shards):
        rows = pa.array(order[bounds[shard] : bounds[shard + 1]])
        key, partition, file_id, instant = (
            contiguous(column).take(rows) for column in (keys, partitions, file_ids, instants)
        )
        write_base_shard(storage, shard, shards, key, partition, file_id, instant, as_of)
    publish_index(storage, shards, as_of)
    return shards
