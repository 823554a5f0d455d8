"""The write job: bulk_insert, insert, upsert, delete and insert_overwrite into a COW table.

The driver validates the input and prepares keyed rows before touching the table, so bad
input leaves the timeline untouched. It tags the keys with their file groups; then, under
the table lock, it rolls back failed writes, plans file groups and requests an instant
(holding a lease of its own from then on); without the lock, executors write base files
through storage (each behind its marker); under the lock again it checks for conflicts
with writes completed meanwhile and completes the commit (reconcile, publish, drop the
markers). Run from Python (``write``), ``tidemark write`` or ``spark-submit
spark_jobs/write.py``.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import pyarrow as pa
import pyarrow.parquet as pq
import structlog
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import DataType

from tidemark import faults
from tidemark.checks import require_non_negative, require_positive
from tidemark.clients.index import IndexClient
from tidemark.config import MIB
from tidemark.errors import (
    AlreadyExistsError,
    ConflictError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    TidemarkError,
    with_note,
)
from tidemark.index.build import create_empty_index, index_building, shard_count_for
from tidemark.index.record_index import RecordIndex
from tidemark.jobs.buckets import route, write_buckets
from tidemark.jobs.bulk import DEFAULT_SORT_MODE, SORT_MODES, bulk_insert
from tidemark.jobs.checks import require_one_of
from tidemark.jobs.context import WriteContext
from tidemark.jobs.deletes import delete_keys, without_deleted
from tidemark.jobs.errors import run_spark_action
from tidemark.jobs.evolution import conform_to_table
from tidemark.jobs.index_writes import (
    TAGGINGS,
    bucket_changes,
    check_new_keys,
    choose_tagging,
    file_changes,
    new_files,
    replaced_changes,
    stage_changes,
    tag_with_index,
)
from tidemark.jobs.input import FORMATS, read_input
from tidemark.jobs.job_options import (
    MarkerOptions,
    add_job_options,
    serving_markers,
)
from tidemark.jobs.keying import (
    arrow_schema,
    check_fields,
    data_columns,
    dedupe,
    keyed_schema,
    with_keys,
)
from tidemark.jobs.session import build_session, cancellable_jobs, check_executors_import
from tidemark.jobs.shuffles import sized_shuffles
from tidemark.jobs.sizing import (
    DEFAULT_SMALL_FILE_LIMIT_BYTES,
    DEFAULT_TARGET_FILE_BYTES,
    WritePlan,
    average_record_size,
    plan_writes,
)
from tidemark.jobs.stages import StageClock, StageListener
from tidemark.jobs.stats import stats_from_rows
from tidemark.jobs.tagging import OLD_FILE_ID, OLD_PARTITION, existing_keys, tag
from tidemark.jobs.validation import TableRequest, check_layout, validate_input
from tidemark.jobs.write_options import DEFAULT_OPTIONS, WriteOptions
from tidemark.retention import RetentionResult, RetentionSettings, run_retention
from tidemark.rpc.embedded import start_embedded_service
from tidemark.storage import open_storage
from tidemark.storage.uri import canonical_uri
from tidemark.table import HoodieTable
from tidemark.table.files.view import BaseFile, FileSystemView, completion_times
from tidemark.table.leases.plan_run import live_run
from tidemark.table.leases.storage_lease import StorageLease
from tidemark.table.leases.table_lock import changing, holding, owner_name, release_quietly
from tidemark.table.leases.write_lease import forget_write, write_lease
from tidemark.table.maintenance.clean_plan import DEFAULT_RETAIN_COMMITS, CleanSettings
from tidemark.table.metadata.actions import COMMIT, REPLACE_COMMIT
from tidemark.table.metadata.commit import CommitMetadata, WriteStat
from tidemark.table.plans.clustering import CLUSTER_OPERATION
from tidemark.table.properties.config import TableConfig
from tidemark.table.records.avro_names import check_column_names, table_name_from_uri
from tidemark.table.records.keys import PARTITION_PATH, RECORD_KEY
from tidemark.table.records.schema import arrow_to_avro_schema, avro_to_arrow_schema
from tidemark.table.timeline.instant import Instant, new_instant_time
from tidemark.table.timeline.layout1 import WRITE_ACTIONS
from tidemark.table.timeline.versions import DEFAULT_TABLE_VERSION, add_table_version_argument
from tidemark.table.writes import pending_clustering
from tidemark.table.writes.checks import check_writable
from tidemark.table.writes.commit import (
    IDEMPOTENCY_KEY,
    committed_with_key,
    complete_commit,
    delete_stale_marker_dirs,
    other_writes,
    rollback,
    rollback_failed_writes,
)
from tidemark.table.writes.hudi_metadata_table import remove_hudi_metadata_table
from tidemark.table.writes.markers import MarkerReader

log = structlog.get_logger(__name__)

OPERATION_TYPES = {
    "bulk_insert": "BULK_INSERT",
    "insert": "INSERT",
    "upsert": "UPSERT",
    "delete": "DELETE",
    "insert_overwrite": "INSERT_OVERWRITE",
}
DUPLICATING_OPERATIONS = ("bulk_insert", "insert")
"""Operations ``--allow-duplicates`` applies to (Hudi's ``hoodie.combine.before.insert``)."""
_RECENT_COMMITS = 5


@dataclass
class WriteResult:
    """What a write did; ``stage_seconds`` in run order, request counts of the driver.
    ``already_committed``: the idempotency key was found on ``instant``, nothing written.
    ``instant`` is the write's requested time, ``completion_time`` when it completed
    (table versions 8 and 9 record it; on version 6, which records none, the requested
    time, by which version 6 readers order writes); ``as_of`` takes either."""

    instant: str
    operation: str
    rows_written: int
    rows_inserted: int
    rows_updated: int
    rows_deleted: int
    files_written: int
    replaced_file_groups: int = 0
    files_reconciled: int = 0
    stage_seconds: dict[str, float] = field(default_factory=dict)
    storage_requests: dict[str, int] = field(default_factory=dict)
    already_committed: bool = False
    tagging: str = "simple"
    """How keys were tagged: ``record`` (the record index) or ``simple`` (a join)."""
    lock_wait_s: float = 0.0
    """Time spent waiting for the table lock, to begin and to commit."""
    retention: RetentionResult | None = None
    """The inline clean and archival after the commit (None when off or failed)."""
    empty_input: bool = False
    """The input had no rows: nothing was written and no instant made (``instant`` is "")."""
    completion_time: str = ""


@dataclass(frozen=True)
class _Prepared:
    """Validated input: ``rows`` are the data columns for bulk_insert (keyed while writing),
    else keyed, deduplicated and persisted rows."""

    config: TableConfig
    table: HoodieTable | None
    rows: DataFrame
    row_count: int
    file_schema: pa.Schema
    avro_schema: str
    indexed: bool
    tagging: str


@dataclass
class TableMemo:
    """What a writer that writes one table again and again (a streaming query) keeps from
    one write to the next: the partitions its commits wrote, which exist from then on (a
    partition folder is never removed), so a batch's partition checks do not ask storage
    about them again."""

    partitions: set[str] = field(default_factory=set)


def write(
    spark: SparkSession,
    df: DataFrame,
    table_uri: str,
    operation: str,
    options: WriteOptions = DEFAULT_OPTIONS,
    *,
    listener: StageListener | None = None,
    memo: TableMemo | None = None,
) -> WriteResult:
    """Write ``df`` to the table at ``table_uri``, creating it when
    ``options.record_key_fields`` are given and there is no table yet (``WriteOptions``
    documents every option; its defaults are the CLI's). Raises tidemark.errors exceptions
    on bad input. A relative path is made absolute first: executors and the marker service
    run with other working directories. Service markers without an address get an embedded
    marker service in the driver, like Hudi's embedded timeline server.

    The outcome is the completed instant: once it is published the write returns it,
    whatever clean-up fails afterwards. An empty ``df`` (an empty micro-batch) writes
    nothing: the validation pass counts its rows, and with none the write returns before
    any service starts. (A separate emptiness check would stop the input's tasks after one
    row, and PySpark replaces every Python worker whose task stopped early.) A ``memo``
    carries what one write learned about the table to the next."""
    check_operation(operation)
    if options.allow_duplicates and operation not in DUPLICATING_OPERATIONS:
        raise InvalidArgumentError(
            f"only {' and '.join(DUPLICATING_OPERATIONS)} can keep duplicate keys, not {operation}",
            field="allow_duplicates",
        )
    table_uri = canonical_uri(table_uri)
    if options.marker_service_address:  # else an embedded service, started after prepare
        MarkerOptions(
            options.markers, options.marker_service_address, options.marker_fallback_direct
        ).check_reachable()
    check_executors_import(df.sparkSession)
    if options.index_service_address:
        IndexClient(options.index_service_address, table_uri).check_reachable()
    memo = memo or TableMemo()
    clock = StageClock(listener)
    request = TableRequest(
        tuple(options.record_key_fields),
        tuple(options.partition_fields),
        options.precombine_field,
        options.hive_style,
        options.url_encode_partitions,
        options.disable_hudi_metadata_table,
        options.table_version,
    )
    given = _Input(
        options.allow_duplicates,
        options.index,
        frozenset(memo.partitions),
        options.set_null_for_missing_columns,
    )
    with sized_shuffles(df, options.shuffle_parallelism):
        with clock.stage("prepare"):
            prepared = _prepare(df, table_uri, operation, request, given)
        if prepared.row_count == 0:
            log.info("write.empty_input", table=table_uri, operation=operation)
            return WriteResult("", operation, 0, 0, 0, 0, 0, empty_input=True)
        with serving_markers(options.markers, options.marker_service_address) as address:
            return _write(
                spark,
                _Request(df, table_uri, operation, request, given),
                prepared,
                options.with_marker_service(address),
                clock,
                memo,
            )


@dataclass(frozen=True)
class _Request:
    """What the caller asked for, kept to prepare the input again when another writer
    created the table meanwhile."""

    df: DataFrame
    table_uri: str
    operation: str
    table: TableRequest
    given: _Input


def _write(
    spark: SparkSession,
    asked: _Request,
    prepared: _Prepared,
    options: WriteOptions,
    clock: StageClock,
    memo: TableMemo,
) -> WriteResult:
    operation = asked.operation
    marker_options = MarkerOptions(
        options.markers, options.marker_service_address, options.marker_fallback_direct
    )
    retention = (
        RetentionSettings(CleanSettings(retain_commits=options.retain_commits))
        if options.auto_clean
        else None
    )
    try:
        table, prepared = _create_or_join(asked, prepared)
        with (
            index_client(
                table.uri, prepared.indexed, options.index_service_address
            ) as index_service,
            cancellable_jobs(spark, f"tidemark-write-{uuid.uuid4().hex}") as cancel,
        ):
            if operation == "insert_overwrite" and index_service is not None:
                _check_overwrite_keys(table, prepared.rows, index_service)
            job = _Options(
                marker_options,
                options.target_file_bytes,
                options.small_file_limit_bytes,
                options.sort_mode,
                options.idempotency_key,
                prepared.tagging,
                index_service,
                options.on_pending_clustering,
                memo,
                _Locking(options.lock_wait_s, options.lock_lease_s, cancel),
                options.disable_hudi_metadata_table,
            )
            result = _write_retrying(spark, table, prepared, operation, job, clock)
    finally:
        prepared.rows.unpersist()
    if retention is not None and not result.already_committed:
        with clock.stage("clean and archive"):
            result.retention = _retain(table, retention, options.lock_wait_s)
        result.stage_seconds = dict(clock.seconds)
    return result


def _retain(
    table: HoodieTable, settings: RetentionSettings, wait_s: float
) -> RetentionResult | None:
    """The inline clean and archival after a commit. The write is done whatever happens
    here: a failure is a warning, and the next write's run (or ``tidemark clean``)
    finishes what this one left."""
    try:
        return run_retention(table, settings, wait_s=wait_s)
    except TidemarkError as error:
        log.warning("write.retention_failed", table=table.uri, error=str(error))
        return None


PLAN_POLL_S = 0.5


def _await_plan(
    table: HoodieTable, waiting: pending_clustering.PlanRunningError, ends: float
) -> bool:
    """Wait, without the table lock, until the clustering plan a ``replan`` write touches
    is no longer running (committed, or failed and rolled back to a plan the write then
    replans) or, for a protected plan, no longer pending. Past ``ends`` (the write's
    ``lock_wait_s``) a protected plan whose run never started is given up (False); a run
    still going fails the write, untouched."""
    protected = isinstance(waiting, pending_clustering.PlanProtectedError)
    log.info(
        "write.waiting_for_clustering", table=table.uri, plan=waiting.instant, protected=protected
    )
    while time.monotonic() < ends:
        time.sleep(PLAN_POLL_S)
        table.timeline.reload()
        if not any(i.timestamp == waiting.instant for i in table.timeline.pending()):
            return True
        if not protected and live_run(table.storage, waiting.instant) is None:
            return True
    if protected and live_run(table.storage, waiting.instant) is None:
        log.warning("write.protected_plan_not_run", table=table.uri, plan=waiting.instant)
        return False
    raise with_note(waiting, "it did not commit within lock_wait_s; nothing was written")


def check_operation(operation: str) -> None:
    require_one_of("operation", operation, OPERATION_TYPES, "operation")


def _create_or_join(asked: _Request, prepared: _Prepared) -> tuple[HoodieTable, _Prepared]:
    """The table to write: the existing one, a new one, or, when another writer created
    it concurrently, that one (the input checked again against its layout)."""
    if prepared.table is not None:
        return prepared.table, prepared
    try:
        table = HoodieTable.create(asked.table_uri, prepared.config)
    except AlreadyExistsError:
        log.info("write.table_created_concurrently", table=asked.table_uri)
    else:
        if prepared.indexed:  # --index record on a new table: its index starts with it
            create_empty_index(table.storage, shard_count_for(prepared.row_count))
        return table, prepared
    prepared.rows.unpersist()
    try:
        joined = _prepare(asked.df, asked.table_uri, asked.operation, asked.table, asked.given)
    except InvalidArgumentError as error:
        raise with_note(
            error, "another writer created the table concurrently with a different layout"
        ) from error
    assert joined.table is not None
    return joined.table, joined


@dataclass(frozen=True)
class _Locking:
    """How a write takes the table lock and keeps its own lease: the wait for a holder, the
    lease, and what to do when a lease is lost (cancel the write's Spark jobs)."""

    wait_s: float
    lease_s: float
    cancel: Callable[[], None]


@dataclass(frozen=True)
class _Options:
    markers: MarkerOptions
    target_file_bytes: int
    small_file_limit_bytes: int
    sort_mode: str
    idempotency_key: str | None
    tagging: str
    index_client: IndexClient | None
    on_pending_clustering: str
    memo: TableMemo
    locking: _Locking
    disable_hudi_metadata_table: bool

    @contextmanager
    def locked(self, table: HoodieTable, wait_s: float | None = None) -> Iterator[StorageLease]:
        """The table lock for one of the write's two short steps (begin, commit)."""
        with changing(
            table,
            "write",
            wait_s=self.locking.wait_s if wait_s is None else wait_s,
            lease_s=self.locking.lease_s,
            on_lost=self.locking.cancel,
        ) as lock:
            yield lock


@dataclass(frozen=True)
class _Input:
    """How the input's keys are treated (duplicates kept, the tagging asked for) and the
    partitions known to exist (``TableMemo``)."""

    allow_duplicates: bool = False
    index: str | None = None
    known_partitions: frozenset[str] = frozenset()
    set_null_for_missing_columns: bool = False


@contextmanager
def index_client(
    table_uri: str, indexed: bool, address: str | None
) -> Iterator[IndexClient | None]:
    """A client of the index service for a table with a record index (an embedded service
    in the driver when no address is given), None for a table without one."""
    if not indexed:
        yield None
    elif address:
        yield IndexClient(address, table_uri)
    else:
        with start_embedded_service("index") as service:
            yield IndexClient(service.address, table_uri)


def _prepare(
    df: DataFrame, table_uri: str, operation: str, request: TableRequest, given: _Input
) -> _Prepared:
    """Validate everything that can be validated without the lock; nothing is written.
    Rows with duplicate keys are reduced to one per key (``keying.dedupe``) unless
    ``allow_duplicates``; a batch without duplicates is not shuffled. An empty input
    (``row_count`` 0) is returned as given, nothing persisted."""
    data = data_columns(df)
    check_column_names(arrow_schema(data.schema, data.sparkSession))
    table = _open_existing(table_uri, request)
    config = table.config if table else _new_config(table_uri, data, request)
    if table is not None:
        check_writable(config, disable_hudi_metadata_table=request.disable_hudi_metadata_table)
    if request.precombine_field:
        config = replace(config, precombine_field=request.precombine_field)
    creates_index = table is None and given.index == "record"
    indexed = creates_index or (table is not None and RecordIndex.exists(table.storage))
    tagging = choose_tagging(
        given.index, indexed, lambda: table is not None and index_building(table.storage)
    )
    if given.allow_duplicates and indexed:
        raise InvalidArgumentError(
            "the table has a record index, which maps each key to one file group",
            field="allow_duplicates",
        )
    if operation != "delete" or table is None:
        check_fields(data, config)  # a delete that creates the table gives its layout
    if operation != "delete" and table is not None:
        data = conform_to_table(
            data,
            table.current_avro_schema(),
            protected_fields=(*config.record_key_fields, *config.partition_fields),
            fill_missing=given.set_null_for_missing_columns,
        )
    data_schema = arrow_schema(data.schema, data.sparkSession)
    storage = table.storage if table is not None else open_storage(table_uri)
    counts = validate_input(
        data, config, operation, table, storage.max_path_bytes, given.known_partitions
    )
    deduplicate = counts.has_duplicate_keys and not given.allow_duplicates
    row_count = counts.keys if deduplicate else counts.rows
    if row_count == 0:
        rows = data
    elif operation == "bulk_insert":
        rows = without_deleted(dedupe(data, config) if deduplicate else data)
    else:
        if operation == "delete":
            rows = delete_keys(data, config)
            config_of_rows = replace(config, precombine_field=None)
        else:
            rows, config_of_rows = with_keys(data, config), config
        if deduplicate:
            rows = dedupe(rows, config_of_rows)
        if operation == "insert_overwrite":
            rows = without_deleted(rows)
        rows.persist(StorageLevel.MEMORY_AND_DISK)
        run_spark_action(rows.count)
    if operation == "delete" and table is not None:
        file_schema = _latest_file_schema(table) or arrow_schema(
            keyed_schema(data), data.sparkSession
        )
        avro_schema = table.current_avro_schema()
    else:
        file_schema = arrow_schema(keyed_schema(data), data.sparkSession)
        avro_schema = arrow_to_avro_schema(data_schema, config.name)
    return _Prepared(config, table, rows, row_count, file_schema, avro_schema, indexed, tagging)


def _open_existing(table_uri: str, request: TableRequest) -> HoodieTable | None:
    try:
        table = HoodieTable.open(table_uri)
    except NotFoundError as missing:
        if missing.field != "table":
            raise
        if request.record_key_fields:
            return None
        raise with_note(
            missing, "a write creates the table when given its record key (--key)"
        ) from missing
    check_layout(table.config, request)
    return table


def _new_config(table_uri: str, data: DataFrame, request: TableRequest) -> TableConfig:
    name = table_name_from_uri(table_uri)
    keys, partitions = request.record_key_fields, request.partition_fields
    return TableConfig(
        name=name,
        record_key_fields=keys,
        partition_fields=partitions,
        precombine_field=request.precombine_field,
        hive_style=request.hive_style,
        avro_schema=arrow_to_avro_schema(arrow_schema(data.schema, data.sparkSession), name),
        key_generator_class=TableConfig.default_key_generator(keys, partitions),
        url_encode_partitions=request.url_encode_partitions,
        table_version=request.table_version or DEFAULT_TABLE_VERSION,
    )


def _latest_file_schema(table: HoodieTable) -> pa.Schema | None:
    files = table.view().latest_base_files()
    if not files:
        return None
    newest = max(files, key=lambda f: f.instant)
    with table.storage.open_input(newest.path) as stream:
        return pq.read_schema(stream)


class _RolledBackError(Exception):
    """A write that conflicted at its commit with one completed meanwhile, rolled back."""

    def __init__(self, conflict: ConflictError) -> None:
        super().__init__(conflict.message)
        self.conflict = conflict


def _write_retrying(
    spark: SparkSession,
    table: HoodieTable,
    prepared: _Prepared,
    operation: str,
    options: _Options,
    clock: StageClock,
) -> WriteResult:
    """Tag without the table lock, begin under it, write without it, commit under it. A
    write rolled back for a conflict at its commit, or one whose file groups a running
    clustering plan holds (``replan``: it waits for the run to end), is tagged and begun
    again against the table as it now is, until ``lock_wait_s`` has passed."""
    ends = time.monotonic() + options.locking.wait_s
    abandoned: set[str] = set()
    while True:
        tagged = None
        if operation != "bulk_insert":
            with clock.stage("index lookup and sizing"):
                tagged = _tag(spark, table, prepared.rows, operation, options)
        try:
            with options.locked(table) as lock:
                if prepared.table is not None:
                    remove_hudi_metadata_table(table, disable=options.disable_hudi_metadata_table)
                begun = _begin(
                    spark, table, prepared, operation, options, lock, clock, tagged, abandoned
                )
        except pending_clustering.PlanRunningError as waiting:
            _release(tagged)
            if not _await_plan(table, waiting, ends):
                abandoned.add(waiting.instant)
            continue
        except BaseException:
            _release(tagged)
            raise
        if isinstance(begun, WriteResult):
            _release(tagged)
            return begun
        try:
            return _finish(spark, table, prepared, operation, options, begun, clock)
        except _RolledBackError as rolled_back:
            instant = begun.context.instant
            if time.monotonic() >= ends:
                note = f"instant {instant} was rolled back; retried until lock_wait_s passed"
                raise with_note(rolled_back.conflict, note) from rolled_back
            log.info(
                "write.retrying_after_conflict",
                table=table.uri,
                instant=instant,
                conflict=rolled_back.conflict.message,
            )


def _release(tagged: _Tagged | None) -> None:
    if tagged is not None:
        tagged.rows.unpersist()


@dataclass(frozen=True)
class _Begun:
    """A write begun under the table lock: its instant requested and inflight (the
    inflight names its file groups, Hudi's workload profile), its own lease held. Its
    files are written after the lock is released."""

    context: WriteContext
    lease: StorageLease
    stats_df: DataFrame
    tagged: DataFrame | None
    routed: tuple[DataFrame, WritePlan] | None
    replaced: dict[str, list[str]]
    seen: frozenset[str]
    """The writes completed when the batch was tagged: any other that completes before
    this one commits ran beside it."""
    given_up: tuple[pending_clustering.GivenUp, ...]
    """The clustering plans this write took file groups from (its commit records them)."""
    lock_wait_s: float
    """How long the begin waited for the table lock."""


def _begin(
    spark: SparkSession,
    table: HoodieTable,
    prepared: _Prepared,
    operation: str,
    options: _Options,
    lock: StorageLease,
    clock: StageClock,
    tagged: _Tagged | None,
    abandoned: set[str],
) -> _Begun | WriteResult:
    """Under the table lock: refuse what changed since prepare, honour the idempotency
    key, roll back failed writes (pending writes whose writers hold no live lease), size
    the tagged batch (or a bulk_insert), take the write's lease and request its
    instant."""
    if options.index_client is None and RecordIndex.exists(table.storage):
        raise ConflictError(
            "a record index was built while this write prepared; nothing was written, retry",
            field="index",
        )
    if options.idempotency_key is not None:
        earlier = committed_with_key(table, options.idempotency_key)
        if earlier is not None:  # its writer may have died before deleting its lease
            _forget_lease_quietly(table, earlier)
            return _already_committed(table, earlier, operation, options, clock)
    with clock.stage("rollback failed writes"):
        _roll_back_failed_writes(table, options.markers.reader(table, lock.holder), options)
        delete_stale_marker_dirs(table)
    action = REPLACE_COMMIT if operation == "insert_overwrite" else COMMIT
    replaced: dict[str, list[str]] = {}
    given_up: list[pending_clustering.GivenUp] = []
    routed: tuple[DataFrame, WritePlan] | None = None
    if tagged is None:
        seen = frozenset(i.timestamp for i in table.timeline.completed(WRITE_ACTIONS))
        context = _context(table, prepared, options, action)
        expected_bytes = prepared.row_count * average_record_size(_recent_commits(table))
        stats_df = bulk_insert(
            prepared.rows,
            prepared.config,
            context,
            expected_bytes,
            options.target_file_bytes,
            options.sort_mode,
        )
    else:
        seen = tagged.seen
        plan, replaced, given_up = _size(
            table, prepared.rows, tagged, operation, options, abandoned
        )
        context = _context(table, prepared, options, action)  # after rolling back clustering plans
        routed = route(tagged.rows, plan, deleting=operation == "delete"), plan
        stats_df = write_buckets(routed[0], plan, context)
    instant = context.instant
    lease = write_lease(
        table.storage,
        instant,
        owner_name("write"),
        options.locking.lease_s,
        on_lost=options.locking.cancel,
    )
    lease.acquire()
    try:
        table.timeline.create_requested(instant, action)
        profile = _workload_profile(routed[1] if routed else None, operation, replaced, given_up)
        table.timeline.transition_inflight(
            instant, action, table.timeline.encode_metadata(profile, action)
        )
    except BaseException:
        release_quietly(lease)
        raise
    log.info("write.started", table=table.uri, instant=instant, operation=operation)
    rows = tagged.rows if tagged is not None else None
    return _Begun(
        context, lease, stats_df, rows, routed, replaced, seen, tuple(given_up), lock.waited_s
    )


def _workload_profile(
    plan: WritePlan | None,
    operation: str,
    replaced: dict[str, list[str]],
    given_up: list[pending_clustering.GivenUp],
) -> CommitMetadata:
    """What the inflight instant says the write will touch, as Hudi's writers put it
    there: one stat per planned file group (the planner leaves those groups out of new
    plans while the write runs), the groups an insert_overwrite replaces, and the
    clustering plans it took groups from."""
    stats = [
        WriteStat(b.file_id, "", b.prev_commit, 0, 0, 0, 0, 0, 0, b.partition_path)
        for b in (plan.buckets if plan else [])
    ]
    return CommitMetadata.from_write_stats(
        stats,
        OPERATION_TYPES[operation],
        "",
        replaced,
        extra_metadata=pending_clustering.encode_given_up(given_up),
    )


def _finish(
    spark: SparkSession,
    table: HoodieTable,
    prepared: _Prepared,
    operation: str,
    options: _Options,
    begun: _Begun,
    clock: StageClock,
) -> WriteResult:
    """Write the files and stage the index changes without the table lock (the write's
    lease fences them), then commit under it."""
    instant = begun.context.instant
    with holding(begun.lease):
        try:
            try:
                with clock.stage("write files"):
                    stats = stats_from_rows(run_spark_action(begun.stats_df.collect))
                if options.index_client is not None:
                    with clock.stage("stage index changes"):
                        _stage_index_changes(
                            spark,
                            table,
                            instant,
                            operation,
                            stats,
                            begun.routed,
                            begun.replaced,
                            options,
                        )
                faults.exit_if_requested("before_commit")
                faults.hold_if_requested("before_commit")
                metadata = CommitMetadata.from_write_stats(
                    stats,
                    OPERATION_TYPES[operation],
                    prepared.avro_schema,
                    begun.replaced,
                    extra_metadata={
                        **pending_clustering.encode_given_up(begun.given_up),
                        **(
                            {IDEMPOTENCY_KEY: options.idempotency_key}
                            if options.idempotency_key is not None
                            else {}
                        ),
                    },
                )
                with clock.stage("commit"):
                    committed = _commit(spark, table, begun, metadata, options)
            finally:
                if begun.tagged is not None:
                    begun.tagged.unpersist()
        except TidemarkError as error:
            raise with_note(error, _outcome_of_failed_write(table, instant)) from error
    _forget_lease_quietly(table, instant)
    if isinstance(committed.outcome, str):
        return _already_committed(table, committed.outcome, operation, options, clock)
    options.memo.partitions.update(metadata.partition_to_write_stats)
    result = _result(instant, operation, stats, begun.replaced, clock, table)
    result.files_reconciled = len(committed.outcome)
    result.tagging = options.tagging
    result.lock_wait_s = begun.lock_wait_s + committed.lock_wait_s
    return result


def _forget_lease_quietly(table: HoodieTable, instant: str) -> None:
    """Delete the lease of a write that is decided; a failure is a warning, as the next
    write deletes the leases of instants that are not pending."""
    try:
        forget_write(table.storage, instant)
    except TidemarkError as error:
        log.warning("write.lease_left", table=table.uri, instant=instant, error=str(error))


def _already_committed(
    table: HoodieTable, earlier: str, operation: str, options: _Options, clock: StageClock
) -> WriteResult:
    log.info("write.already_committed", instant=earlier, key=options.idempotency_key)
    return replace(_result(earlier, operation, [], {}, clock, table), already_committed=True)


@dataclass(frozen=True)
class _Committed:
    """The commit's outcome: the stray files reconcile deleted, or the instant that
    already carries this write's idempotency key (``_commit_locked``); and how long it
    waited for the table lock."""

    outcome: list[str] | str
    lock_wait_s: float


def _commit(
    spark: SparkSession,
    table: HoodieTable,
    begun: _Begun,
    metadata: CommitMetadata,
    options: _Options,
) -> _Committed:
    """Publish the write under the table lock. On table version 6, which records no
    completion times, writes complete in instant order (Hudi 0.x's incremental readers
    assume it): while a write requested earlier still runs, the commit waits without the
    lock, up to ``lock_wait_s`` in all."""
    instant = begun.context.instant
    ends = time.monotonic() + options.locking.wait_s
    waiting_for = None
    waited_s = 0.0
    while True:
        with options.locked(table, wait_s=max(0.0, ends - time.monotonic())) as lock:
            waited_s += lock.waited_s
            begun.lease.check()
            running, failed = other_writes(table, instant)
            if failed:  # their writers died while this one ran
                reader = options.markers.reader(table, lock.holder)
                _roll_back_failed_writes(table, reader, options, exclude=instant)
            ordered = table.timeline.LAYOUT == 1
            earlier = [other for other in running if ordered and other.timestamp < instant]
            if not earlier:
                outcome = _commit_locked(spark, table, begun, metadata, options, lock)
                return _Committed(outcome, waited_s)
        if time.monotonic() >= ends:
            raise ConflictError(
                f"write {earlier[0].timestamp}, requested before this one, did not complete "
                "within lock_wait_s (table version 6 completes writes in instant order)",
                field="instant",
            )
        if waiting_for != earlier[0].timestamp:
            waiting_for = earlier[0].timestamp
            log.info("write.waiting_for_earlier_write", instant=instant, earlier=waiting_for)
        time.sleep(PLAN_POLL_S)


def _commit_locked(
    spark: SparkSession,
    table: HoodieTable,
    begun: _Begun,
    metadata: CommitMetadata,
    options: _Options,
    lock: StorageLease,
) -> list[str] | str:
    """Under the table lock, against the writes completed since the batch was tagged: one
    carrying its idempotency key means this batch is in the table already (this instant
    is rolled back, that one returned); a shared file group or a key both inserted is a
    conflict (this instant is rolled back, ConflictError(field="instant"): retry)."""
    instant, action = begun.context.instant, begun.context.action
    reader = options.markers.reader(table, lock.holder)
    try:
        if options.index_client is None and RecordIndex.exists(table.storage):
            raise ConflictError(
                "a record index was built while this write ran, which staged nothing in it; retry",
                field="index",
            )
        concurrent = table.timeline.concurrent_writes(instant, begun.seen)
        done = _carrying_key(table, concurrent, options.idempotency_key)
        if done is not None:
            _roll_back_own(table, instant, reader, options)
            return done
        _check_keys_not_inserted(spark, table, begun, metadata, concurrent, options)
        return complete_commit(table, instant, action, metadata, reader, seen=begun.seen)
    except ConflictError as conflict:
        if conflict.field == "lock":
            raise
        _roll_back_own(table, instant, reader, options)
        raise _RolledBackError(conflict) from conflict


def _roll_back_failed_writes(
    table: HoodieTable, reader: MarkerReader, options: _Options, exclude: str | None = None
) -> None:
    """Roll back the failed writes (``commit.rollback_failed_writes``) and discard the index
    changes they staged."""
    undone = rollback_failed_writes(
        table, reader, lock_held=True, exclude=() if exclude is None else (exclude,)
    )
    if options.index_client is not None:
        for result in undone:
            options.index_client.discard(result.rolled_back.timestamp)


def _roll_back_own(
    table: HoodieTable, instant: str, reader: MarkerReader, options: _Options
) -> None:
    rollback(table, instant, reader)
    if options.index_client is not None:
        options.index_client.discard(instant)
    forget_write(table.storage, instant)


def _carrying_key(table: HoodieTable, writes: list[Instant], key: str | None) -> str | None:
    """The write among ``writes`` whose extraMetadata carries idempotency key ``key``."""
    for instant in writes:
        if (
            key is not None
            and table.timeline.read_metadata(instant).extra_metadata.get(IDEMPOTENCY_KEY) == key
        ):
            return instant.timestamp
    return None


def _check_keys_not_inserted(
    spark: SparkSession,
    table: HoodieTable,
    begun: _Begun,
    metadata: CommitMetadata,
    concurrent: list[Instant],
    options: _Options,
) -> None:
    """No key this write inserts as new was inserted by a write that completed meanwhile
    (in another file group: the table would hold it twice). Upserts and every write to a
    table with a record index keep keys unique; inserts into a table without one do not
    look keys up even when run one after another. Reads the keys of the other writes'
    files only when there are some; clustering commits insert no key."""
    operation = metadata.operation_type
    unique = operation == OPERATION_TYPES["upsert"] or options.index_client is not None
    if operation == OPERATION_TYPES["delete"] or not unique:
        return
    if not any(stat.num_inserts for stat in metadata.write_stats):
        return
    written = [
        file
        for other in concurrent
        for other_metadata in [table.timeline.read_metadata(other)]
        if other_metadata.operation_type != CLUSTER_OPERATION
        for file in new_files(other_metadata.write_stats, other.timestamp)
    ]
    if not written:
        return
    if begun.tagged is not None:
        ours = begun.tagged.where(sf.col(OLD_FILE_ID).isNull()).select(RECORD_KEY)
    else:  # a bulk_insert: every key it wrote is new
        mine = new_files(metadata.write_stats, begun.context.instant)
        ours = existing_keys(spark, table.uri, table.config, mine).select(RECORD_KEY)
    theirs = existing_keys(spark, table.uri, table.config, written)
    [clash] = run_spark_action(
        theirs.join(ours, RECORD_KEY, "left_semi")
        .agg(sf.count(sf.lit(1)).alias("keys"), sf.min(RECORD_KEY).alias("key"))
        .collect
    )
    if clash["keys"]:
        raise ConflictError(
            f"key {clash['key']!r} ({clash['keys']} keys in all) was inserted by a write that "
            "completed while this one ran; retry the write",
            field="instant",
        )


def _context(
    table: HoodieTable, prepared: _Prepared, options: _Options, action: str
) -> WriteContext:
    """The write's new instant (after every instant on the timeline) and what executors
    need to write its files."""
    instant = new_instant_time(after=table.timeline.latest_timestamp())
    return WriteContext(
        table_uri=table.uri,
        instant=instant,
        action=action,
        markers=options.markers.spec(table.uri, instant),
        file_schema=prepared.file_schema,
        config=prepared.config,
    )


def _outcome_of_failed_write(table: HoodieTable, instant: str) -> str:
    """Whether the instant of a write that raised committed, read from the timeline."""
    try:
        table.timeline.reload()
        committed = table.timeline.find(instant).is_completed
    except NotFoundError:
        return f"instant {instant} was rolled back"
    except TidemarkError:
        return (
            f"whether instant {instant} committed is unknown (the timeline cannot be read); "
            "a retry with the same idempotency key is safe"
        )
    if committed:
        return f"instant {instant} is committed"
    return f"instant {instant} was not committed (the next write rolls it back)"


def _stage_index_changes(
    spark: SparkSession,
    table: HoodieTable,
    instant: str,
    operation: str,
    stats: list[WriteStat],
    routed: tuple[DataFrame, WritePlan] | None,
    replaced: dict[str, list[str]],
    options: _Options,
) -> None:
    """Stage the commit's index changes (``spark_jobs.index_writes``) before it completes:
    from the routed rows, or the keys of a bulk_insert's new files; an insert_overwrite
    also removes the keys of the file groups it replaced. A bulk_insert first checks that
    its keys are new (the changes are kept for both passes; an insert_overwrite checked
    its keys before writing, in ``_plan``). Nothing is staged when every row updated its
    key in place."""
    assert options.index_client is not None
    if (
        routed is not None
        and not replaced
        and not any(s.num_inserts or s.num_deletes for s in stats)
    ):
        return  # updates in place keep every entry: no Spark job for a batch of updates
    if routed is None:
        changes = file_changes(spark, table.uri, table.config, new_files(stats, instant))
    else:
        changes = bucket_changes(*routed)
    if replaced:
        gone = {(p, f) for p, ids in replaced.items() for f in ids}
        old = [f for f in table.view().latest_base_files() if (f.partition_path, f.file_id) in gone]
        changes = replaced_changes(spark, table.uri, table.config, old, changes)
    checking = operation == "bulk_insert"
    if checking:
        changes = changes.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        if checking:
            placed = changes.where(sf.col("file_id").isNotNull())
            _check_new_keys(table, placed, {}, options.index_client)
        stage_changes(options.index_client, instant, changes, stats, operation == "delete")
    finally:
        changes.unpersist()


def _check_overwrite_keys(table: HoodieTable, keyed: DataFrame, client: IndexClient) -> None:
    """Before the lock (a refusal leaves the table as it was): an insert_overwrite's keys
    are not held outside the file groups of the partitions it replaces. ``_plan`` checks
    again under the lock, before any file is written, for a writer that came between."""
    partitions = {row[0] for row in keyed.select(PARTITION_PATH).distinct().collect()}
    latest = table.view().latest_base_files(partitions)
    replaced = {p: [f.file_id for f in latest if f.partition_path == p] for p in partitions}
    _check_new_keys(table, keyed.select(sf.col(RECORD_KEY).alias("key")), replaced, client)


def _check_new_keys(
    table: HoodieTable, keys: DataFrame, replaced: dict[str, list[str]], client: IndexClient
) -> None:
    """``keys`` are not in the table outside the ``replaced`` file groups (the index as of
    the last completed instant)."""
    last = table.timeline.last_completed()
    as_of = last.timestamp if last else None
    check_new_keys(client, keys, {f for ids in replaced.values() for f in ids}, as_of)


@dataclass(frozen=True)
class _Tagged:
    """A batch's keys tagged with their file groups, without the table lock: ``seen``
    are the writes completed when it was tagged (a write completed later may conflict),
    ``touched`` the latest base files of the groups its keys are in, ``inserts`` the new
    rows per partition, ``latest`` the base files of the partitions it goes to or comes
    from."""

    rows: DataFrame
    seen: frozenset[str]
    latest: list[BaseFile]
    touched: list[BaseFile]
    inserts: dict[str, int]


def _tag(
    spark: SparkSession,
    table: HoodieTable,
    keyed: DataFrame,
    operation: str,
    options: _Options,
) -> _Tagged:
    """Tag keys with their file groups (upsert, delete; insert too with a record index),
    as of the latest completed write, and count what goes where; runs without the table
    lock. Tagged by the record index, only the partitions the batch goes to or comes from
    are listed: the file view costs what the batch touches, not the table."""
    table.timeline.refresh()
    seen = frozenset(i.timestamp for i in table.timeline.completed(WRITE_ACTIONS))
    view = table.view()
    looked_up = ("upsert", "delete", "insert") if options.index_client else ("upsert", "delete")
    latest: list[BaseFile] | None = None
    if operation not in looked_up:
        tagged = tag(keyed, None)
    elif options.tagging == "record":
        assert options.index_client is not None
        last = table.timeline.last_completed()
        as_of = last.timestamp if last else None
        tagged = (
            tag(keyed, None) if last is None else tag_with_index(keyed, options.index_client, as_of)
        )
    else:
        latest = view.latest_base_files()
        tagged = tag(
            keyed, existing_keys(spark, table.uri, table.config, latest) if latest else None
        )
    tagged = tagged.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        return _profiled(table, tagged, seen, view, latest, operation)
    except BaseException:
        tagged.unpersist()
        raise


def _profiled(
    table: HoodieTable,
    tagged: DataFrame,
    seen: frozenset[str],
    view: FileSystemView,
    latest: list[BaseFile] | None,
    operation: str,
) -> _Tagged:
    """``_tag`` once keys are tagged: the file groups the write touches and its inserts
    per partition. ``latest``: the table's latest base files when tagging listed them
    already, else the partitions the batch's rows go to and come from are listed here."""
    profile = run_spark_action(
        tagged.groupBy(PARTITION_PATH, OLD_PARTITION, OLD_FILE_ID).count().collect
    )
    if latest is None:  # a delete's rows carry no partition path: only where keys are
        partitions = {row[PARTITION_PATH] for row in profile if operation != "delete"}
        partitions |= {row[OLD_PARTITION] for row in profile if row[OLD_FILE_ID] is not None}
        latest = view.latest_base_files(partitions)
    by_file = {f.file_id: f for f in latest}
    inserts: dict[str, int] = {}
    touched: list[BaseFile] = []
    for row in profile:
        old_file = row[OLD_FILE_ID]
        if old_file is not None:
            if old_file not in by_file:
                raise FailedPreconditionError(
                    f"the record index places keys in file group {old_file} "
                    f"(partition {row[OLD_PARTITION]!r}), which the table does not have "
                    "(rebuild the index with `tidemark index build --rebuild`)",
                    field="index",
                )
            touched.append(by_file[old_file])
        moved = old_file is not None and row[OLD_PARTITION] != row[PARTITION_PATH]
        if moved and operation != "delete" and table.config.orders_by_event_time:
            raise FailedPreconditionError(
                f"value 'EVENT_TIME_ORDERING' is not supported for writes moving keys to "
                f"another partition ({row[OLD_PARTITION]!r} to {row[PARTITION_PATH]!r}): the "
                "stored record may be the newer one",
                field="hoodie.record.merge.mode",
            )
        if operation != "delete" and (old_file is None or moved):
            partition = row[PARTITION_PATH]
            inserts[partition] = inserts.get(partition, 0) + row["count"]
    return _Tagged(tagged, seen, latest, touched, inserts)


def _size(
    table: HoodieTable,
    keyed: DataFrame,
    tagged: _Tagged,
    operation: str,
    options: _Options,
    abandoned: set[str],
) -> tuple[WritePlan, dict[str, list[str]], list[pending_clustering.GivenUp]]:
    """Under the table lock: the file groups the write touches (pending plans holding them
    resolved by ``options.on_pending_clustering``) and the file sizing. A write that
    completed since the tagging and changed one of these groups is found at the commit."""
    clustering = pending_clustering.PendingClustering.load(table)
    replaced: dict[str, list[str]] = {}
    small: list[BaseFile] = []
    if operation == "insert_overwrite":
        for base in tagged.latest:
            if base.partition_path in tagged.inserts:
                replaced.setdefault(base.partition_path, []).append(base.file_id)
    elif operation in ("insert", "upsert"):
        small = [
            f
            for f in clustering.small_files(tagged.latest)
            if f.partition_path in tagged.inserts and f.size < options.small_file_limit_bytes
        ]
    if operation == "insert_overwrite" and options.index_client is not None:
        # decided before any file is written: no instant is left for the next write
        keys = keyed.select(sf.col(RECORD_KEY).alias("key"))
        _check_new_keys(table, keys, replaced, options.index_client)
    changed = [(f.partition_path, f.file_id) for f in tagged.touched]
    changed += [(partition, file_id) for partition, ids in replaced.items() for file_id in ids]
    given_up = clustering.resolve(changed, options.on_pending_clustering, abandoned=abandoned)
    if options.index_client is not None:  # what a dead run of the plans staged
        for gone in given_up:
            options.index_client.discard(gone.plan)
    plan = plan_writes(
        touched_files=tagged.touched,
        inserts_per_partition=tagged.inserts,
        small_files=small,
        record_size=average_record_size(_recent_commits(table)),
        target_file_bytes=options.target_file_bytes,
    )
    return plan, replaced, given_up


def _recent_commits(table: HoodieTable) -> list[CommitMetadata]:
    completed = table.timeline.completed(frozenset({COMMIT, REPLACE_COMMIT}))
    return [table.timeline.read_metadata(i) for i in reversed(completed[-_RECENT_COMMITS:])]


def _result(
    instant: str,
    operation: str,
    stats: list[WriteStat],
    replaced: dict[str, list[str]],
    clock: StageClock,
    table: HoodieTable,
) -> WriteResult:
    return WriteResult(
        instant=instant,
        completion_time=completion_times(table.timeline)(instant),
        operation=operation,
        rows_written=sum(s.num_writes for s in stats),
        rows_inserted=sum(s.num_inserts for s in stats),
        rows_updated=sum(s.num_update_writes for s in stats),
        rows_deleted=sum(s.num_deletes for s in stats),
        files_written=len(stats),
        replaced_file_groups=sum(len(ids) for ids in replaced.values()),
        stage_seconds=dict(clock.seconds),
        storage_requests=table.storage.requests.snapshot(),
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The write options, shared by ``tidemark write`` and ``spark-submit``."""
    parser.add_argument("--table", required=True, help="table base URI (path or s3://)")
    parser.add_argument("--input", required=True, help="Parquet, CSV or JSON Lines path")
    parser.add_argument("--format", choices=FORMATS, help="input format (default: extension)")
    parser.add_argument("--op", required=True, help=", ".join(OPERATION_TYPES))
    parser.add_argument("--key", type=_fields, default=(), help="record key field(s), a,b")
    parser.add_argument("--partition", type=_fields, default=(), help="partition field(s)")
    parser.add_argument("--precombine", help="field deciding between duplicate keys")
    parser.add_argument("--hive-style", action="store_true", help="field=value partitions")
    parser.add_argument(
        "--urlencode-partitions",
        action="store_true",
        help="URL-encode partition values as Hudi does (table creation only)",
    )
    add_table_version_argument(parser, default=None)
    add_job_options(parser)
    parser.add_argument(
        "--marker-fallback-direct",
        action="store_true",
        help="write direct markers when the marker service stays unreachable after retries",
    )
    parser.add_argument(
        "--idempotency-key",
        help="stored with the commit; a write whose key a completed instant already "
        "carries does nothing and reports that instant (makes a retry after an ambiguous "
        "failure safe)",
    )
    parser.add_argument(
        "--disable-hudi-metadata-table",
        action="store_true",
        help="remove Hudi's metadata table (.hoodie/metadata), which Tidemark does not "
        "update; without it writes to such tables are refused",
    )
    parser.add_argument(
        "--allow-duplicates",
        action="store_true",
        help="bulk_insert and insert: write every row of a key that comes several times "
        "(Hudi's hoodie.combine.before.insert=false); default: one row per key, the largest "
        "precombine value, ties to the last in input order",
    )
    parser.add_argument(
        "--set-null-for-missing-columns",
        action="store_true",
        help="write the table's columns the input lacks as nulls (Hudi's "
        "hoodie.write.set.null.for.missing.columns); default: such an input is refused",
    )
    parser.add_argument(
        "--index",
        choices=TAGGINGS,
        help="how keys are tagged with their file groups: record (the record index; the "
        "default once the table has one) or simple (join with the latest base files); a "
        "table's record index is kept in step either way",
    )
    parser.add_argument("--target-file-mb", type=int, default=DEFAULT_TARGET_FILE_BYTES // MIB)
    parser.add_argument("--small-file-mb", type=int, default=DEFAULT_SMALL_FILE_LIMIT_BYTES // MIB)
    parser.add_argument(
        "--sort-mode",
        choices=SORT_MODES,
        default=DEFAULT_SORT_MODE,
        help="bulk_insert layout (default none, as in Hudi: no shuffle; global_sort: "
        "fewest files, tightest key ranges)",
    )
    pending_clustering.add_argument(parser)
    parser.add_argument(
        "--no-auto-clean",
        action="store_true",
        help="do not clean and archive after the commit (Hudi's hoodie.clean.automatic=false)",
    )
    parser.add_argument(
        "--retain-commits",
        type=int,
        default=DEFAULT_RETAIN_COMMITS,
        help=f"commits whose snapshots the inline clean keeps readable "
        f"(default {DEFAULT_RETAIN_COMMITS})",
    )


def _fields(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def run(args: argparse.Namespace, listener: StageListener | None = None) -> WriteResult:
    """Run a write described by parsed ``add_arguments`` options: the same
    ``WriteOptions`` the Python API takes. The size options are checked first, by their
    names on the command line."""
    require_positive("target_file_mb", args.target_file_mb)
    require_non_negative("small_file_mb", args.small_file_mb, "no small-file top-up")
    options = WriteOptions.from_args(args)
    spark = build_session(args.master)
    source = read_input(
        spark,
        args.input,
        args.format,
        _column_types(args.table),
        exact_columns=(*args.key, *args.partition),
    )
    return write(spark, source, args.table, args.op, options, listener=listener)


def _column_types(table_uri: str) -> dict[str, DataType]:
    """The existing table's column types, to read CSV and JSON values as (none for a new
    table: its types are inferred from the input)."""
    try:
        table = HoodieTable.open(table_uri)
    except NotFoundError:
        return {}
    schema = avro_to_arrow_schema(table.current_avro_schema())
    return {field.name: from_arrow_type(field.type) for field in schema}


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit spark_jobs/write.py --table ... --op ...``; the master comes from
    spark-submit unless ``--master`` is given."""
    parser = argparse.ArgumentParser(prog="spark_jobs/write.py", description=__doc__)
    add_arguments(parser)
    parser.set_defaults(master=None)
    args = parser.parse_args(argv)
    result = run(args)
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
