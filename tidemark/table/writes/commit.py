"""Finishing and undoing writes: reconcile, complete, roll back failed instants.

Order matters for crash safety. A commit deletes stray files before it publishes the
completed instant, and the marker directory only afterwards, so a crash at any point
leaves either a pending instant (rolled back by the next writer) or a clean commit. A
rollback records its own instant before deleting the failed instant's timeline files.

The completed instant is a write's outcome: once it is published the write succeeded,
and a failure to clean up after it (the marker dir) is only logged; the next write
deletes marker dirs and leases of instants that are no longer pending.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import structlog

from tidemark.errors import (
    DataLossError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    TidemarkError,
)
from tidemark.storage.base import Storage
from tidemark.storage.damaged import read_parsed
from tidemark.table import HoodieTable
from tidemark.table.files import column_stats
from tidemark.table.files.file_names import is_base_file_name, parse_base_file_name, partition_of
from tidemark.table.leases.write_lease import WRITES_DIR, forget_write, live_writer
from tidemark.table.logfiles.file_names import is_log_file_name
from tidemark.table.metadata.actions import COMMIT, REPLACE_COMMIT, ROLLBACK, WRITE_ACTIONS
from tidemark.table.metadata.commit import CommitMetadata, WriteStat
from tidemark.table.metadata.rollback import InstantInfo, RollbackMetadata, RollbackPlan
from tidemark.table.plans.clustering import plan_of
from tidemark.table.timeline.instant import (
    Instant,
    instant_time_ago,
    is_instant_time,
    new_instant_time,
    validate_instant_time,
)
from tidemark.table.writes.markers import (
    MARKER_LEASE_ROOT,
    TEMP_DIR,
    MarkerReader,
    data_file_path,
    delete_marker_dir,
    marker_dir_instants,
    read_markers_from_storage,
)

log = structlog.get_logger(__name__)

IDEMPOTENCY_KEY = "tidemark.idempotency.key"
"""extraMetadata entry holding the caller's idempotency key of a write."""


@dataclass(frozen=True)
class RollbackResult:
    rollback_instant: str
    rolled_back: Instant
    deleted_files: list[str]


def reconcile(
    storage: Storage, instant: str, write_stats: Iterable[WriteStat], markers: MarkerReader
) -> list[str]:
    """Delete data files of ``instant`` that have a marker but are not in the commit (failed
    or speculative task attempts), and the temporaries of killed attempts in those
    partitions; returns the deleted paths. A marked log file is the instant's own (a log
    file is written whole, never appended to), whatever instant its name carries (on
    version 6 its slice's base instant)."""
    committed = {stat.path for stat in write_stats}
    marked = set(map(data_file_path, markers.all_markers(instant)))
    strays = sorted(
        path
        for path in marked
        if path not in committed and (_written_by(path, instant) or _is_log_file(path))
    )
    strays += _partial_files_of(storage, instant, set(map(partition_of, marked)))
    if strays:
        storage.delete_many(strays)
        log.info("commit.reconciled", instant=instant, deleted=len(strays))
    return strays


PARTITION_METADATA_WRITERS = 16
"""One create-if-absent per written partition; in parallel, as a write may touch
thousands of partitions and each request costs a storage round trip."""


def complete_commit(
    table: HoodieTable,
    instant: str,
    action: str,
    metadata: CommitMetadata,
    markers: MarkerReader,
    *,
    seen: Collection[str] | None = None,
) -> list[str]:
    """Reconcile, write partition metadata, publish the instant, drop the markers.
    Returns the stray files reconcile deleted. ``seen``: the writes completed when a write
    that ran without the table lock read the table, for the conflict check
    (``Timeline.check_concurrent``)."""
    if action not in WRITE_ACTIONS:
        raise InvalidArgumentError(f"cannot complete a {action!r} as a write", field="action")
    for stat in metadata.write_stats:
        own = _is_log_file(stat.path) if stat.is_delta else _written_by(stat.path, instant)
        if not own or partition_of(stat.path) != stat.partition_path:
            kind = "log file" if stat.is_delta else f"base file of instant {instant}"
            raise InvalidArgumentError(
                f"write stat path {stat.path!r} is not a {kind} in partition "
                f"{stat.partition_path!r}",
                field="write_stats",
            )
    table.timeline.check_concurrent(instant, metadata, seen)
    deleted = reconcile(table.storage, instant, metadata.write_stats, markers)
    with ThreadPoolExecutor(PARTITION_METADATA_WRITERS) as pool:
        list(
            pool.map(
                lambda partition: table.write_partition_metadata(partition, instant),
                metadata.partition_to_write_stats,
            )
        )
    base_files = [stat.path for stat in metadata.write_stats if not stat.is_delta]
    column_stats.record(table.storage, instant, base_files)
    _publish(table, instant, action, metadata)
    log.info("commit.completed", table=table.uri, instant=instant, action=action)
    _delete_marker_dir_after(table, instant, markers, "commit")
    return deleted


