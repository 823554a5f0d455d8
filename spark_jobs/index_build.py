"""Bootstrap a table's record index from its latest file slices, one Spark task per shard.

As of the latest completed instant, read under the table lock, and without the lock from
then on (writers go on; a build lease keeps other builds out): executors read each
latest base file's keys (``tagging.file_keys``: the meta column, or the
key fields in tables with virtual keys), and on merge-on-read tables each slice with log
files merged (``files.merge.read_slice``: a key deleted in a log is not indexed, a key
only in a log is, at its file group), route each key to its shard with Hudi's hash
(``tidemark.index.sharding``), and each shard's task writes its base file
(``tidemark.index.build.write_base_shard``). The driver writes the base files of shards
that received no key; then, under the table lock again, it stages what the writes that
completed meanwhile changed (their write stats name the file groups, deltacommits' too;
their keys are read)
and writes ``index.properties`` last: a build that fails leaves no index (its base files
are deleted), and one that lost its lease publishes nothing. Works on any table the
file-system view reads, Apache Hudi's included. A key found twice is an error naming it
and both locations: the table violates uniqueness and an index could not answer for it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import structlog
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from tidemark import faults
from tidemark.errors import FailedPreconditionError, TidemarkError
from tidemark.index import layout
from tidemark.index.build import (
    NO_COMMIT,
    build_lease,
    publish_index,
    shard_count_for,
    stage_caught_up,
    write_base_shard,
    write_empty_shards,
)
from tidemark.index.record_index import RecordIndex
from tidemark.index.sharding import shard_of
from tidemark.index.wire import CHANGE_COLUMNS, FILE_ID, INSTANT, KEY, LOOKUP_COLUMNS, PARTITION
from tidemark.jobs.errors import run_spark_action
from tidemark.jobs.index_build_options import DEFAULT_BUILD_OPTIONS, IndexBuildOptions
from tidemark.jobs.session import cancellable_jobs, check_executors_import
from tidemark.jobs.stages import StageClock, StageListener
from tidemark.jobs.tagging import (
    FILE_INSTANT,
    OLD_FILE_ID,
    OLD_PARTITION,
    LatestSlices,
    latest_slices,
    slice_keys,
)
from tidemark.jobs.task import storage_for
from tidemark.table import HoodieTable
from tidemark.table.leases.storage_lease import StorageLease
from tidemark.table.leases.table_lock import changing, holding, owner_name
from tidemark.table.metadata.actions import WRITE_ACTIONS
from tidemark.table.plans.clustering import pending_plans
from tidemark.table.properties.config import TableConfig
from tidemark.table.records.keys import RECORD_KEY

log = structlog.get_logger(__name__)

ROLE = "index-build"

_SHARD = "shard"
_ENTRIES_DDL = ", ".join([*(f"{name} string" for name in LOOKUP_COLUMNS), f"{_SHARD} int"])
_WRITTEN_DDL = "shard int, entries long, bytes long"


@dataclass
class BuildResult:
    """What a build wrote: shards, entries (keys), bytes of base files, the instant it is
    as of, and seconds per stage."""

    as_of: str
    shards: int
    entries: int
    bytes: int
    base_files_read: int
    commits_caught_up: int = 0
    """Writes that completed during the build, applied from their write stats."""
    stage_seconds: dict[str, float] = field(default_factory=dict)


def build_index(
    spark: SparkSession,
    table: HoodieTable,
    options: IndexBuildOptions = DEFAULT_BUILD_OPTIONS,
    listener: StageListener | None = None,
) -> BuildResult:
    """Build the record index of ``table`` with ``options.shards`` shards (default: sized
    from the record count as Hudi does). A table with an index is refused unless
    ``options.rebuild`` (then its index is deleted under the lock and built again), and so
    are executors that cannot import tidemark, both before the table is touched. A table
    without a commit gets an empty index that later writes fill. The table lock (waited
    for up to ``options.lock_wait_s``) is held only to read the snapshot and to catch up
    and publish; a build lease keeps other builds out meanwhile."""
    check_build(table, options.rebuild)  # refusals: no lock, table untouched
    check_executors_import(spark)
    clock = StageClock(listener)
    wait_s, lease_s = options.lock_wait_s, options.lock_lease_s
    with cancellable_jobs(spark, f"tidemark-index-build-{uuid.uuid4().hex}") as cancel:
        build = build_lease(table.storage, owner_name(ROLE), lease_s, cancel)
        build.acquire(wait_s)
        with holding(build):
            with changing(table, ROLE, wait_s=wait_s, lease_s=lease_s, merge_on_read=True):
                check_build(table, options.rebuild)  # again under the lock
                table.timeline.reload()
                last = table.timeline.last_completed(WRITE_ACTIONS)
                with clock.stage("list base files"):
                    files = latest_slices(table)
                _delete_index_files(table)  # writes stop staging into an index being rebuilt
            as_of = last.timestamp if last else NO_COMMIT
            publish = _Publish(build, wait_s, clock)
            try:
                return _build(spark, table, files, as_of, options.shards, publish)
            except BaseException:
                if not build.lost.is_set():  # else the files are another build's now
                    _delete_failed_build(table)
                raise


def check_build(table: HoodieTable, rebuild: bool) -> None:
    """A table with a record index is built again only when asked to (``rebuild``); no
    Spark needed: ``tidemark index build`` calls this before starting its session.

    Nor is a table with a clustering plan pending since before its latest commit: the
    index built as of that commit would take the plan's changes, staged under the plan's
    older instant when it runs, for ones its base already holds, and keep pointing the
    moved keys at the replaced file groups."""
    if not rebuild and RecordIndex.exists(table.storage):
        raise FailedPreconditionError(
            f"{table.uri} already has a record index (use --rebuild to build it again)",
            field="table",
        )
    plans = pending_plans(table)
    last = table.timeline.last_completed(WRITE_ACTIONS)
    older = [
        plan.timestamp for plan in plans if last is not None and plan.timestamp < last.timestamp
    ]
    if last is not None and older:
        raise FailedPreconditionError(
            f"clustering plan {older[0]} of {table.uri} is pending since before its latest "
            f"commit {last.timestamp}: run it (tidemark cluster run) or "
            "cancel it (tidemark cluster cancel) before building the record index",
            field="table",
        )


def _build(
    spark: SparkSession,
    table: HoodieTable,
    files: LatestSlices,
    as_of: str,
    shards: int | None,
    publish: _Publish,
) -> BuildResult:
    clock = publish.clock
    entries = _entries(spark, table.uri, table.config, files).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        with clock.stage("read keys"):
            records = run_spark_action(entries.count)
        num_shards = shards if shards is not None else shard_count_for(records)
        with clock.stage(f"write {num_shards} shards"):
            written = run_spark_action(
                entries.mapInArrow(_with_shard(num_shards), _ENTRIES_DDL)
                .groupBy(_SHARD)
                .applyInArrow(_shard_writer(table.uri, num_shards, as_of), _WRITTEN_DDL)
                .collect
            )
    finally:
        entries.unpersist()
    done = {row[_SHARD] for row in written}
    total_bytes = sum(row["bytes"] for row in written)
    missing = sorted(set(range(num_shards)) - done)
    total_bytes += write_empty_shards(table.storage, missing, num_shards, as_of)
    faults.hold_if_requested("index_build_before_publish")
    with publish.clock.stage("catch up and publish"), publish.locked(table):
        caught_up = _catch_up(spark, table, files, as_of, num_shards)
        publish_index(table.storage, num_shards, as_of)
    log.info(
        "index.built",
        table=table.uri,
        as_of=as_of,
        shards=num_shards,
        entries=records,
        caught_up=caught_up,
    )
    return BuildResult(
        as_of=as_of,
        shards=num_shards,
        entries=records,
        bytes=total_bytes,
        base_files_read=len(files),
        commits_caught_up=caught_up,
        stage_seconds=dict(publish.clock.seconds),
    )


@dataclass(frozen=True)
class _Publish:
    """How a build takes the table lock to catch up and publish, fenced by its lease."""

    build: StorageLease
    lock_wait_s: float
    clock: StageClock

    @contextmanager
    def locked(self, table: HoodieTable) -> Iterator[None]:
        with changing(
            table, ROLE, wait_s=self.lock_wait_s, lease_s=self.build.lease_s, merge_on_read=True
        ):
            table.timeline.reload()
            self.build.check()
            yield


def _catch_up(
    spark: SparkSession, table: HoodieTable, files: LatestSlices, as_of: str, shards: int
) -> int:
    """Stage what the writes completed after ``as_of`` changed, read from the file
    groups their write stats name (and the groups they replaced): every key of those
    groups' latest files at its group, a tombstone for every key those groups held at
    ``as_of`` and hold no more. Returns how many writes that was."""
    later = [i for i in table.timeline.completed(WRITE_ACTIONS) if i.timestamp > as_of]
    if not later:
        return 0
    touched: set[tuple[str, str]] = set()
    for instant in later:
        metadata = table.timeline.read_metadata(instant)
        touched |= {(s.partition_path, s.file_id) for s in metadata.write_stats}
        touched |= {
            (partition, file_id)
            for partition, file_ids in metadata.partition_to_replace_file_ids.items()
            for file_id in file_ids
        }
    now = latest_slices(table).of(touched)
    then = files.of(touched)
    placed = _entries(spark, table.uri, table.config, now).select(*CHANGE_COLUMNS)
    gone = (
        _entries(spark, table.uri, table.config, then)
        .select(KEY)
        .join(placed.select(KEY), KEY, "left_anti")
        .select(KEY, sf.lit(None).cast("string"), sf.lit(None).cast("string"))
    )
    changes = run_spark_action(placed.union(gone).toArrow)
    stage_caught_up(
        table.storage,
        shards,
        later[-1].timestamp,
        changes.rename_columns(list(CHANGE_COLUMNS)),
    )
    return len(later)


def _entries(
    spark: SparkSession, table_uri: str, config: TableConfig, files: LatestSlices
) -> DataFrame:
    """(key, partition, file id, instant of the file) of every record in ``files``; the
    shard column is left null (filled once the shard count is known)."""
    return slice_keys(spark, table_uri, config, files).select(
        sf.col(RECORD_KEY).alias(KEY),
        sf.col(OLD_PARTITION).alias(PARTITION),
        sf.col(OLD_FILE_ID).alias(FILE_ID),
        sf.col(FILE_INSTANT).alias(INSTANT),
        sf.lit(None).cast("int").alias(_SHARD),
    )


def _with_shard(num_shards: int) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def assign(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            shards = shard_of(batch.column(KEY), num_shards).astype(np.int32)
            yield batch.set_column(batch.schema.get_field_index(_SHARD), _SHARD, pa.array(shards))

    return assign


def _shard_writer(table_uri: str, num_shards: int, as_of: str) -> Callable[[pa.Table], pa.Table]:
    def write(group: pa.Table) -> pa.Table:
        shard = group.column(_SHARD)[0].as_py()
        _check_unique(group)
        key, partition, file_id, instant = (
            group.column(name).combine_chunks() for name in LOOKUP_COLUMNS
        )
        size = write_base_shard(
            storage_for(table_uri), shard, num_shards, key, partition, file_id, instant, as_of
        )
        return pa.table(
            {
                _SHARD: pa.array([shard], pa.int32()),
                "entries": pa.array([group.num_rows], pa.int64()),
                "bytes": pa.array([size], pa.int64()),
            }
        )

    return write


def _check_unique(entries: pa.Table) -> None:
    """A key held by two records: FailedPreconditionError naming it and both locations."""
    ordered = entries.take(pc.sort_indices(entries.column(KEY)))
    keys = ordered.column(KEY).combine_chunks()
    if len(keys) < 2:
        return
    same = pc.equal(keys.slice(1), keys.slice(0, len(keys) - 1))
    repeated = pc.indices_nonzero(same)
    if len(repeated) == 0:
        return
    second = repeated[0].as_py() + 1
    first, again = ordered.slice(second - 1, 2).to_pylist()
    raise FailedPreconditionError(
        f"key {first[KEY]!r} is in file group {first[FILE_ID]} of partition "
        f"{first[PARTITION]!r} and in file group {again[FILE_ID]} of partition "
        f"{again[PARTITION]!r}: the table violates key uniqueness, no index was built",
        field="table",
    )


def _delete_index_files(table: HoodieTable) -> None:
    """Delete the table's index folder: ``index.properties`` first, so the index is gone
    at once and a crash part-way leaves only files the next build deletes; then the
    shards, manifests and bases of an old index or of a build that failed."""
    table.storage.delete_many([layout.PROPERTIES_PATH])
    table.storage.delete_prefix(layout.ROOT + "/")


def _delete_failed_build(table: HoodieTable) -> None:
    """Remove the files of a build that failed (its index was never published)."""
    try:
        _delete_index_files(table)
    except TidemarkError as error:
        log.warning("index.build_leftovers", table=table.uri, error=str(error))
