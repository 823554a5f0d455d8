"""The clustering executor: run pending plans (``<ts>.replacecommit.requested``).

Under the table lock, for each pending plan, oldest first: a run of it that died earlier
is rolled back to its plan (Hudi's rollbackInflightClustering), the plan moves to
inflight, and Spark tasks read the groups' base files through ``tidemark.storage``
(on merge-on-read tables a slice with log files is read merged, ``files.merge.read_slice``:
its base file with the committed blocks of the logs the plan names, deleted keys gone),
order the rows by the plan's layout (``tidemark/clustering/curves.py``) and write them
into the planned number of new file groups, each behind its marker like every write
(``spark_jobs/base_file.py``). With fewer groups than cores a large group is cut into
slices of whole output files, one task each; a task writes its files on its share of the
cores, one file per Arrow thread (Arrow takes and encodes rows without holding the GIL).
Every slice orders the group from its sort columns alone, then reads and writes only its
own rows, so the files and their order are the same however the group is cut. Every
slice re-reads the group's sort columns and the input files holding its rows, so a group
is cut only into slices of at least ``MIN_SLICE_INPUT_BYTES`` of input. The
replacecommit lists the old file groups in ``partitionToReplaceFileIds``, so readers
switch to the new ones at once (a merge-on-read group's log files go with it). A group
whose slice changed since the plan was made (a new base file, or on merge-on-read a log
file added or removed: a write appended to it) makes the plan stale: it is refused at
start and again at commit, as Hudi fails a clustering whose file groups a concurrent
writer updated; writers themselves meet pending plans by ``--on-pending-clustering``.

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
import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import structlog
from pyspark import TaskContext
from pyspark.sql import SparkSession

from tidemark import faults
from tidemark.clients.index import IndexClient
from tidemark.clustering.curves import (
    CURVE_METHODS,
    DEFAULT_CURVE_METHOD,
    check_sortable,
    layout_order,
    orderable,
)
from tidemark.config import MIB
from tidemark.errors import (
    ConflictError,
    FailedPreconditionError,
    InvalidArgumentError,
    TidemarkError,
    with_note,
)
from tidemark.index.record_index import COMPACT_AFTER_DELTAS, RecordIndex
from tidemark.jobs.base_file import BaseFileWriter
from tidemark.jobs.cluster_options import (
    DEFAULT_CLUSTER_OPTIONS,
    DEFAULT_ROW_GROUP_BYTES,
    MIN_SLICE_INPUT_BYTES,
    ClusterOptions,
)
from tidemark.jobs.context import WriteContext
from tidemark.jobs.errors import run_spark_action
from tidemark.jobs.index_writes import file_changes, files_written_after, new_files, stage
from tidemark.jobs.job_options import (
    Locking,
    MarkerOptions,
    add_job_options,
    serving_index,
    serving_markers,
)
from tidemark.jobs.plan_runs import merged_slice_rows, plan_run, submit_main, undo_failed_run
from tidemark.jobs.session import build_session, cancellable_jobs, check_executors_import
from tidemark.jobs.tagging import OLD_FILE_ID, OLD_PARTITION, existing_keys
from tidemark.jobs.task import current_task, marker_writer, storage_for
from tidemark.storage import Storage
from tidemark.table import HoodieTable
from tidemark.table.files.file_names import is_base_file_name, new_file_id, parse_base_file_name
from tidemark.table.files.view import FileSlice
from tidemark.table.leases.storage_lease import StorageLease
from tidemark.table.metadata.actions import REPLACE_COMMIT
from tidemark.table.metadata.commit import CommitMetadata, WriteStat
from tidemark.table.plans.clustering import (
    ClusteringPlan,
    PendingPlan,
    pending_plan,
    pending_plans,
    replaced_by,
)
from tidemark.table.records.keys import FILE_NAME, RECORD_KEY
from tidemark.table.records.schema import conform
from tidemark.table.timeline.instant import State, validate_instant_time
from tidemark.table.writes.checks import check_clusterable
from tidemark.table.writes.commit import complete_commit, rollback
from tidemark.table.writes.markers import MarkerReader
from tidemark.table.writes.pending_clustering import find_pending_plan

log = structlog.get_logger(__name__)

OPERATION_TYPE = "CLUSTER"
ROLE = "cluster"
WHAT = "clustering"
CURVE_METHOD_PARAM = "hoodie.layout.optimize.build.curve.method"
"""Strategy parameter choosing rank ranges (``sample``, our default) or raw 8-byte keys
(``direct``, Hudi's default) for z-order and Hilbert."""


@dataclass(frozen=True)
class GroupTask:
    """One clustering group as its task needs it (plain data, picklable): ``paths`` are
    the base files of slices without logs, ``merged`` the merge-on-read slices read
    merged with the blocks of ``deltacommits`` (requested -> completion time)."""

    partition_path: str
    file_ids: tuple[str, ...]
    paths: tuple[str, ...]
    output_files: int
    input_bytes: int
    merged: tuple[FileSlice, ...] = ()
    deltacommits: Mapping[str, str] = field(default_factory=dict)


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
    lock_wait_s: float = 0.0
    """Time spent waiting for the table lock (start and commit)."""


def run_clustering(
    spark: SparkSession,
    table: HoodieTable,
    instant: str | None = None,
    options: ClusterOptions = DEFAULT_CLUSTER_OPTIONS,
) -> list[ClusterResult]:
    """Run the pending plan at ``instant``, or every pending plan when it is None (none
    pending: nothing happens; a plan another runner is executing is left to it; a plan
    a writer took file groups from before it started is followed to the plan replacing
    it). Bad
    input (an instant that is not a pending plan, a sort column the table lacks), an
    unreachable marker service and executors that cannot import tidemark are refused
    before any lock is taken. The table lock (waited for up to
    ``options.lock_wait_s``) is held only to start each plan and to commit it. A table
    with a record index is kept in step through the index service at
    ``options.index_service_address`` (default: one embedded in the driver); service
    markers without an address get an embedded marker service, as a write's."""
    table.timeline.reload()
    plans = checked_plans(table, instant)
    if not plans:
        return []
    if options.marker_service_address:  # else an embedded service, started below
        options.marker_options().check_reachable()
    check_executors_import(spark)
    indexed = RecordIndex.exists(table.storage)
    with (
        serving_markers(options.markers, options.marker_service_address) as address,
        serving_index(table.uri, indexed, options.index_service_address) as index,
        cancellable_jobs(spark, f"tidemark-cluster-{uuid.uuid4().hex}") as cancel,
    ):
        markers = options.with_marker_service(address).marker_options()
        runner = _Runner(spark, table, options, markers, index, options.locking(cancel))
        results = []
        tried: set[str] = set()
        while plans:
            for pending in plans:
                tried.add(pending.timestamp)
                results.append(runner.run(pending.timestamp, only=instant is not None))
            plans = replacements(table, tried)
        done = [result for result in results if result is not None]
        if index is not None and done:
            _fold_moved_keys(index, table.uri)
    return done


def _fold_moved_keys(index: IndexClient, table_uri: str) -> None:
    """Compact the shards of the record index whose deltas now rival their bases
    (``record_index.COMPACT_AT_DELTA_SHARE``: a run moves every key of its groups, a
    clustering of the whole table every key of the table), so reads after the job neither
    search them beside the bases nor compact them first. The moves are committed either
    way: another compaction running, or a failure, leaves them to the next one."""
    try:
        done = index.compact(COMPACT_AFTER_DELTAS)
    except TidemarkError as error:
        log.warning("cluster.index_not_compacted", table=table_uri, error=str(error))
        return
    log.info(
        "cluster.index_compacted",
        table=table_uri,
        shards=done.shards_compacted,
        deltas_folded=done.deltas_folded,
    )


def replacements(table: HoodieTable, of: set[str]) -> list[PendingPlan]:
    """Pending plans that replaced one of the plans ``of`` (a writer took file groups
    from it before its run started), not yet among them."""
    return [
        pending
        for pending in pending_plans(table)
        if of.intersection(replaced_by(pending)) and pending.timestamp not in of
    ]


def plans_to_run(table: HoodieTable, instant: str | None) -> list[PendingPlan]:
    """The pending plan at ``instant``, or the plan that replaced it (FailedPrecondition
    or NotFoundError naming what the instant is otherwise), or every pending plan,
    oldest first."""
    if instant is None:
        return pending_plans(table)
    validate_instant_time(instant)
    followed = replacements(table, {instant})
    return followed or [find_pending_plan(table, instant)]


def checked_plans(table: HoodieTable, instant: str | None) -> list[PendingPlan]:
    """The plans to run, once they are known good (no Spark needed: ``run`` calls this
    before starting its session)."""
    plans = plans_to_run(table, instant)
    if plans:
        check_clusterable(table.config)
    for pending in plans:
        _check_layout(table, pending)
    return plans


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
class _Runner:
    """Runs plans one at a time: start under the table lock, rewrite without it (fenced by
    the plan's run lease), commit under the table lock."""

    spark: SparkSession
    table: HoodieTable
    options: ClusterOptions
    markers: MarkerOptions
    index: IndexClient | None
    locking: Locking
    """The table lock for the short transitions; its lease is the plan's run lease too."""
    lock_waits: list[float] = field(default_factory=list)
    """Waits for the table lock of the plan being run."""

    def run(self, instant: str, *, only: bool) -> ClusterResult | None:
        """Run plan ``instant``; None when another runner holds its run lease and the
        plan was not asked for by name (``only``), or when it is no longer pending."""
        with plan_run(self.table, instant, ROLE, self.locking, only=only, what=WHAT) as run:
            return None if run is None else self._run(instant, run)

    @contextmanager
    def _locked(self) -> Iterator[StorageLease]:
        with self.locking.changing(self.table, ROLE, merge_on_read=True) as lock:
            self.lock_waits.append(lock.waited_s)
            yield lock

    def _undo(self, lock: StorageLease) -> _Undo:
        return _Undo(self.table, self.markers.reader(self.table, lock.holder), self.index)

    def _run(self, instant: str, run: StorageLease) -> ClusterResult | None:
        """None when the plan is no longer pending: a writer took file groups from it
        (``--on-pending-clustering replan``) and saved the rest as a new plan."""
        started = time.perf_counter()
        self.lock_waits.clear()
        table = self.table
        with self._locked() as lock:
            run.check()
            table.timeline.reload()
            if all(i.timestamp != instant for i in table.timeline.pending()):
                log.info("cluster.plan_replaced", table=table.uri, instant=instant)
                return None
            pending = pending_plan(table, instant)
            plan = pending.plan
            rolled_back = pending.instant.state is State.INFLIGHT
            if rolled_back:  # its runner's lease expired: it died or was paused
                self._undo(lock).to_plan(instant)
                log.info("cluster.earlier_run_rolled_back", table=table.uri, instant=instant)
            tasks = group_tasks(table, instant, plan)
            running = table.timeline.transition_inflight(instant, pending.instant.action)
        log.info("cluster.started", table=table.uri, instant=instant, groups=len(tasks))
        faults.exit_if_requested("cluster_started")
        context = WriteContext(
            table_uri=table.uri,
            instant=instant,
            action=running.action,
            markers=self.markers.spec(table.uri, instant),
            file_schema=_file_schema(table, plan),
            config=table.config,
        )
        schema = table.current_avro_schema()
        try:
            stats = _write_groups(self.spark, tasks, context, layout_of(plan), self.options)
            faults.exit_if_requested("cluster_files_written")
            if self.index is not None:
                _stage_moved_keys(self.spark, table, instant, stats, self.index)
            faults.exit_if_requested("cluster_before_commit")
            faults.hold_if_requested("cluster_before_commit")
            replaced: dict[str, list[str]] = {}
            for task in tasks:
                replaced.setdefault(task.partition_path, []).extend(task.file_ids)
            metadata = CommitMetadata.from_write_stats(stats, OPERATION_TYPE, schema, replaced)
            with self._locked() as lock:
                run.check()
                table.timeline.reload()
                group_tasks(table, instant, plan)  # no write touched the plan's groups
                if self.index is None and RecordIndex.exists(table.storage):
                    raise ConflictError(
                        "a record index was built during this run, which staged no moves "
                        "for it; run the plan again",
                        field="index",
                    )
                _check_moved_keys_unwritten(self.spark, table, instant, tasks)
                complete_commit(table, instant, REPLACE_COMMIT, metadata, self._undo(lock).markers)
                faults.exit_if_requested("cluster_committed")
        except Exception as failure:
            raise self._undo_failed_run(instant, run, failure) from failure
        return ClusterResult(
            instant=instant,
            groups=len(tasks),
            rows=sum(s.num_writes for s in stats),
            files_replaced=sum(len(t.file_ids) for t in tasks),
            files_written=len(stats),
            bytes_written=sum(s.file_size_in_bytes for s in stats),
            seconds=time.perf_counter() - started,
            rolled_back_earlier_run=rolled_back,
            lock_wait_s=sum(self.lock_waits),
        )

    def _undo_failed_run(self, instant: str, run: StorageLease, failure: Exception) -> Exception:
        """Roll the failed run back to its plan (``plan_runs.undo_failed_run``)."""

        def to_plan(lock: StorageLease) -> None:
            self._undo(lock).to_plan(instant)

        return undo_failed_run(self.table, instant, run, failure, self._locked, to_plan, WHAT)


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


def _check_moved_keys_unwritten(
    spark: SparkSession, table: HoodieTable, instant: str, tasks: Sequence[GroupTask]
) -> None:
    """No write completed since the plan placed one of the keys the run moves elsewhere:
    the moves staged for the index (and the rows rewritten) would then be wrong. Writers
    are refused on the plan's file groups and an insert of a key they hold is tagged as
    an update of them, so this is a guard; it reads keys only when writes completed."""
    written = [  # a deltacommit's log files hold updates of its groups: group_tasks saw them
        file
        for file in files_written_after(table, instant)
        if is_base_file_name(file.path.rpartition("/")[2])
    ]
    if not written:
        return
    planned = {(task.partition_path, file_id) for task in tasks for file_id in task.file_ids}
    live = table.view().latest_base_files()
    inputs = [f for f in live if (f.partition_path, f.file_id) in planned]
    moved = existing_keys(spark, table.uri, table.config, inputs).select(RECORD_KEY)
    fresh = existing_keys(spark, table.uri, table.config, written)
    clash = run_spark_action(fresh.join(moved, RECORD_KEY, "left_semi").limit(1).collect)
    if clash:
        row = clash[0]
        raise FailedPreconditionError(
            f"key {row[RECORD_KEY]!r} of clustering plan {instant} was written meanwhile to "
            f"file group {row[OLD_FILE_ID]} of partition {row[OLD_PARTITION]!r}: the plan's "
            "moves are stale, it is not committed (cancel the plan)",
            field="instant",
        )


def layout_of(plan: ClusteringPlan) -> Layout:
    strategy = plan.strategy
    method = strategy.extra_params.get(CURVE_METHOD_PARAM, DEFAULT_CURVE_METHOD).lower()
    return Layout(tuple(strategy.sort_columns), strategy.layout, method)


def group_tasks(table: HoodieTable, instant: str, plan: ClusteringPlan) -> list[GroupTask]:
    """The plan's groups, each slice checked to still be its file group's latest slice
    (the same base file, and on merge-on-read tables the same log files): a plan whose
    file groups changed since it was made would lose those changes."""
    view = table.view()
    if table.config.merge_on_read:
        slices = view.latest_file_slices()
        deltacommits = view.completed_deltacommits()
    else:
        slices = [FileSlice(f.partition_path, f.file_id, f, ()) for f in view.latest_base_files()]
        deltacommits = {}
    latest = {(s.partition_path, s.file_id): s for s in slices}
    tasks = []
    for group in plan.groups:
        paths, merged, sizes = [], [], []
        for piece in group.slices:
            current = latest.get((piece.partition_path, piece.file_id))
            if current is None or not _is_planned(current, piece.path, piece.logs):
                raise FailedPreconditionError(
                    f"plan {instant} is stale: file group {piece.file_id} in partition "
                    f"{piece.partition_path!r} changed since it was planned (cancel the plan)",
                    field="instant",
                )
            if current.logs:
                merged.append(current)
            elif current.base is not None:
                paths.append(current.base.path)
            sizes.append(_slice_bytes(current))
        tasks.append(
            GroupTask(
                partition_path=group.partition_path,
                file_ids=tuple(piece.file_id for piece in group.slices),
                paths=tuple(paths),
                output_files=max(1, group.num_output_file_groups),
                input_bytes=sum(sizes),
                merged=tuple(merged),
                deltacommits=deltacommits if merged else {},
            )
        )
    return tasks


def _is_planned(current: FileSlice, path: str, logs: Sequence[str]) -> bool:
    """Whether ``current`` is the slice the plan named: its base file and log files (in
    any order: Hudi lists a slice's logs newest first)."""
    base = current.base.path if current.base is not None else ""
    return base == path and sorted(log.path for log in current.logs) == sorted(logs)


def _slice_bytes(piece: FileSlice) -> int:
    return (piece.base.size if piece.base is not None else 0) + sum(log.size for log in piece.logs)


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
    options: ClusterOptions,
) -> list[WriteStat]:
    parallelism = spark.sparkContext.defaultParallelism
    slices = split_groups(tasks, parallelism, options.min_slice_bytes)
    row_group_bytes = options.row_group_bytes
    threads = arrow_threads(parallelism, len(slices))

    def write_task(indices: Iterable[int]) -> Iterator[WriteStat]:
        previous = pa.cpu_count()
        pa.set_cpu_count(threads)
        try:
            for index in indices:
                yield from cluster_slice(slices[index], context, layout, row_group_bytes)
        finally:
            pa.set_cpu_count(previous)

    # An RDD of slice indices, one per task: a Spark job with less fixed cost than a
    # DataFrame's Arrow round trip, and the stats come back as they are.
    pieces = spark.sparkContext.parallelize(range(len(slices)), len(slices))
    return run_spark_action(pieces.mapPartitions(write_task).collect)