def _delete_marker_dir_after(
    table: HoodieTable, instant: str, markers: MarkerReader, outcome: str
) -> None:
    """Delete the marker dir once ``outcome`` (the commit, the rollback) is decided: a
    failure is only logged, as the next write deletes marker dirs of instants that are not
    pending."""
    try:
        markers.delete_dir(instant)
    except TidemarkError as error:
        log.warning(
            f"{outcome}.marker_dir_left",
            table=table.uri,
            instant=instant,
            error=str(error),
            note=f"the {outcome} is complete; the next write deletes the marker dir",
        )


def _publish(table: HoodieTable, instant: str, action: str, metadata: CommitMetadata) -> None:
    """Write the completed instant. A publish whose every answer was an error although it
    took effect (the first response lost, the retries refused) is a success."""
    try:
        table.timeline.complete(instant, action, table.timeline.encode_metadata(metadata, action))
    except TidemarkError:
        table.timeline.reload()
        if not table.timeline.find(instant).is_completed:
            raise
        log.warning("commit.published_despite_error", table=table.uri, instant=instant)


def committed_with_key(table: HoodieTable, key: str) -> str | None:
    """The completed write on the active timeline whose extraMetadata carries idempotency
    key ``key`` (newest first), or None."""
    table.timeline.refresh()
    for instant in reversed(table.timeline.completed(frozenset({COMMIT, REPLACE_COMMIT}))):
        if table.timeline.read_metadata(instant).extra_metadata.get(IDEMPOTENCY_KEY) == key:
            return instant.timestamp
    return None


def delete_stale_marker_dirs(table: HoodieTable) -> list[str]:
    """Delete marker dirs and marker-dir leases of instants that are not pending: commits
    whose clean-up failed, rolled-back writes a late task wrote into; and the leases of
    writes no longer pending. Run under the table lock after rolling back failed writes;
    returns the instants whose marker dirs were cleaned."""
    table.timeline.refresh()
    pending = {instant.timestamp for instant in table.timeline.pending()}
    stale = sorted(
        {
            folder.rpartition("/")[2]
            for root in (TEMP_DIR, MARKER_LEASE_ROOT)
            for folder in table.storage.list_dir(root).dirs
        }
        - pending
    )
    for instant in stale:
        if is_instant_time(instant):
            delete_marker_dir(table.storage, instant)
    if stale:
        log.info("commit.stale_marker_dirs_deleted", table=table.uri, instants=stale)
    leases = {folder.rpartition("/")[2] for folder in table.storage.list_dir(WRITES_DIR).dirs}
    for instant in sorted(leases - pending):
        forget_write(table.storage, instant)
    return stale


def rollback(
    table: HoodieTable, instant: str, markers: MarkerReader, *, keep_plan: bool = False
) -> RollbackResult:
    """Undo a pending (failed) write: revert it to requested (its tasks start no file from
    then on), read its markers, delete its data files, record a rollback instant naming
    every partition the markers name, then remove the failed instant's timeline files and
    markers. Files of tasks that started before the revert and publish later lie in those
    partitions, where the leftover clean-up of later writes finds them. With ``keep_plan``
    (a failed clustering run, as Hudi's rollbackInflightClustering) the requested plan
    stays pending, to be run again. The outcome is the completed rollback: failing to
    delete the marker dir after it is only logged (the next write deletes marker dirs of
    instants that are not pending)."""
    started = time.monotonic()
    timeline = table.timeline
    target = rollback_target(table, instant)
    timeline.revert_to_requested(target)
    written = _files_of_failed_write(table, instant, markers)
    files = written.base_files
    rollback_time = new_instant_time(after=timeline.latest_timestamp())
    undone = InstantInfo(instant, target.action)
    base = table.uri.rstrip("/")
    full_paths: dict[str, list[str]] = {partition: [] for partition in written.partitions}
    for partition, paths in _by_partition(files).items():
        full_paths[partition] = [f"{base}/{path}" for path in paths]
    timeline.create_requested(rollback_time, ROLLBACK, RollbackPlan(undone, full_paths).to_avro())
    timeline.transition_inflight(rollback_time, ROLLBACK)
    table.storage.delete_many([*files, *written.partial_files])
    metadata = RollbackMetadata(
        start_rollback_time=rollback_time,
        time_taken_ms=int((time.monotonic() - started) * 1000),
        instants_rollback=[undone],
        deleted_by_partition=full_paths,
    )
    timeline.complete(rollback_time, ROLLBACK, metadata.to_avro())
    column_stats.delete(table.storage, instant)
    if not keep_plan:
        timeline.delete_pending(target)
    _delete_marker_dir_after(table, instant, markers, "rollback")
    log.info("rollback.completed", table=table.uri, instant=instant, deleted=len(files))
    return RollbackResult(rollback_time, target, files)


