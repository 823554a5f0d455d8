"""The Python API for users' own PySpark jobs (docs/python-api.md).

Everything ``tidemark`` does from the command line, with the same defaults: ``write`` (its
options are one ``WriteOptions``, the object the CLI builds from its flags),
``index_build``, ``cluster_schedule``, ``cluster_run``, ``compaction_schedule``,
``compaction_run`` (merge-on-read tables), ``rollback``; ``history`` (the
table's instants, as Delta's DESCRIBE HISTORY); reads through Spark's
own Parquet reader with the files pruned in the driver (``read``, ``lookup``,
``register_view``); ``clean`` and ``archive`` (retention); ``index_compact`` and
``stats_rebuild`` for the structures that prune;
``stream_writer``, the ``foreachBatch`` function of a streaming query; ``register`` for
the slower ``spark.read.format("tidemark")`` data source. Services are used at the
addresses given, else started embedded in the driver. The table is opened here, once, and
handed down to the job (its ``uri`` canonical, as every opened storage's); ``write`` and
``stream_writer`` take the URI, as a write may create the table, and ``cluster_schedule``
sends it to the planner service, which opens it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from tidemark.clients.planner import DEFAULT_PLAN, PlannerClient, PlanOptions
from tidemark.index.record_index import Compaction, RecordIndex
from tidemark.jobs.cluster import ClusterResult, run_clustering
from tidemark.jobs.cluster_options import DEFAULT_CLUSTER_OPTIONS, ClusterOptions
from tidemark.jobs.compaction import DEFAULT_JOB_OPTIONS, CompactionResult, run_compaction
from tidemark.jobs.datasource import TidemarkDataSource
from tidemark.jobs.index_build import BuildResult, build_index
from tidemark.jobs.index_build_options import IndexBuildOptions
from tidemark.jobs.job_options import JobOptions
from tidemark.jobs.lookup import lookup_dataframe
from tidemark.jobs.read import read_dataframe
from tidemark.jobs.read_options import DEFAULT_LOOKUP, DEFAULT_READ, LookupOptions, ReadOptions
from tidemark.jobs.rollback import rollback_table
from tidemark.jobs.session import use_driver_python
from tidemark.jobs.stream import STREAM_OPTIONS, StreamWriter
from tidemark.jobs.write import WriteResult
from tidemark.jobs.write import write as write_job
from tidemark.jobs.write_options import DEFAULT_OPTIONS, WriteOptions
from tidemark.retention import RetentionSettings, archive_table, clean_table
from tidemark.rpc.embedded import start_embedded_service
from tidemark.storage.uri import canonical_uri
from tidemark.table import HoodieTable
from tidemark.table.files import column_stats
from tidemark.table.files.query_types import SNAPSHOT
from tidemark.table.filters.expression import Filter
from tidemark.table.leases.storage_lease import DEFAULT_LOCK_WAIT_S
from tidemark.table.maintenance.archival import ArchiveResult, ArchiveSettings
from tidemark.table.maintenance.clean import CleanResult
from tidemark.table.maintenance.clean_plan import CleanSettings
from tidemark.table.maintenance.compaction import schedule_compaction
from tidemark.table.plans.compaction import DEFAULT_SCHEDULE_OPTIONS, ScheduleOptions
from tidemark.table.timeline.history import table_history
from tidemark.table.writes.commit import RollbackResult

__all__ = [
    "STREAM_OPTIONS",
    "ArchiveSettings",
    "CleanSettings",
    "ClusterOptions",
    "LookupOptions",
    "PlanOptions",
    "ReadOptions",
    "StreamWriter",
    "WriteOptions",
    "WriteResult",
    "archive",
    "clean",
    "cluster_run",
    "cluster_schedule",
    "compaction_run",
    "compaction_schedule",
    "history",
    "index_build",
    "index_compact",
    "lookup",
    "read",
    "register",
    "register_view",
    "rollback",
    "stats_rebuild",
    "stream_writer",
    "write",
]


def write(
    df: DataFrame, table: str, operation: str, *, options: WriteOptions = DEFAULT_OPTIONS
) -> WriteResult:
    """Write ``df`` into the table at ``table`` (bulk_insert, insert, upsert, delete,
    insert_overwrite), creating it when ``options.record_key_fields`` are given; returns
    the completed instant and what was written."""
    return write_job(df.sparkSession, df, table, operation, options)


def stream_writer(
    table: str,
    operation: str = "upsert",
    *,
    query_id: str,
    options: WriteOptions = STREAM_OPTIONS,
) -> StreamWriter:
    """The function to give ``foreachBatch``: each micro-batch written as one ``write``
    keyed ``<query_id>-<batch_id>``, so a batch Spark hands again after a restart from
    the checkpoint is written once. ``query_id`` names the query for good (keep it with
    the checkpoint). The services it starts live until ``close()`` or the end of a
    ``with`` block; ``options`` default to a write's, except that a batch touching a
    pending clustering plan's file groups takes them from the plan (``replan``)."""
    return StreamWriter(canonical_uri(table), operation, options, query_id)


