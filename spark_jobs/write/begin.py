"""The write begun under the table lock (``begin``): what changed since the input was
prepared refused, the idempotency key honoured, failed writes rolled back, the batch's
file groups planned and sized, the write's own lease taken and its instant requested and
inflight."""

from __future__ import annotations

from dataclasses import dataclass

import structlog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from tidemark.errors import ConflictError
from tidemark.index.record_index import RecordIndex
from tidemark.jobs.buckets import route, write_buckets
from tidemark.jobs.bulk import bulk_insert
from tidemark.jobs.context import WriteContext
from tidemark.jobs.sizing import WritePlan, average_record_size, plan_writes
from tidemark.jobs.stages import StageClock
from tidemark.jobs.write.index import check_keys_new
from tidemark.jobs.write.job import ROLE, WriteJob
from tidemark.jobs.write.prepare import Prepared
from tidemark.jobs.write.result import OPERATION_TYPES, WriteResult, already_committed
from tidemark.jobs.write.tag import Tagged
from tidemark.jobs.write.undo import forget_lease_quietly, roll_back_failed_writes
from tidemark.table import HoodieTable
from tidemark.table.files.view import BaseFile
from tidemark.table.leases.storage_lease import StorageLease
from tidemark.table.leases.table_lock import owner_name, release_quietly
from tidemark.table.leases.write_lease import write_lease
from tidemark.table.metadata.actions import COMMIT, DELTA_COMMIT, REPLACE_COMMIT, WRITE_ACTIONS
from tidemark.table.metadata.commit import CommitMetadata, WriteStat
from tidemark.table.plans.compaction import refuse_compacting
from tidemark.table.properties.config import TableConfig
from tidemark.table.records.keys import RECORD_KEY
from tidemark.table.timeline.instant import new_instant_time
from tidemark.table.writes import pending_clustering
from tidemark.table.writes.commit import committed_with_key, delete_stale_marker_dirs

log = structlog.get_logger(__name__)

_RECENT_COMMITS = 5


@dataclass(frozen=True)
class Begun:
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


def begin(
    spark: SparkSession,
    table: HoodieTable,
    prepared: Prepared,
    operation: str,
    job: WriteJob,
    lock: StorageLease,
    clock: StageClock,
    tagged: Tagged | None,
    abandoned: set[str],
) -> Begun | WriteResult:
    """Under the table lock: refuse what changed since prepare, honour the idempotency
    key, roll back failed writes (pending writes whose writers hold no live lease), size
    the tagged batch (or a bulk_insert), take the write's lease and request its
    instant."""
    options = job.options
    if job.index is None and RecordIndex.exists(table.storage):
        raise ConflictError(
            "a record index was built while this write prepared; nothing was written, retry",
            field="index",
        )
    if options.idempotency_key is not None:
        earlier = committed_with_key(table, options.idempotency_key)
        if earlier is not None:  # its writer may have died before deleting its lease
            forget_lease_quietly(table, earlier)
            return already_committed(table, earlier, operation, options.idempotency_key, clock)
    with clock.stage("rollback failed writes"):
        roll_back_failed_writes(table, job.markers.reader(table, lock.holder), job)
        delete_stale_marker_dirs(table)
    action = write_action(prepared.config, operation)
    replaced: dict[str, list[str]] = {}
    given_up: list[pending_clustering.GivenUp] = []
    routed: tuple[DataFrame, WritePlan] | None = None
    if tagged is None:
        seen = frozenset(i.timestamp for i in table.timeline.completed(WRITE_ACTIONS))
        context = _new_context(table, prepared, job, action)
        assert prepared.row_count is not None  # bulk_insert's validation ran in prepare
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
        plan, replaced, given_up = size(table, prepared.rows, tagged, operation, job, abandoned)
        context = _new_context(table, prepared, job, action)  # after rolling back clustering plans
        routed = route(tagged.rows, plan, deleting=operation == "delete"), plan
        stats_df = write_buckets(routed[0], plan, context)
    instant = context.instant
    lease = write_lease(
        table.storage, instant, owner_name(ROLE), job.locking.lease_s, on_lost=job.locking.cancel
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
    return Begun(
        context, lease, stats_df, rows, routed, replaced, seen, tuple(given_up), lock.waited_s
    )


def size(
    table: HoodieTable,
    keyed: DataFrame,
    tagged: Tagged,
    operation: str,
    job: WriteJob,
    abandoned: set[str],
) -> tuple[WritePlan, dict[str, list[str]], list[pending_clustering.GivenUp]]:
    """Under the table lock: the file groups the write touches (pending plans holding them
    resolved by ``options.on_pending_clustering``) and the file sizing. On a merge-on-read
    table inserts go to new file groups, as Hudi's MOR writer puts them when the index
    cannot place keys in log files: small base files are not topped up (that would rewrite
    them), compaction and clustering fold small groups later. A write that
    completed since the tagging and changed one of these groups is found at the commit."""
    options = job.options
    clustering = pending_clustering.PendingClustering.load(table)
    replaced: dict[str, list[str]] = {}
    small: list[BaseFile] = []
    if operation == "insert_overwrite":
        for base in tagged.latest:
            if base.partition_path in tagged.inserts:
                replaced.setdefault(base.partition_path, []).append(base.file_id)
    elif operation in ("insert", "upsert") and not table.config.merge_on_read:
        small = [
            f
            for f in clustering.small_files(tagged.latest)
            if f.partition_path in tagged.inserts and f.size < options.small_file_limit_bytes
        ]
    if operation == "insert_overwrite" and job.index is not None:
        # decided before any file is written: no instant is left for the next write
        keys = keyed.select(sf.col(RECORD_KEY).alias("key"))
        check_keys_new(table, keys, replaced, job.index)
    changed = [(f.partition_path, f.file_id) for f in tagged.touched]
    changed += [(partition, file_id) for partition, ids in replaced.items() for file_id in ids]
    refuse_compacting(table, changed)
    given_up = clustering.resolve(changed, options.on_pending_clustering, abandoned=abandoned)
    if job.index is not None:  # what a dead run of the plans staged
        for gone in given_up:
            job.index.discard(gone.plan)
    plan = plan_writes(
        touched_files=tagged.touched,
        inserts_per_partition=tagged.inserts,
        small_files=small,
        record_size=average_record_size(_recent_commits(table)),
        target_file_bytes=options.target_file_bytes,
    )
    return plan, replaced, given_up


def write_action(config: TableConfig, operation: str) -> str:
    """The write's action, as Hudi's: an insert_overwrite replaces file groups
    (replacecommit); any other write commits, or on a merge-on-read table deltacommits."""
    if operation == "insert_overwrite":
        return REPLACE_COMMIT
    return DELTA_COMMIT if config.merge_on_read else COMMIT


def _recent_commits(table: HoodieTable) -> list[CommitMetadata]:
    completed = table.timeline.completed(WRITE_ACTIONS)
    return [table.timeline.read_metadata(i) for i in reversed(completed[-_RECENT_COMMITS:])]


def _new_context(
    table: HoodieTable, prepared: Prepared, job: WriteJob, action: str
) -> WriteContext:
    """The write's new instant (after every instant on the timeline) and what executors
    need to write its files."""
    instant = new_instant_time(after=table.timeline.latest_timestamp())
    return WriteContext(
        table_uri=table.uri,
        instant=instant,
        action=action,
        markers=job.markers.spec(table.uri, instant),
        file_schema=prepared.file_schema,
        config=prepared.config,
        log_block_format=job.options.log_block_format,
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