def rollback_target(table: HoodieTable, instant: str) -> Instant:
    """The pending write at ``instant``; errors name why it cannot be rolled back."""
    table.timeline.reload()
    target = table.timeline.find(instant)
    if target.is_completed:
        raise FailedPreconditionError(
            f"instant {instant} is completed; only pending (failed) writes can be rolled back",
            field="instant",
        )
    if target.action not in (COMMIT, REPLACE_COMMIT, table.timeline.CLUSTERING_ACTION):
        raise FailedPreconditionError(
            f"instant {instant} is a {target.action}, not a write", field="instant"
        )
    return target


def rollback_failed_writes(
    table: HoodieTable,
    markers: MarkerReader,
    lock_held: bool,
    *,
    exclude: Collection[str] = (),
) -> list[RollbackResult]:
    """Roll back every failed write except ``exclude``: a pending write whose writer holds
    no live lease (``write_lease``); run under the table lock before a write. Pending
    replacecommits carrying a clustering plan are left alone (an
    insert_overwrite's requested replacecommit, empty or Hudi's plan-less one, is a write),
    and interrupted rollbacks are discarded (their target is rolled back afresh)."""
    if not lock_held:
        raise FailedPreconditionError(
            "rolling back failed writes requires holding the table lock", field="lock"
        )
    timeline = table.timeline
    timeline.refresh()
    for instant in timeline.pending():
        if instant.action == ROLLBACK:
            timeline.delete_pending(instant)
    results = []
    for instant in timeline.pending():
        if instant.timestamp in exclude or not _is_write(table, instant):
            continue
        writer = live_writer(table.storage, instant.timestamp)
        if writer is not None:
            log.info(
                "rollback.running_write_left",
                table=table.uri,
                instant=instant.timestamp,
                writer=writer.owner,
            )
            continue
        results.append(rollback(table, instant.timestamp, markers))
        forget_write(table.storage, instant.timestamp)
    remove_rolled_back_leftovers(table)
    return results


def other_writes(table: HoodieTable, instant: str) -> tuple[list[Instant], list[Instant]]:
    """The pending writes other than ``instant`` (the timeline as last loaded): those whose
    writers hold their leases, and failed ones."""
    running: list[Instant] = []
    failed: list[Instant] = []
    for other in table.timeline.pending():
        if other.timestamp != instant and _is_write(table, other):
            live = live_writer(table.storage, other.timestamp) is not None
            (running if live else failed).append(other)
    return running, failed


LEFTOVERS_WATERMARK = ".hoodie/.tidemark/leftovers-watermark"
"""The newest rollback whose late files every later leftover clean-up may take as removed."""
LATE_FILE_GRACE_S = 24 * 3600.0
"""How long after its rollback a fenced writer may still publish a file: only a task that
started before the rollback, in a writer paused (SIGSTOP, a frozen VM) past its lease,
does; a running writer cancels its tasks within half a lease of its last renewal, before
any rollback of its instant may start."""


def remove_rolled_back_leftovers(table: HoodieTable) -> list[str]:
    """Delete what rolled-back writes published after their rollback ran: a writer that lost
    its lock keeps writing until it notices, a paused one until it resumes. Such files are
    found by instant time in the partitions each rollback named (a rollback reads the
    markers after reverting the write, so they name every partition a late file can be
    in), and through the markers late tasks wrote into a marker dir recreated after the
    rollback (an orphan dir: its instant is not on the timeline; ``delete_stale_marker_dirs``
    then deletes it).

    Only rollbacks newer than the watermark are read. Once a scan ran at least
    ``LATE_FILE_GRACE_S`` after a rollback, that rollback's writer has published whatever
    it could, so the watermark moves past it. Costs one read for the watermark, one per
    newer rollback and one listing per partition they named; returns the deleted paths."""
    storage = table.storage
    on_timeline = {instant.timestamp for instant in table.timeline.instants()}
    watermark = read_leftovers_watermark(storage)
    rollbacks = table.timeline.rollbacks(after=watermark)
    undone_in: dict[str, set[str]] = {}
    for _, metadata in rollbacks:
        for undone in metadata.instants_rollback:
            for partition in metadata.deleted_by_partition:
                undone_in.setdefault(partition, set()).add(undone.commit_time)
    orphans = [instant for instant in marker_dir_instants(storage) if instant not in on_timeline]
    for instant in orphans:
        for marker in read_markers_from_storage(storage, instant):
            undone_in.setdefault(partition_of(data_file_path(marker)), set()).add(instant)
    leftovers: list[str] = []
    for partition, instants in sorted(undone_in.items()):
        gone = instants - on_timeline
        if gone:
            leftovers += _written_by_any(storage, gone, partition)
    if leftovers:
        storage.delete_many(leftovers)
        log.warning("rollback.leftovers_removed", table=table.uri, deleted=len(leftovers))
    settled = [
        i.timestamp for i, _ in rollbacks if i.timestamp <= instant_time_ago(LATE_FILE_GRACE_S)
    ]
    if settled:
        storage.write(LEFTOVERS_WATERMARK, settled[-1].encode())
    return leftovers