def arrow_threads(parallelism: int, tasks: int) -> int:
    """Arrow threads per task: the job's share of Spark's cores (PySpark caps a worker's
    Arrow pool at ``spark.task.cpus`` through ``OMP_NUM_THREADS``, so a job of one task
    on two cores would decode its files on one thread and leave a core idle)."""
    return max(1, parallelism // max(1, tasks))


@dataclass(frozen=True)
class SliceTask:
    """Output files ``[first_file, stop_file)`` of a group, in the group's order: one Spark
    task each, so a large group with fewer groups than cores is written by several tasks."""

    group: GroupTask
    first_file: int
    stop_file: int


def split_groups(
    tasks: Sequence[GroupTask], parallelism: int, min_slice_bytes: int = MIN_SLICE_INPUT_BYTES
) -> list[SliceTask]:
    """Each group cut into up to ``parallelism / groups`` slices of whole output files
    (never more slices than output files, nor slices of less than ``min_slice_bytes`` of
    input): with a few large groups every core writes."""
    per_group = max(1, -(-parallelism // max(1, len(tasks))))
    slices: list[SliceTask] = []
    for task in tasks:
        count = max(1, min(task.output_files, per_group, task.input_bytes // min_slice_bytes))
        if task.merged:  # merged slices have no row positions to cut the group by
            count = 1
        bounds = [task.output_files * i // count for i in range(count + 1)]
        slices.extend(SliceTask(task, first, stop) for first, stop in itertools.pairwise(bounds))
    return slices


def cluster_slice(
    piece: SliceTask, context: WriteContext, layout: Layout, row_group_bytes: int
) -> list[WriteStat]:
    """Write the slice's files of its group: the group's ``output_files`` files of
    near-equal row counts in the layout's order, in row groups of about
    ``row_group_bytes`` (from the input's bytes/row). A slice of part of the group gets
    the order from the sort columns alone (read from every file of the group, so every
    slice computes the same order), then reads only its own rows, file by file, so a task
    holds its slice, not the group; a slice that is the whole group reads each file once
    and orders the rows it read."""
    task = piece.group
    storage = storage_for(context.table_uri)
    whole = piece.first_file == 0 and piece.stop_file >= task.output_files
    if whole:
        group = _read_group(storage, task, context).combine_chunks()
        order = _order(group, layout)
    else:
        order, offsets = _group_order(task, context, layout)
    total = len(order)
    files = max(1, min(task.output_files, total))
    bounds = [total * i // files for i in range(files + 1)]
    first, stop = min(piece.first_file, files), min(piece.stop_file, files)
    if first >= stop:
        return []
    start = bounds[first]
    if whole:

        def rows_of(low: int, high: int) -> pa.Table:
            return _in_order(group, order, low, high)

    else:
        ordered = _rows_at(storage, task.paths, offsets, order[start : bounds[stop]], context)

        def rows_of(low: int, high: int) -> pa.Table:
            return ordered.slice(low - start, high - low)

    row_group_rows = max(1, row_group_bytes * total // max(1, task.input_bytes))
    plain = mostly_distinct(rows_of(start, min(start + row_group_rows, bounds[stop])))
    identity = current_task()
    spark_task = TaskContext.get()
    markers = marker_writer(context.markers)

    def write_file(low: int, high: int) -> WriteStat:
        with BaseFileWriter(
            storage=storage,
            markers=markers,
            task=identity,
            instant=context.instant,
            action=context.action,
            partition_path=task.partition_path,
            file_id=new_file_id(),
            schema=context.file_schema,
            populate_meta_fields=context.config.populate_meta_fields,
            plain_columns=plain,
        ) as writer:
            writer.write_carried(rows_of(low, high), row_group_rows)
            stat = writer.close()
        if spark_task is not None:
            faults.fail_task_after_file_written(spark_task)
        return stat

    # Arrow releases the GIL while it takes a file's rows and encodes them: the task's
    # files are written on its share of cores (its Arrow threads), one file per thread.
    pool = ThreadPoolExecutor(max_workers=pa.cpu_count(), thread_name_prefix="cluster-file")
    try:
        return list(pool.map(write_file, bounds[first:stop], bounds[first + 1 : stop + 1]))
    finally:
        pool.shutdown(cancel_futures=True)  # a failed file: no further file is started


def mostly_distinct(sample: pa.Table) -> frozenset[str]:
    """Columns more than half of whose values in ``sample`` (the slice's first row group,
    in the layout's order) are distinct: a dictionary of them costs a hash per value and
    makes the file larger, so they are written plain (parquet-mr, Hudi's writer, likewise
    falls back to plain when its dictionary does not pay; Arrow only at its page limit)."""
    return frozenset(
        name
        for name, values in zip(sample.column_names, sample.columns, strict=True)
        if orderable(values.type)
        and 2 * pc.count_distinct(values, mode="all").as_py() > sample.num_rows
    )


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
    return _order(pa.concat_tables(keys), layout), offsets


def _order(rows: pa.Table, layout: Layout) -> np.ndarray:
    """Positions of ``rows`` (holding the sort columns) in the layout's order; the input
    order when the plan has no sort columns."""
    if not layout.sort_columns or rows.num_rows == 0:
        return np.arange(rows.num_rows, dtype=np.int64)
    order = layout_order(
        rows.select(list(layout.sort_columns)).combine_chunks(),
        layout.sort_columns,
        layout.layout,
        curve_method=layout.curve_method,
    )
    return order.to_numpy().astype(np.int64, copy=False)


def _read_files(storage: Storage, paths: Sequence[str], context: WriteContext) -> pa.Table:
    """The base files' rows, file after file, conformed to the file schema (columns a
    file lacks are null, narrower types widened), the file name column left null (the
    writer names the new file): one Arrow scan over the files' bytes, decoded on Arrow's own
    threads rather than one file after another in Python."""
    parquet = ds.ParquetFileFormat()
    fragments = [parquet.make_fragment(pa.py_buffer(storage.read(path))) for path in paths]
    schema = pa.schema([field for field in context.file_schema if field.name != FILE_NAME])
    return conform(ds.FileSystemDataset(fragments, schema, parquet).to_table(), context.file_schema)


def _read_group(storage: Storage, task: GroupTask, context: WriteContext) -> pa.Table:
    """The group's rows: its base files', then its merged slices' (each merged with its
    committed log blocks), conformed to the file schema with the file name left null."""
    merged = (
        merged_slice_rows(storage, piece, task.deltacommits, context) for piece in task.merged
    )
    return pa.concat_tables([_read_files(storage, task.paths, context), *merged])


def _rows_at(
    storage: Storage,
    paths: Sequence[str],
    offsets: np.ndarray,
    positions: np.ndarray,
    context: WriteContext,
) -> pa.Table:
    """The rows at ``positions`` (distinct) of the files' concatenation, in that order; a
    file none of them falls in is not read."""
    chosen = np.zeros(offsets[-1], dtype=bool)
    chosen[positions] = True
    wanted = np.flatnonzero(chosen)
    cuts = np.searchsorted(wanted, offsets)
    pieces = []
    for index, path in enumerate(paths):
        local = wanted[cuts[index] : cuts[index + 1]] - offsets[index]
        if len(local) == 0:
            continue
        rows = _read_files(storage, [path], context)
        pieces.append(rows.take(pa.array(local)) if len(local) < rows.num_rows else rows)
    return _in_order(pa.concat_tables(pieces), np.cumsum(chosen, dtype=np.int64)[positions] - 1)


def _in_order(rows: pa.Table, order: np.ndarray, low: int = 0, high: int | None = None) -> pa.Table:
    """``rows`` (one chunk each column: a take from many chunks concatenates them first)
    at ``order[low:high]``, one chunk; taken only when not already in order."""
    positions = order[low:high]
    if np.array_equal(positions, np.arange(low, low + len(positions))):
        return rows.slice(low, len(positions)).combine_chunks()
    return rows.take(pa.array(positions)).combine_chunks()


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
    parser.add_argument(
        "--min-slice-mb",
        type=float,
        default=MIN_SLICE_INPUT_BYTES / MIB,
        help="cut a group across tasks only into slices of at least this much input",
    )


def run(args: argparse.Namespace) -> list[ClusterResult]:
    """Run parsed ``add_arguments`` options, checked before Spark starts."""
    options = ClusterOptions.from_args(args)
    table = HoodieTable.open(args.table)
    if not checked_plans(table, args.instant):
        return []
    return run_clustering(build_session(args.master), table, args.instant, options)


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit spark_jobs/cluster.py --table ...``."""
    return submit_main("spark_jobs/cluster.py", __doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
