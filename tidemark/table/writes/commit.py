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
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import structlog

from tidemark import faults
from tidemark.errors import (
    DataLossError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    TidemarkError,
)
from tidemark.storage.base import FileInfo, Storage
from tidemark.storage.damaged import read_parsed
from tidemark.table import HoodieTable
from tidemark.table.files import column_stats
from tidemark.table.files.file_names import is_base_file_name, parse_base_file_name, partition_of
from tidemark.table.leases.write_lease import WRITES_DIR, forget_write, live_writer
from tidemark.table.logfiles.file_names import is_log_file_name, parse_log_file_name
from tidemark.table.logfiles.framing import HeaderKey, read_log_file
from tidemark.table.metadata.actions import (
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    REPLACE_COMMIT,
    ROLLBACK,
    WRITE_ACTIONS,
)
from tidemark.table.metadata.commit import CommitMetadata, WriteStat
from tidemark.table.metadata.rollback import (
    InstantInfo,
    RollbackMetadata,
    RollbackPlan,
    RollbackRequest,
)
from tidemark.table.plans.clustering import plan_of
from tidemark.table.timeline.instant import (
    Instant,
    instant_time_ago,
    is_instant_time,
    new_instant_time,
    validate_instant_time,
)
from tidemark.table.writes.hudi_metadata_table import (
    record_in_metadata_table,
    roll_back_in_metadata_table,
)
from tidemark.table.writes.log_rollback import (
    UNPUBLISHED,
    SliceToUndo,
    slices_to_undo,
    write_rollback_blocks,
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

METADATA_RECORDED_POINT = "after_metadata_table"
"""Fault point: a commit killed after Hudi's metadata table recorded it, before it completes."""
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
    """Reconcile, write partition metadata, record the files in Hudi's metadata table (where
    Tidemark keeps it: before the data instant completes), publish the instant, drop the
    markers.
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
    record_in_metadata_table(table, instant, metadata)
    faults.exit_if_requested(METADATA_RECORDED_POINT)
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
    then on), read its markers, delete its data files (base files, and log files named
    with its instant), record a rollback instant naming every partition the markers name,
    then remove the failed instant's timeline files and markers. A deltacommit on a
    version-6 table also gets a rollback command block in each slice it appended to
    (``log_rollback``), written while the rollback is inflight. Files of tasks that
    started before the revert and publish later lie in those partitions, where the
    leftover clean-up of later writes finds them. With ``keep_plan`` (a failed clustering
    run, as Hudi's rollbackInflightClustering) the requested plan stays pending, to be run
    again; likewise a failed compaction run (Hudi's rollbackInflightCompaction). The
    outcome is the completed rollback: failing to delete the marker dir after
    it is only logged (the next write deletes marker dirs of instants that are not
    pending)."""
    started = time.monotonic()
    timeline = table.timeline
    target = rollback_target(table, instant)
    timeline.revert_to_requested(target)
    roll_back_in_metadata_table(table, instant)
    marked = {data_file_path(marker) for marker in markers.all_markers(instant)}
    written = _written_by_instant(table.storage, instant, {*map(partition_of, marked)} or None)
    files = written.data_files
    slices = (
        slices_to_undo(table.config.table_version, instant, marked, written.listing)
        if target.action == DELTA_COMMIT
        else []
    )
    rollback_time = new_instant_time(after=timeline.latest_timestamp())
    undone = InstantInfo(instant, target.action)
    full = _full_path(table)
    deleted: dict[str, list[str]] = {partition: [] for partition in written.partitions}
    for partition, paths in _by_partition(files).items():
        deleted[partition] = [full(path) for path in paths]
    plan = RollbackPlan(undone, [*_deletion_requests(deleted), *_block_requests(slices, full)])
    timeline.create_requested(rollback_time, ROLLBACK, plan.to_avro())
    timeline.transition_inflight(rollback_time, ROLLBACK)
    table.storage.delete_many([*files, *written.partial_files])
    blocks = write_rollback_blocks(table.storage, slices, rollback_time, instant, written.listing)
    failed_logs = {
        path: size
        for undo in slices
        for path, size in undo.failed_logs.items()
        if size != UNPUBLISHED
    }
    metadata = RollbackMetadata(
        start_rollback_time=rollback_time,
        time_taken_ms=int((time.monotonic() - started) * 1000),
        instants_rollback=[undone],
        deleted_by_partition=deleted,
        rollback_log_files=_sizes_by_partition(blocks, full),
        failed_commit_log_files=_sizes_by_partition(failed_logs, full),
    )
    timeline.complete(rollback_time, ROLLBACK, metadata.to_avro())
    column_stats.delete(table.storage, instant)
    if not keep_plan:
        timeline.delete_pending(target)
    _delete_marker_dir_after(table, instant, markers, "rollback")
    log.info(
        "rollback.completed",
        table=table.uri,
        instant=instant,
        deleted=len(files),
        command_blocks=len(blocks),
    )
    return RollbackResult(rollback_time, target, files)


def _full_path(table: HoodieTable) -> Callable[[str], str]:
    """Table-relative paths to the full paths rollback plans and metadata hold."""
    base = table.uri.rstrip("/")
    return lambda path: f"{base}/{path}"


def _deletion_requests(deleted: Mapping[str, Sequence[str]]) -> list[RollbackRequest]:
    """One request per partition the markers named, with the files deleted there."""
    return [RollbackRequest(partition, files) for partition, files in deleted.items()]


def _block_requests(
    slices: Iterable[SliceToUndo], full: Callable[[str], str]
) -> list[RollbackRequest]:
    """One request per file slice that gets a rollback command block, as Hudi plans it:
    its file id and base instant, the failed log files with their sizes."""
    return [
        RollbackRequest(
            undo.partition_path,
            file_id=undo.file_id,
            latest_base_instant=undo.base_instant,
            log_blocks_to_be_deleted={full(path): size for path, size in undo.failed_logs.items()},
        )
        for undo in slices
    ]


def _sizes_by_partition(
    sizes: Mapping[str, int], full: Callable[[str], str]
) -> dict[str, dict[str, int]]:
    grouped: dict[str, dict[str, int]] = {}
    for path, size in sizes.items():
        grouped.setdefault(partition_of(path), {})[full(path)] = size
    return grouped


def rollback_target(table: HoodieTable, instant: str) -> Instant:
    """The pending write at ``instant``; errors name why it cannot be rolled back."""
    table.timeline.reload()
    target = table.timeline.find(instant)
    if target.is_completed:
        raise FailedPreconditionError(
            f"instant {instant} is completed; only pending (failed) writes can be rolled back",
            field="instant",
        )
    if target.action not in (
        COMMIT,
        DELTA_COMMIT,
        REPLACE_COMMIT,
        table.timeline.CLUSTERING_ACTION,
        COMPACTION,
    ):
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
    then deletes it). The instant time is in the name of base files and of log files on
    versions 8 and 9 (and of a version-6 log that started a file group); a version-6 log
    appended to an older slice carries that slice's base instant, so it is found through
    its marker, which names it exactly, and deleted once its blocks show it holds that
    instant's appends only (another write may since have taken the same name). A late
    version-6 log whose marker the rollback read is left in place: the rollback's command
    block in its slice undoes it, as it undoes the failed log files Hudi leaves.

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
    marked_logs: dict[str, dict[str, str]] = {}
    for instant in orphans:
        for marker in read_markers_from_storage(storage, instant):
            path = data_file_path(marker)
            undone_in.setdefault(partition_of(path), set()).add(instant)
            if _is_log_file(path):
                marked_logs.setdefault(partition_of(path), {})[path] = instant
    leftovers: list[str] = []
    for partition, instants in sorted(undone_in.items()):
        gone = instants - on_timeline
        if gone:
            leftovers += _written_by_any(storage, gone, partition, marked_logs.get(partition, {}))
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


