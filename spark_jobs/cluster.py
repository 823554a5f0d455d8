"""The clustering executor: run pending plans (``<ts>.replacecommit.requested``).

Under the table lock, for each pending plan, oldest first: a run of it that died earlier
is rolled back to its plan (Hudi's rollbackInflightClustering), the plan moves to inflight,
and Spark tasks read the groups' base files through ``tidemark.storage``, order the rows by
the plan's layout (``spark_jobs/curves.py``) and write them into the planned number of new
file groups, each behind its marker like every write (``spark_jobs/base_file.py``). With
fewer groups than cores a group is cut into slices of whole output files, one task each:
every slice orders the group from its sort columns alone, then reads and writes only its
own rows, so the files and their order are the same however the group is cut. The
replacecommit lists the old file groups in ``partitionToReplaceFileIds``, so readers switch
to the new ones at once.

Rows are copied, never changed: meta columns included (Hudi's preserveHoodieMetadata),
only ``_hoodie_file_name`` names the new file. A table with a record index gets every
moved key staged at its new file group for the replacecommit's instant (through the
index service, like every write), so the index moves with the commit. A run that fails
is rolled back to its plan, which stays pending for a re-run, and its staged index
changes are discarded. A task holds its group's sort columns and its slice's rows in a
Python worker's memory: the plan's max group size bounds them.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import socket
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import structlog
from pyspark import TaskContext
from pyspark.sql import SparkSession

from services.index.record_index import RecordIndex
from services.marker.embedded import start_embedded_marker_service
from spark_jobs import faults
from spark_jobs.base_file import BaseFileWriter, conform
from spark_jobs.context import WriteContext
from spark_jobs.curves import CURVE_METHODS, DEFAULT_CURVE_METHOD, check_sortable, layout_order
from spark_jobs.errors import run_spark_action
from spark_jobs.index_writes import file_changes, new_files, stage
from spark_jobs.job_options import (
    DEFAULT_LOCK_LEASE_S,
    MarkerKind,
    MarkerOptions,
    add_job_options,
)
from spark_jobs.session import build_session, cancellable_jobs
from spark_jobs.stats import STAT_DDL, stats_batch, stats_from_rows
from spark_jobs.task import current_task, marker_writer, storage_for
from spark_jobs.write import (
    MIB,
    index_client,
    release_lock,
)
from tidemark.clients.index import IndexClient
from tidemark.errors import FailedPreconditionError, InvalidArgumentError, TidemarkError, with_note
from tidemark.storage import Storage
from tidemark.storage.uri import canonical_uri
from tidemark.table.clustering_plan import ClusteringPlan, PendingPlan, pending_plan, pending_plans
from tidemark.table.commit import complete_commit, rollback
from tidemark.table.commit_metadata import CommitMetadata, WriteStat
from tidemark.table.instant import REPLACE_COMMIT, State, validate_instant_time
from tidemark.table.lock import TableLock
from tidemark.table.markers import MarkerReader
from tidemark.table.naming import new_file_id, parse_base_file_name
from tidemark.table.table import HoodieTable

log = structlog.get_logger(__name__)

OPERATION_TYPE = "CLUSTER"
CURVE_METHOD_PARAM = "hoodie.layout.optimize.build.curve.method"
"""Strategy parameter choosing rank ranges (``sample``, our default) or raw 8-byte keys
(``direct``, Hudi's default) for z-order and Hilbert."""
DEFAULT_ROW_GROUP_BYTES = 120 * MIB
"""Hudi's ``hoodie.parquet.block.size``: several row groups per clustered file, so a
query's row-group statistics prune inside the files too."""


@dataclass(frozen=True)
class GroupTask:
    """One clustering group as its task needs it (plain data, picklable)."""

    partition_path: str
    file_ids: tuple[str, ...]
    paths: tuple[str, ...]
    output_files: int
    input_bytes: int


@dataclass(frozen=True)
class Layout:
    """How a plan orders rows: no sort columns keeps the input order (stitching only)."""

    sort_columns: tuple[str, ...]
    layout: str
    curve_method: str


@dataclass
class ClusterResult:
    """What one plan's run did."""

    instant: str
    groups: int
    rows: int
    files_replaced: int
    files_written: int
    bytes_written: int
    seconds: float
    rolled_back_earlier_run: bool = False


@dataclass(frozen=True)
class _Options:
    markers: MarkerOptions
    row_group_bytes: int


def run_clustering(
    spark: SparkSession,
    table_uri: str,
    instant: str | None = None,
    *,
    markers: MarkerKind = "direct",
    marker_service_address: str | None = None,
    marker_fallback_direct: bool = False,
    row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES,
    lock_lease_s: float = DEFAULT_LOCK_LEASE_S,
    index_service_address: str | None = None,
) -> list[ClusterResult]:
    """Run the pending plan at ``instant``, or every pending plan when it is None (none
    pending: nothing happens). Bad input (an instant that is not a pending plan, a sort
    column the table lacks) is refused before the table lock is even taken. A table with
    a record index is kept in step through the index service at
    ``index_service_address`` (default: one embedded in the driver)."""
    marker_options = MarkerOptions(markers, marker_service_address, marker_fallback_direct)
    if row_group_bytes <= 0:
        raise InvalidArgumentError(f"must be > 0, got {row_group_bytes}", field="row_group_bytes")
    table = HoodieTable.open(canonical_uri(table_uri))
    plans = plans_to_run(table, instant)
    for pending in plans:
        _check_layout(table, pending)
    if not plans:
        return []
    marker_options.check_reachable()
    options = _Options(marker_options, row_group_bytes)
    owner = f"tidemark-cluster@{socket.gethostname()}:{os.getpid()}"
    indexed = RecordIndex.exists(table.storage)
    with (
        index_client(table.uri, indexed, index_service_address) as index,
        cancellable_jobs(spark, f"tidemark-cluster-{uuid.uuid4().hex}") as cancel,
    ):
        lock = TableLock(table.storage, owner, lease_s=lock_lease_s, on_lost=cancel)
        lock.acquire()
        table.timeline.fence = lock
        try:
            undo = _Undo(table, options.markers.reader(table, lock.holder), index)
            return [
                _run_plan(spark, table, pending, options, undo)
                for pending in plans_to_run(table, instant)
            ]
        except Exception as failure:
            if lock.lost.is_set():
                raise lock.lost_error() from failure
            raise
        finally:
            release_lock(lock)


def plans_to_run(table: HoodieTable, instant: str | None) -> list[PendingPlan]:
    """The pending plan at ``instant`` (FailedPreconditionError naming what the instant
    is otherwise), or every pending plan, oldest first."""
    if instant is None:
        return pending_plans(table)
    return [pending_plan(table, validate_instant_time(instant))]


def _check_layout(table: HoodieTable, pending: PendingPlan) -> None:
    """Refuse a plan this executor cannot carry out, before anything is touched."""
    layout = layout_of(pending.plan)
    if layout.curve_method not in CURVE_METHODS:
        raise FailedPreconditionError(
            f"plan {pending.timestamp} asks for curve method {layout.curve_method!r} "
            f"(known: {', '.join(CURVE_METHODS)})",
            field="instant",
        )
    if layout.sort_columns:
        try:
            check_sortable(_file_schema(table, pending.plan), layout.sort_columns)
        except InvalidArgumentError as error:
            raise with_note(error, f"in plan {pending.timestamp}") from error


@dataclass(frozen=True)
class _Undo:
    """What rolling a run back to its plan needs: the markers naming its files, and the
    index service holding its staged changes (None: the table has no record index)."""

    table: HoodieTable
    markers: MarkerReader
    index: IndexClient | None

    def to_plan(self, instant: str) -> None:
        rollback(self.table, instant, self.markers, keep_plan=True)
        if self.index is not None:
            self.index.discard(instant)


def _run_plan(
    spark: SparkSession,
    table: HoodieTable,
    pending: PendingPlan,
    options: _Options,
    undo: _Undo,
) -> ClusterResult:
    started = time.perf_counter()
    instant, plan = pending.timestamp, pending.plan
    rolled_back = pending.instant.state is State.INFLIGHT
    if rolled_back:
        undo.to_plan(instant)
        log.info("cluster.earlier_run_rolled_back", table=table.uri, instant=instant)
    tasks = group_tasks(table, instant, plan)
    context = WriteContext(
        table_uri=table.uri,
        instant=instant,
        action=REPLACE_COMMIT,
        markers=options.markers.spec(table.uri, instant),
        file_schema=_file_schema(table, plan),
        config=table.config,
    )
    schema = table.current_avro_schema()
    table.timeline.transition_inflight(instant, REPLACE_COMMIT)
    log.info("cluster.started", table=table.uri, instant=instant, groups=len(tasks))
    try:
        stats = _write_groups(spark, tasks, context, layout_of(plan), options.row_group_bytes)
        if undo.index is not None:
            _stage_moved_keys(spark, table, instant, stats, undo.index)
        faults.exit_if_requested("cluster_before_commit")
        replaced: dict[str, list[str]] = {}
        for task in tasks:
            replaced.setdefault(task.partition_path, []).extend(task.file_ids)
        metadata = CommitMetadata.from_write_stats(stats, OPERATION_TYPE, schema, replaced)
        complete_commit(table, instant, REPLACE_COMMIT, metadata, undo.markers)
    except Exception as failure:
        raise _undo_failed_run(undo, instant, failure) from failure
    return ClusterResult(
        instant=instant,
        groups=len(tasks),
        rows=sum(s.num_writes for s in stats),
        files_replaced=sum(len(t.file_ids) for t in tasks),
        files_written=len(stats),
        bytes_written=sum(s.file_size_in_bytes for s in stats),
        seconds=time.perf_counter() - started,
        rolled_back_earlier_run=rolled_back,
    )


def _stage_moved_keys(
    spark: SparkSession,
    table: HoodieTable,
    instant: str,
    stats: Sequence[WriteStat],
    index: IndexClient,
) -> None:
    """Stage every key of the new files at its new file group from the executors
    (``index_writes.stage``); the keys read back must agree with the rows written (the
    replaced groups' entries are overwritten)."""
    changes = file_changes(spark, table.uri, table.config, new_files(stats, instant))
    counts = stage(index, instant, changes)
    rows = sum(s.num_writes for s in stats)
    if not counts.placed == counts.staged == rows:
        raise FailedPreconditionError(
            f"the record index staged {counts.staged} moved keys of {counts.placed} read back "
            f"for {rows} rows written: clustering {instant} is not committed",
            field="index",
        )


def _undo_failed_run(undo: _Undo, instant: str, failure: Exception) -> Exception:
    """Roll the failed run back to its plan; the error says what became of it."""
    table = undo.table
    try:
        table.timeline.reload()
        if table.timeline.find(instant).is_completed:
            return failure
        undo.to_plan(instant)
    except TidemarkError as error:
        log.warning("cluster.rollback_failed", table=table.uri, instant=instant, error=str(error))
        note = f"clustering {instant} failed and is left inflight: the next run rolls it back"
    else:
        note = f"clustering {instant} failed and was rolled back; its plan stays pending"
    if isinstance(failure, TidemarkError):
        return with_note(failure, note)
    failure.add_note(note)
    return failure


def layout_of(plan: ClusteringPlan) -> Layout:
    strategy = plan.strategy
    method = strategy.extra_params.get(CURVE_METHOD_PARAM, DEFAULT_CURVE_METHOD).lower()
    return Layout(tuple(strategy.sort_columns), strategy.layout, method)


def group_tasks(table: HoodieTable, instant: str, plan: ClusteringPlan) -> list[GroupTask]:
    """The plan's groups, each slice checked to still be its file group's latest base
    file: a plan whose file groups changed since it was made would lose those changes."""
    latest = {(f.partition_path, f.file_id): f for f in table.view().latest_base_files()}
    tasks = []
    for group in plan.groups:
        paths, sizes = [], []
        for piece in group.slices:
            current = latest.get((piece.partition_path, piece.file_id))
            if current is None or current.path != piece.path:
                raise FailedPreconditionError(
                    f"plan {instant} is stale: file group {piece.file_id} in partition "
                    f"{piece.partition_path!r} changed since it was planned (cancel the plan)",
                    field="instant",
                )
            paths.append(current.path)
            sizes.append(current.size)
        tasks.append(
            GroupTask(
                partition_path=group.partition_path,
                file_ids=tuple(piece.file_id for piece in group.slices),
                paths=tuple(paths),
                output_files=max(1, group.num_output_file_groups),
                input_bytes=sum(sizes),
            )
        )
    return tasks


def _file_schema(table: HoodieTable, plan: ClusteringPlan) -> pa.Schema:
    """The newest input file's schema: older files are conformed to it (evolution only
    adds columns and widens types)."""
    newest = max(
        (piece.path for group in plan.groups for piece in group.slices),
        key=lambda path: parse_base_file_name(path.rpartition("/")[2]).instant,
    )
    with table.storage.open_input(newest) as stream:
        return pq.read_schema(stream)


def _write_groups(
    spark: SparkSession,
    tasks: Sequence[GroupTask],
    context: WriteContext,
    layout: Layout,
    row_group_bytes: int,
) -> list[WriteStat]:
    slices = split_groups(tasks, spark.sparkContext.defaultParallelism)
    indices = spark.sparkContext.parallelize([(i,) for i in range(len(slices))], len(slices))
    pieces = spark.createDataFrame(indices, "piece int")

    def write_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                yield stats_batch(cluster_slice(slices[index], context, layout, row_group_bytes))

    return stats_from_rows(run_spark_action(pieces.mapInArrow(write_task, STAT_DDL).collect))


@dataclass(frozen=True)
class SliceTask:
    """Output files ``[first_file, stop_file)`` of a group, in the group's order: one Spark
    task each, so a group with fewer groups than cores is written by several tasks."""

    group: GroupTask
    first_file: int
    stop_file: int


def split_groups(tasks: Sequence[GroupTask], parallelism: int) -> list[SliceTask]:
    """Each group cut into up to ``parallelism / groups`` slices of whole output files
    (never more slices than output files): with a few large groups every core writes."""
    per_group = max(1, -(-parallelism // max(1, len(tasks))))
    slices: list[SliceTask] = []
    for task in tasks:
        count = min(task.output_files, per_group)
        bounds = [task.output_files * i // count for i in range(count + 1)]
        slices.extend(SliceTask(task, first, stop) for first, stop in itertools.pairwise(bounds))
    return slices


def cluster_slice(
    piece: SliceTask, context: WriteContext, layout: Layout, row_group_bytes: int
) -> list[WriteStat]:
    """Write the slice's files of its group: the group's ``output_files`` files of
    near-equal row counts in the layout's order, in row groups of about
    ``row_group_bytes`` (from the input's bytes/row). The order comes from the sort
    columns alone (read from every file of the group, so every slice computes the same
    order); then only the slice's rows are read, file by file, so a task holds its slice,
    not the group."""
    task = piece.group
    storage = storage_for(context.table_uri)
    order, offsets = _group_order(task, context, layout)
    total = len(order)
    files = max(1, min(task.output_files, total))
    bounds = [total * i // files for i in range(files + 1)]
    first, stop = min(piece.first_file, files), min(piece.stop_file, files)
    if first >= stop:
        return []
    start = bounds[first]
    rows = _rows_at(storage, task.paths, offsets, order[start : bounds[stop]], context)
    row_group_rows = max(1, row_group_bytes * total // max(1, task.input_bytes))
    stats = []
    identity = current_task()
    for low, high in itertools.pairwise(bounds[first : stop + 1]):
        with BaseFileWriter(
            storage=storage,
            markers=marker_writer(context.markers),
            task=identity,
            instant=context.instant,
            action=context.action,
            partition_path=task.partition_path,
            file_id=new_file_id(),
            schema=context.file_schema,
            populate_meta_fields=context.config.populate_meta_fields,
        ) as writer:
            for offset in range(low, high, row_group_rows):
                size = min(row_group_rows, high - offset)
                writer.write_carried(rows.slice(offset - start, size))
            stats.append(writer.close())
        spark_task = TaskContext.get()
        if spark_task is not None:
            faults.fail_task_after_file_written(spark_task)
    return stats


def _group_order(
    task: GroupTask, context: WriteContext, layout: Layout
) -> tuple[np.ndarray, np.ndarray]:
    """The group's row order as positions in its files' concatenation, and each file's
    first position (plus the total): read from the sort columns only, or the row counts
    alone when the plan keeps the input order."""
    storage = storage_for(context.table_uri)
    columns = pa.schema([context.file_schema.field(name) for name in layout.sort_columns])
    counts, keys = [], []
    for path in task.paths:
        with storage.open_input(path) as stream:
            parquet = pq.ParquetFile(stream)
            counts.append(parquet.metadata.num_rows)
            if layout.sort_columns:
                present = [name for name in columns.names if name in parquet.schema_arrow.names]
                keys.append(conform(parquet.read(columns=present), columns))
    offsets = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
    if not layout.sort_columns or offsets[-1] == 0:
        return np.arange(offsets[-1], dtype=np.int64), offsets
    order = layout_order(
        pa.concat_tables(keys).combine_chunks(),
        layout.sort_columns,
        layout.layout,
        curve_method=layout.curve_method,
    )
    return order.to_numpy().astype(np.int64, copy=False), offsets


def _rows_at(
    storage: Storage,
    paths: Sequence[str],
    offsets: np.ndarray,
    positions: np.ndarray,
    context: WriteContext,
) -> pa.Table:
    """The rows at ``positions`` of the files' concatenation, in that order; a file none
    of them falls in is not read."""
    wanted = np.sort(positions)
    cuts = np.searchsorted(wanted, offsets)
    pieces = []
    for index, path in enumerate(paths):
        local = wanted[cuts[index] : cuts[index + 1]] - offsets[index]
        if len(local) == 0:
            continue
        with storage.open_input(path) as stream:
            rows = conform(pq.read_table(stream), context.file_schema)
        if len(local) < rows.num_rows:
            rows = rows.take(pa.array(local))
        pieces.append(rows)
    gathered = pa.concat_tables(pieces).combine_chunks()
    placed = np.searchsorted(wanted, positions)
    if np.array_equal(placed, np.arange(len(placed))):
        return gathered
    return gathered.take(pa.array(placed))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``tidemark cluster run`` and ``spark-submit spark_jobs/cluster.py``."""
    parser.add_argument("--table", required=True, help="table base URI (path or s3://)")
    parser.add_argument("--instant", help="the pending plan to run (default: every one)")
    add_job_options(parser)
    parser.add_argument(
        "--row-group-mb",
        type=float,
        default=DEFAULT_ROW_GROUP_BYTES / MIB,
        help="Parquet row group size of the clustered files (Hudi's hoodie.parquet.block.size)",
    )


def run(args: argparse.Namespace) -> list[ClusterResult]:
    """Run parsed ``add_arguments`` options; service markers with no address get an
    embedded marker service in the driver."""
    spark = build_session(args.master)

    def run_with(address: str | None) -> list[ClusterResult]:
        return run_clustering(
            spark,
            args.table,
            args.instant,
            markers=args.markers,
            marker_service_address=address,
            row_group_bytes=math.ceil(args.row_group_mb * MIB),
            lock_lease_s=args.lock_lease_s,
            index_service_address=args.index_service,
        )

    if args.markers == "service" and not args.marker_service:
        with start_embedded_marker_service() as service:
            return run_with(service.address)
    return run_with(args.marker_service)


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit spark_jobs/cluster.py --table ...``."""
    parser = argparse.ArgumentParser(prog="spark_jobs/cluster.py", description=__doc__)
    add_arguments(parser)
    parser.set_defaults(master=None)
    for result in run(parser.parse_args(argv)):
        print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