def index_build(
    spark: SparkSession,
    table: str,
    *,
    shards: int | None = None,
    rebuild: bool = False,
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S,
) -> BuildResult:
    """Build the table's record index (``rebuild``: delete an existing one first); writes
    go on meanwhile."""
    options = IndexBuildOptions(shards=shards, rebuild=rebuild, lock_wait_s=lock_wait_s)
    return build_index(spark, _open(table), options)


def cluster_schedule(table: str, options: PlanOptions = DEFAULT_PLAN, **fields: Any) -> str | None:
    """Schedule a clustering plan through the planner service; its instant, or None when
    there is nothing to cluster. ``options`` (``PlanOptions``, the defaults of ``tidemark
    cluster schedule``) changed by keyword ``fields`` (``sort_columns=["id"]``): e.g.
    ``hot_commits`` / ``hot_minutes`` leave out the file groups the last N commits or T
    minutes wrote (a stream still updates them)."""
    options = dataclasses.replace(options, **fields)
    if options.planner_service_address:
        client = PlannerClient(options.planner_service_address)
        response = client.schedule(table, options.message())
    else:
        with start_embedded_service("planner") as planner:
            response = PlannerClient(planner.address).schedule(table, options.message())
    return response.plan.instant_time if response.HasField("plan") else None


def cluster_run(
    spark: SparkSession,
    table: str,
    instant: str | None = None,
    options: ClusterOptions = DEFAULT_CLUSTER_OPTIONS,
    **fields: Any,
) -> list[ClusterResult]:
    """Run the pending clustering plan at ``instant`` (default: every pending plan) beside
    the table's writers; ``options`` (``ClusterOptions``, the defaults of ``tidemark
    cluster run``: service markers as every write) changed by keyword ``fields``."""
    return run_clustering(spark, _open(table), instant, dataclasses.replace(options, **fields))


def compaction_schedule(
    spark: SparkSession,
    table: str,
    *,
    max_delta_commits: int = DEFAULT_SCHEDULE_OPTIONS.max_delta_commits,
    target_io_mb: float = DEFAULT_SCHEDULE_OPTIONS.target_io_mb,
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S,
) -> str | None:
    """Schedule a compaction of the merge-on-read table at ``table`` by Hudi's defaults
    (``tidemark compaction schedule``): its instant, or None when none is due. ``spark``
    is unused (scheduling reads the timeline and the file listing in the driver); it is
    taken so every call of this API has the same shape."""
    del spark
    instant = schedule_compaction(
        _open(table), ScheduleOptions(max_delta_commits, target_io_mb), lock_wait_s=lock_wait_s
    )
    return None if instant is None else instant.timestamp


def compaction_run(
    spark: SparkSession,
    table: str,
    instant: str | None = None,
    options: JobOptions = DEFAULT_JOB_OPTIONS,
    **fields: Any,
) -> list[CompactionResult]:
    """Run the pending compaction at ``instant`` (default: every pending one);
    ``options`` (``JobOptions``, the defaults of ``tidemark compaction run``) changed by
    keyword ``fields``."""
    return run_compaction(spark, _open(table), instant, dataclasses.replace(options, **fields))


def rollback(
    table: str, instant: str | None = None, *, lock_wait_s: float = DEFAULT_LOCK_WAIT_S
) -> list[RollbackResult]:
    """Roll back the pending instant ``instant``, or every failed write when it is None."""
    return rollback_table(_open(table), instant, lock_wait_s=lock_wait_s)


def read(
    spark: SparkSession, table: str, options: ReadOptions = DEFAULT_READ, **fields: Any
) -> DataFrame:
    """The snapshot of the table at ``table``, read as ``options`` (``ReadOptions``)
    changed by keyword ``fields`` say: at instant ``as_of`` (default the latest),
    meta columns first, as Hudi's ``query_type`` (``"snapshot"``: base files merged with
    their logs; ``"read_optimized"``: the latest base files only, logs ignored), from
    the files the driver resolved: ``filters`` (``(column, op,
    value)``) and ``where`` (``{column: value or list}``) prune partitions, files by the
    record index (``=``/``IN`` on the key) and by column statistics before the read, and
    are applied to the rows. ``reader="auto"`` reads in the driver, answering without a
    Spark job, a read by key of up to ``DRIVER_MAX_FILES`` files (``DRIVER_MAX_BYTES``) or
    ``DRIVER_SMALL_READ_BYTES`` of files, unless the rows kept pass
    ``DRIVER_MAX_ROW_BYTES``, and the rest with Spark's own Parquet reader;
    ``"driver"``, ``"scan"`` (Spark's reader, or pyarrow in Spark tasks on S3 without
    S3A), ``"spark"`` or ``"storage"`` choose. A path without a table is a
    ``NotFoundError`` before Spark plans anything."""
    options = dataclasses.replace(options, **fields)
    return read_dataframe(
        spark,
        _open(table),
        where=options.where,
        filters=options.filters,
        columns=options.columns,
        as_of=options.as_of,
        reader=options.reader,
        query_type=options.query_type,
    )