def _written_by_any(
    storage: Storage, instants: set[str], partition: str, marked_logs: Mapping[str, str]
) -> list[str]:
    """Data files and temporaries in ``partition`` of any of ``instants`` (one listing):
    named with one of them, or log files an orphan marker of one of them names
    (``marked_logs``: path to instant) holding only that instant's blocks."""
    data_files = [
        info.path
        for info in storage.list_dir(partition).files
        if _named_instant(info.path) in instants
        or (
            info.path in marked_logs and _only_blocks_of(storage, info.path, marked_logs[info.path])
        )
    ]
    partials = [
        partial.path
        for partial in storage.partial_files(partition)
        if _named_instant(partial.target) in instants
    ]
    return sorted(data_files) + partials


def _only_blocks_of(storage: Storage, path: str, instant: str) -> bool:
    """Whether every block of the log file at ``path`` that names its writer names
    ``instant`` (a crash-cut block names none)."""
    writers = {block.header.get(HeaderKey.INSTANT_TIME) for block in read_log_file(storage, path)}
    return writers - {None} == {instant}


def _is_write(table: HoodieTable, instant: Instant) -> bool:
    """A pending commit or deltacommit, or a pending replacecommit without a clustering
    plan (a pending clustering, on versions 8 and 9 the action ``clustering``, is a plan to
    run)."""
    if instant.action in (COMMIT, DELTA_COMMIT):
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
    """What one instant left in storage: the partitions searched and their listing, the
    data files named with the instant there (base files; log files it named with its own
    instant) and the unpublished temporaries of its killed tasks."""

    partitions: set[str]
    listing: list[FileInfo]
    data_files: list[str]
    partial_files: list[str]