def read_leftovers_watermark(storage: Storage) -> str | None:
    """None before the first watermark; DataLossError naming a damaged one."""
    try:
        return read_parsed(
            storage,
            LEFTOVERS_WATERMARK,
            lambda data: validate_instant_time(data.decode().strip()),
            "delete it: the next clean-up scans every rollback again",
        )
    except NotFoundError:
        return None


def _written_by_any(storage: Storage, instants: set[str], partition: str) -> list[str]:
    """Base files and temporaries in ``partition`` of any of ``instants`` (one listing)."""
    base_files = [
        info.path
        for info in storage.list_dir(partition).files
        if _instant_of(info.path) in instants
    ]
    partials = [
        partial.path
        for partial in storage.partial_files(partition)
        if _instant_of(partial.target) in instants
    ]
    return sorted(base_files) + partials


def _is_write(table: HoodieTable, instant: Instant) -> bool:
    """A pending commit, or a pending replacecommit without a clustering plan (a pending
    clustering, on versions 8 and 9 the action ``clustering``, is a plan to run)."""
    if instant.action == COMMIT:
        return True
    if instant.action != REPLACE_COMMIT:
        return False
    try:
        return plan_of(table, instant) is None
    except DataLossError as error:
        log.warning(
            "rollback.unreadable_replace_request",
            table=table.uri,
            instant=instant.timestamp,
            error=str(error),
            note="left alone: it may be a clustering plan",
        )
        return False


@dataclass(frozen=True)
class _WrittenFiles:
    """What one instant left in storage: the partitions searched, its base files there and
    the unpublished temporaries of its killed tasks."""

    partitions: set[str]
    base_files: list[str]
    partial_files: list[str]


def _files_of_failed_write(
    table: HoodieTable, instant: str, markers: MarkerReader
) -> _WrittenFiles:
    """Base files of the instant in the partitions its markers name (all of them, also
    files whose marker was lost), or in the whole table when no marker survived."""
    from_markers = {data_file_path(marker) for marker in markers.all_markers(instant)}
    partitions: set[str] | None = {partition_of(path) for path in from_markers} or None
    return _written_by_instant(table.storage, instant, partitions)


def _written_by_instant(
    storage: Storage, instant: str, partitions: set[str] | None
) -> _WrittenFiles:
    """The instant's base files and temporaries in ``partitions`` (None: the whole table)."""
    base_files = sorted(
        path for path in _list_base_files(storage, partitions) if _written_by(path, instant)
    )
    searched = partitions if partitions is not None else set(map(partition_of, base_files))
    return _WrittenFiles(searched, base_files, _partial_files_of(storage, instant, searched))


def _partial_files_of(storage: Storage, instant: str, partitions: set[str]) -> list[str]:
    """Temporaries in ``partitions`` of files of ``instant``: matched by the name of the file
    each was to become, which carries the instant."""
    return [
        partial.path
        for partition in sorted(partitions)
        for partial in storage.partial_files(partition)
        if _written_by(partial.target, instant)
    ]


def _list_base_files(storage: Storage, partitions: set[str] | None) -> list[str]:
    """One listing per named partition; the whole table (recursively, also folders a
    failed write created without partition metadata) only when no partition is known."""
    if partitions is None:
        paths = [info.path for info in storage.list("") if not info.path.startswith(".hoodie/")]
    else:
        paths = [info.path for p in sorted(partitions) for info in storage.list_dir(p).files]
    return [path for path in paths if is_base_file_name(path.rpartition("/")[2])]


def _written_by(path: str, instant: str) -> bool:
    return _instant_of(path) == instant


def _is_log_file(path: str) -> bool:
    return is_log_file_name(path.rpartition("/")[2])


def _instant_of(path: str) -> str | None:
    """The instant in a base file's name; None for any other file."""
    name = path.rpartition("/")[2]
    return parse_base_file_name(name).instant if is_base_file_name(name) else None


def _by_partition(paths: Iterable[str]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for path in paths:
        grouped.setdefault(partition_of(path), []).append(path)
    return grouped
