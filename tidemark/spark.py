"""The Python API for users' own PySpark jobs (docs/python-api.md).

Everything ``tidemark`` does from the command line, with the same defaults: ``write`` (its
options are one ``WriteOptions``, the object the CLI builds from its flags),
``index_build``, ``cluster_schedule``, ``cluster_run``, ``rollback``, and ``read`` /
``register`` for ``spark.read.format("tidemark")`` with record-index and partition pruning.
Services are used at the addresses given, else started embedded in the driver. The table
is opened here, once, and handed down to the job.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from tidemark.clients.planner import PlannerClient, plan_options
from tidemark.jobs.cluster import ClusterResult, run_clustering
from tidemark.jobs.cluster_options import ClusterOptions
from tidemark.jobs.datasource import NAME, PUSHDOWN_CONF, TidemarkDataSource
from tidemark.jobs.index_build import BuildResult, build_index
from tidemark.jobs.index_build_options import IndexBuildOptions
from tidemark.jobs.job_options import serving_markers
from tidemark.jobs.rollback import rollback_table
from tidemark.jobs.write import WriteResult
from tidemark.jobs.write import write as write_job
from tidemark.jobs.write_options import DEFAULT_OPTIONS, WriteOptions
from tidemark.rpc.embedded import start_embedded_service
from tidemark.storage.uri import canonical_uri
from tidemark.table.commit import RollbackResult
from tidemark.table.lock import DEFAULT_LOCK_WAIT_S
from tidemark.table.table import HoodieTable

__all__ = [
    "WriteOptions",
    "cluster_run",
    "cluster_schedule",
    "index_build",
    "read",
    "register",
    "rollback",
    "write",
]


def write(
    df: DataFrame, table: str, operation: str, *, options: WriteOptions = DEFAULT_OPTIONS
) -> WriteResult:
    """Write ``df`` into the table at ``table`` (bulk_insert, insert, upsert, delete,
    insert_overwrite), creating it when ``options.record_key_fields`` are given; returns
    the completed instant and what was written."""
    return write_job(df.sparkSession, df, table, operation, options)


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


def cluster_schedule(
    table: str,
    *,
    sort_columns: Sequence[str] = (),
    layout: str = "linear",
    partitions: str = "all",
    target_file_bytes: int | None = None,
    small_file_limit_bytes: int | None = None,
    planner_service_address: str | None = None,
) -> str | None:
    """Schedule a clustering plan through the planner service; its instant, or None when
    there is nothing to cluster."""
    options = plan_options(
        sort_columns=sort_columns,
        layout=layout,
        partitions=partitions,
        target_file_bytes=target_file_bytes,
        small_file_limit_bytes=small_file_limit_bytes,
    )
    if planner_service_address:
        response = PlannerClient(planner_service_address).schedule(table, options)
    else:
        with start_embedded_service("planner") as planner:
            response = PlannerClient(planner.address).schedule(table, options)
    return response.plan.instant_time if response.HasField("plan") else None


def cluster_run(
    spark: SparkSession,
    table: str,
    instant: str | None = None,
    *,
    marker_service_address: str | None = None,
    index_service_address: str | None = None,
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S,
) -> list[ClusterResult]:
    """Run the pending clustering plan at ``instant`` (default: every pending plan) beside
    the table's writers, with service markers as every write."""
    options = ClusterOptions(
        markers="service", lock_wait_s=lock_wait_s, index_service_address=index_service_address
    )
    hoodie_table = _open(table)
    with serving_markers("service", marker_service_address) as address:
        return run_clustering(spark, hoodie_table, instant, options.with_marker_service(address))


def rollback(
    table: str, instant: str | None = None, *, lock_wait_s: float = DEFAULT_LOCK_WAIT_S
) -> list[RollbackResult]:
    """Roll back the pending instant ``instant``, or every failed write when it is None."""
    return rollback_table(_open(table), instant, lock_wait_s=lock_wait_s)


def register(spark: SparkSession) -> None:
    """Register the ``tidemark`` data source in ``spark`` and turn on
    ``spark.sql.python.filterPushdown.enabled`` in it (a runtime SQL conf of this session:
    PySpark refuses a source that takes filters while it is off)."""
    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(TidemarkDataSource)


def read(spark: SparkSession, path: str, *, as_of: str | None = None) -> DataFrame:
    """The snapshot of the table at ``path`` (at instant ``as_of``, default the latest) with
    Hudi's meta columns; ``=``/``IN`` filters on it prune by record index and partition. A
    path without a table is a ``NotFoundError`` here, before Spark plans anything."""
    _open(path)
    register(spark)
    reader = spark.read.format(NAME)
    if as_of is not None:
        reader = reader.option("as_of", as_of)
    return reader.load(path)


def _open(table: str) -> HoodieTable:
    """The table at ``table`` made absolute (executors and services run in other working
    directories); NotFoundError when there is none."""
    return HoodieTable.open(canonical_uri(table))