def _written_by_instant(
    storage: Storage, instant: str, partitions: set[str] | None
) -> _WrittenFiles:
    """The instant's data files and temporaries in ``partitions`` (the partitions its
    markers name: all of its files there, also those whose marker was lost), or in the
    whole table when no marker survived (None)."""
    listing = _list_data_files(storage, partitions)
    data_files = sorted(info.path for info in listing if _named_instant(info.path) == instant)
    searched = partitions if partitions is not None else set(map(partition_of, data_files))
    return _WrittenFiles(
        searched, listing, data_files, _partial_files_of(storage, instant, searched)
    )


def _partial_files_of(storage: Storage, instant: str, partitions: set[str]) -> list[str]:
    """Temporaries in ``partitions`` of files of ``instant``: matched by the name of the file
    each was to become, which carries the instant."""
    return [
        partial.path
        for partition in sorted(partitions)
        for partial in storage.partial_files(partition)
        if _named_instant(partial.target) == instant
    ]


def _list_data_files(storage: Storage, partitions: set[str] | None) -> list[FileInfo]:
    """Base and log files: one listing per named partition; the whole table (recursively,
    also folders a failed write created without partition metadata) only when no
    partition is known."""
    if partitions is None:
        infos = [info for info in storage.list("") if not info.path.startswith(".hoodie/")]
    else:
        infos = [info for p in sorted(partitions) for info in storage.list_dir(p).files]
    return [info for info in infos if _named_instant(info.path) is not None]


def _written_by(path: str, instant: str) -> bool:
    return _instant_of(path) == instant


def _is_log_file(path: str) -> bool:
    return is_log_file_name(path.rpartition("/")[2])


def _instant_of(path: str) -> str | None:
    """The instant in a base file's name; None for any other file."""
    name = path.rpartition("/")[2]
    return parse_base_file_name(name).instant if is_base_file_name(name) else None


def _named_instant(path: str) -> str | None:
    """The instant in a base or log file's name; None for any other file. A log file's is
    the writing deltacommit's on versions 8 and 9, its slice's base instant on version 6
    (the writer's own when it started the file group)."""
    name = path.rpartition("/")[2]
    return parse_log_file_name(name).instant if is_log_file_name(name) else _instant_of(path)


def _by_partition(paths: Iterable[str]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for path in paths:
        grouped.setdefault(partition_of(path), []).append(path)
    return grouped