def lookup(
    spark: SparkSession,
    table: str,
    keys: Sequence[Any] | DataFrame,
    options: LookupOptions = DEFAULT_LOOKUP,
    **fields: Any,
) -> DataFrame:
    """The rows having the record keys ``keys`` (a list of key values, tuples for a
    composite key, or a DataFrame with the key fields' columns), read as ``options``
    (``LookupOptions``) changed by keyword ``fields`` say: in the snapshot at ``as_of``
    (default the latest; ``query_type="read_optimized"``: its latest base files only),
    opening only the files the record index names.
    ``reader="auto"`` reads up to ``DRIVER_MAX_FILES`` files (``DRIVER_MAX_BYTES``) in
    the driver, answering without a Spark job, and more with Spark's Parquet reader;
    ``"driver"``, ``"spark"`` or ``"storage"`` (pyarrow in Spark tasks) choose."""
    options = dataclasses.replace(options, **fields)
    return lookup_dataframe(
        spark,
        _open(table),
        keys,
        columns=options.columns,
        as_of=options.as_of,
        reader=options.reader,
        query_type=options.query_type,
    )


HISTORY_SCHEMA = (
    "requested string, completed string, action string, state string, operation string, "
    "rows_written long, files_written long, archived boolean"
)
"""The columns of ``history``'s DataFrame (``tidemark.table.timeline.history.HistoryEntry``)."""


def history(spark: SparkSession, table: str, *, archived: bool = False) -> DataFrame:
    """The table's instants, oldest first, one row each, as Delta's ``DESCRIBE HISTORY``:
    ``requested`` (the instant ``WriteResult.instant`` names), ``completed`` (version 6
    records none: its requested time), ``action``, ``state``, and for completed writes
    ``operation``, ``rows_written`` and ``files_written``; ``archived`` adds the archived
    instants first (flagged ``archived``). Either time of a completed write is an
    ``as_of`` that reads its snapshot."""
    entries = table_history(_open(table), archived=archived)
    return spark.createDataFrame([dataclasses.astuple(e) for e in entries], HISTORY_SCHEMA)


def register_view(
    spark: SparkSession,
    name: str,
    table: str,
    *,
    filters: Sequence[Filter] = (),
    as_of: str | None = None,
    query_type: str = SNAPSHOT,
) -> DataFrame:
    """Make ``read(spark, table, filters=filters, as_of=as_of, query_type=query_type)``
    the temporary view ``name`` for SQL; the view is that snapshot: call again to see
    later commits. Its files are always scanned by Spark (never read into the driver),
    which prunes them again for each query's own filters."""
    options = ReadOptions(filters=filters, as_of=as_of, reader="scan", query_type=query_type)
    frame = read(spark, table, options)
    frame.createOrReplaceTempView(name)
    return frame


def index_compact(table: str, *, min_deltas: int = 1) -> Compaction:
    """Fold the record index's deltas into its shards' bases (shards with at least
    ``min_deltas``): key lookups then read one file per shard."""
    return RecordIndex.open(_open(table).storage).compact(min_deltas)


def stats_rebuild(table: str) -> int:
    """Recompute the column statistics of the table's live base files from their footers
    (what writes record as they commit); returns how many files have them."""
    opened = _open(table)
    return column_stats.rebuild(opened.storage, opened.view().latest_base_files())


def register(spark: SparkSession) -> None:
    """Register the ``tidemark`` data source in ``spark`` (PySpark also finds it by itself,
    through the ``pyspark_tidemark`` module). It reads whole snapshots through Python
    workers; ``read`` is the fast path."""
    use_driver_python(spark)
    spark.dataSource.register(TidemarkDataSource)


def clean(
    table: str,
    settings: CleanSettings | None = None,
    *,
    dry_run: bool = False,
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S,
) -> CleanResult:
    """Delete the file slices outside the retention (default: snapshots of the last 10
    commits stay readable), as Hudi's cleaner; ``dry_run`` only lists them."""
    return clean_table(_open(table), settings, dry_run=dry_run, wait_s=lock_wait_s)


def archive(
    table: str,
    settings: ArchiveSettings | None = None,
    *,
    cleaner: CleanSettings | None = None,
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S,
) -> ArchiveResult:
    """Move completed instants beyond ``settings.keep_max`` (default 30) to Hudi's archived
    timeline, down to ``keep_min`` (20), which must exceed ``cleaner``'s retained commits."""
    both = RetentionSettings(cleaner or CleanSettings(), settings or ArchiveSettings())
    return archive_table(_open(table), both, wait_s=lock_wait_s)


def _open(table: str) -> HoodieTable:
    """The table at ``table``, opened once for the call: its ``uri`` is canonical (absolute:
    executors and services run in other working directories); NotFoundError when there is
    none."""
    return HoodieTable.open(table)
