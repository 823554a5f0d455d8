"""The compaction executor: run compaction plans (``<t>.compaction.requested``,
``tidemark/table/plans/compaction.py``) on merge-on-read tables.

Scheduling is the library's (``tidemark/table/maintenance/compaction.py``). A run, per
pending plan, oldest first, under the plan's run lease (``plan_runs``):

1. Under the table lock: a plan already inflight is a run that died (its run lease
   expired): it is rolled back to its plan (its new base files deleted through its
   markers, a ``.rollback`` recorded, the plan kept: Hudi's rollbackInflightCompaction).
   Each operation's slice must still be there (its base file committed and its log
   files present: a clean or a rollback may have removed them) and its file group not
   replaced (by a clustering), else the plan is refused.
   requested -> inflight, and the lock is released.
2. Without it, one Spark task per operation reads the slice merged
   (``plan_runs.merged_slice_rows``: the base file with the blocks of the plan's log
   files that deltacommits requested before the compaction's instant completed) and writes
   one new base file ``{fileId}_{token}_{C}.parquet``, the same file id, behind its marker
   like every write. Rows keep their meta columns (commit time, sequence number).
3. Under the table lock again: the instant completes as a ``commit`` (operation type
   ``COMPACT``; JSON on table version 6, Avro ``<C>_<completion>.commit`` on 8 and 9), so
   the new base files become each group's latest slice at once; logs written beside the
   run (versions 8 and 9) belong to that new slice by their completion time.

Until its commit the run's files are invisible (their instant is not completed); a
failed run is rolled back to its plan, a killed one by the next run.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import structlog
from pyspark.sql import SparkSession

from tidemark import faults
from tidemark.errors import FailedPreconditionError
from tidemark.jobs.base_file import BaseFileWriter, latest_file_schema
from tidemark.jobs.context import WriteContext
from tidemark.jobs.errors import run_spark_action
from tidemark.jobs.job_options import (
    JobOptions,
    Locking,
    MarkerOptions,
    add_job_options,
    serving_markers,
)
from tidemark.jobs.plan_runs import merged_slice_rows, plan_run, submit_main, undo_failed_run
from tidemark.jobs.session import build_session, cancellable_jobs, check_executors_import
from tidemark.jobs.task import current_task, marker_writer, storage_for
from tidemark.storage.base import FileInfo
from tidemark.table import HoodieTable
from tidemark.table.files.slices import LogFile
from tidemark.table.files.view import FileSlice
from tidemark.table.leases.storage_lease import StorageLease
from tidemark.table.logfiles.file_names import parse_log_file_name
from tidemark.table.maintenance.compaction import compactions_to_run
from tidemark.table.metadata.actions import COMMIT, COMPACTION
from tidemark.table.metadata.commit import (
    COMPACT_OPERATION,
    NULL_COMMIT,
    CommitMetadata,
    WriteStat,
)
from tidemark.table.plans.compaction import (
    CompactionOperation,
    PendingCompaction,
    pending_compaction,
)
from tidemark.table.timeline.instant import State
from tidemark.table.writes.commit import complete_commit, rollback
from tidemark.table.writes.markers import MarkerReader

log = structlog.get_logger(__name__)

ROLE = "compaction"
WHAT = "compaction"
DEFAULT_JOB_OPTIONS = JobOptions()


@dataclass(frozen=True)
class CompactionResult:
    """What one plan's run did."""

    instant: str
    file_groups: int
    rows: int
    bytes_written: int
    seconds: float
    rolled_back_earlier_run: bool = False


def run_compaction(
    spark: SparkSession,
    table: HoodieTable,
    instant: str | None = None,
    options: JobOptions = DEFAULT_JOB_OPTIONS,
) -> list[CompactionResult]:
    """Run the pending compaction at ``instant``, or every pending one (a plan another
    runner executes is left to it unless named)."""
    plans = compactions_to_run(table, instant)
    if not plans:
        return []
    if options.marker_service_address:
        options.marker_options().check_reachable()
    check_executors_import(spark)
    with (
        serving_markers(options.markers, options.marker_service_address) as address,
        cancellable_jobs(spark, f"tidemark-compaction-{uuid.uuid4().hex}") as cancel,
    ):
        markers = options.with_marker_service(address).marker_options()
        runner = _Runner(spark, table, markers, options.locking(cancel))
        results = [runner.run(p.timestamp, only=instant is not None) for p in plans]
    return [result for result in results if result is not None]


@dataclass(frozen=True)
class _Task:
    """One operation as its Spark task needs it (plain data, picklable)."""

    piece: FileSlice
    base_instant: str


@dataclass(frozen=True)
class _Runner:
    spark: SparkSession
    table: HoodieTable
    markers: MarkerOptions
    locking: Locking

    def run(self, instant: str, *, only: bool) -> CompactionResult | None:
        with plan_run(self.table, instant, ROLE, self.locking, only=only, what=WHAT) as run:
            return None if run is None else self._run(instant, run)

    @contextmanager
    def _locked(self) -> Iterator[StorageLease]:
        with self.locking.changing(self.table, ROLE, merge_on_read=True) as lock:
            yield lock

    def _reader(self, lock: StorageLease) -> MarkerReader:
        return self.markers.reader(self.table, lock.holder)

    def _to_plan(self, instant: str, lock: StorageLease) -> None:
        rollback(self.table, instant, self._reader(lock), keep_plan=True)

    def _run(self, instant: str, run: StorageLease) -> CompactionResult | None:
        started = time.perf_counter()
        table = self.table
        with self._locked() as lock:
            run.check()
            if all(i.timestamp != instant for i in table.timeline.pending()):
                return None  # completed by another runner since it was listed
            pending = pending_compaction(table, instant)
            rolled_back = pending.instant.state is State.INFLIGHT
            if rolled_back:  # its runner's lease expired: it died or was paused
                self._to_plan(instant, lock)
                log.info("compaction.earlier_run_rolled_back", table=table.uri, instant=instant)
            tasks, deltacommits = operation_tasks(table, pending)
            schema = latest_file_schema(table)
            if schema is None:
                raise FailedPreconditionError(
                    f"table {table.uri} has no base file to take the file schema from",
                    field="table",
                )
            table.timeline.transition_inflight(instant, COMPACTION)
        log.info("compaction.started", table=table.uri, instant=instant, groups=len(tasks))
        faults.exit_if_requested("compaction_started")
        context = WriteContext(
            table_uri=table.uri,
            instant=instant,
            action=COMPACTION,
            markers=self.markers.spec(table.uri, instant),
            file_schema=schema,
            config=table.config,
        )
        try:
            stats = _write_slices(self.spark, tasks, deltacommits, context)
            faults.exit_if_requested("compaction_files_written")
            metadata = CommitMetadata.from_write_stats(
                stats, COMPACT_OPERATION, table.current_avro_schema()
            )
            with self._locked() as lock:
                run.check()
                complete_commit(table, instant, COMMIT, metadata, self._reader(lock))
        except Exception as failure:

            def to_plan(lock: StorageLease) -> None:
                self._to_plan(instant, lock)

            raise undo_failed_run(
                table, instant, run, failure, self._locked, to_plan, WHAT
            ) from failure
        return CompactionResult(
            instant=instant,
            file_groups=len(stats),
            rows=sum(s.num_writes for s in stats),
            bytes_written=sum(s.file_size_in_bytes for s in stats),
            seconds=time.perf_counter() - started,
            rolled_back_earlier_run=rolled_back,
        )


def operation_tasks(
    table: HoodieTable, pending: PendingCompaction
) -> tuple[list[_Task], dict[str, str]]:
    """Each operation's slice as the plan names it, and the deltacommits whose blocks the
    run merges: those requested before the compaction's instant and completed. A slice
    whose base file or log files are gone makes the plan unrunnable (FailedPrecondition)."""
    view = table.view()
    deltacommits = {
        requested: completed
        for requested, completed in view.completed_deltacommits().items()
        if requested < pending.timestamp
    }
    listed = {info.path: info.size for info in _listing(table, pending.plan.operations)}
    # every slice's base file, by path: a group compacted before has several
    bases = {b.path: b for b in view.committed_base_files()}
    replaced = view.replaced_file_groups()
    tasks = []
    for op in pending.plan.operations:
        if (op.partition_path, op.file_id) in replaced:
            raise FailedPreconditionError(
                f"compaction {pending.timestamp} cannot run: file group {op.file_id} of "
                f"partition {op.partition_path!r} was replaced by "
                f"{replaced[(op.partition_path, op.file_id)]} (clustering or insert_overwrite)",
                field="instant",
            )
        base = bases.get(op.base_path) if op.base_path else None
        missing = [path for path in op.log_paths if path not in listed]
        if (op.base_path and base is None) or missing:
            raise FailedPreconditionError(
                f"compaction {pending.timestamp} cannot run: file group {op.file_id} of "
                f"partition {op.partition_path!r} lost {missing[0] if missing else op.base_path} "
                "since it was planned",
                field="instant",
            )
        logs = tuple(
            LogFile(op.partition_path, parse_log_file_name(name), path, listed[path])
            for name, path in zip(op.log_files, op.log_paths, strict=True)
        )
        tasks.append(_Task(FileSlice(op.partition_path, op.file_id, base, logs), op.base_instant))
    return tasks, deltacommits


def _listing(table: HoodieTable, operations: Sequence[CompactionOperation]) -> list[FileInfo]:
    partitions = sorted({op.partition_path for op in operations})
    return [info for partition in partitions for info in table.storage.list_dir(partition).files]


def _write_slices(
    spark: SparkSession,
    tasks: Sequence[_Task],
    deltacommits: Mapping[str, str],
    context: WriteContext,
) -> list[WriteStat]:
    def write(indices: Iterable[int]) -> Iterator[WriteStat]:
        storage = storage_for(context.table_uri)
        markers = marker_writer(context.markers)
        identity = current_task()
        for index in indices:
            task = tasks[index]
            rows = merged_slice_rows(storage, task.piece, deltacommits, context)
            with BaseFileWriter(
                storage=storage,
                markers=markers,
                task=identity,
                instant=context.instant,
                action=context.action,
                partition_path=task.piece.partition_path,
                file_id=task.piece.file_id,
                schema=context.file_schema,
                prev_commit=task.base_instant or NULL_COMMIT,
                populate_meta_fields=context.config.populate_meta_fields,
            ) as writer:
                writer.write_carried(rows)
                yield writer.close()

    indices = spark.sparkContext.parallelize(range(len(tasks)), max(1, len(tasks)))
    return run_spark_action(indices.mapPartitions(write).collect)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``tidemark compaction run`` and ``spark-submit spark_jobs/compaction.py``."""
    parser.add_argument("--table", required=True, help="table base URI (path or s3://)")
    parser.add_argument("--instant", help="the pending compaction to run (default: every one)")
    add_job_options(parser)


def run(args: argparse.Namespace) -> list[CompactionResult]:
    """Run parsed ``add_arguments`` options, checked before Spark starts."""
    options = JobOptions(**JobOptions.job_fields(args))
    table = HoodieTable.open(args.table)
    if not compactions_to_run(table, args.instant):
        return []
    return run_compaction(build_session(args.master), table, args.instant, options)


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit spark_jobs/compaction.py --table ...``."""
    return submit_main("spark_jobs/compaction.py", __doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
