"""``tidemark upgrade``: move a version 6 table to version 8 or 9 in place, as Hudi's
upgrade does (properties, timeline layout 2, the archived timeline to the LSM history).

Under the table lock, with no pending instant on the timeline (refused in one line, as
is a downgrade), in an order that a kill at any point leaves a table the next upgrade
finishes:

1. clear ``.hoodie/timeline/`` (on a version 6 table it can only hold what an interrupted
   upgrade wrote) and write every completed instant there in layout 2: requested and
   inflight files (a write's inflight empty, its partial JSON being layout 1's), the
   completed ``<requested>_<completion>.<action>`` with commit metadata converted to Avro
   (rollback and clean metadata are Avro on both layouts, copied); a replacecommit that
   ran a clustering plan keeps its plan as a ``clustering`` request, as Hudi 1.x names it;
2. write the archived instants as an LSM history;
3. rewrite ``hoodie.properties`` (one atomic object write): from here on readers use the
   new timeline, which already holds everything;
4. delete layout 1's instant files and archive logs, which no version 8/9 reader lists.

Version 6 records no completion times: each instant's requested time becomes its
completion time, which keeps every time-travel read as it was before the upgrade (version
6 readers order by requested time). Archived instants keep their action and times but
not their metadata (the history's ``metadata`` and ``plan`` are null).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import structlog

from tidemark import faults
from tidemark.errors import FailedPreconditionError, InvalidArgumentError
from tidemark.storage.base import Storage
from tidemark.storage.damaged import read_parsed
from tidemark.table import HoodieTable
from tidemark.table.leases.storage_lease import DEFAULT_LOCK_LEASE_S, DEFAULT_LOCK_WAIT_S
from tidemark.table.leases.table_lock import changing
from tidemark.table.metadata.actions import CLUSTERING, REPLACE_COMMIT, WRITE_ACTIONS
from tidemark.table.metadata.commit import CommitMetadata
from tidemark.table.metadata.commit_avro import commit_metadata_to_avro
from tidemark.table.plans.clustering import plan_of_request
from tidemark.table.properties.config import (
    COMMIT_TIME_ORDERING,
    EVENT_TIME_ORDERING,
    PROPERTIES_PATH,
    TableConfig,
    format_properties,
    hudi_1x_properties,
    read_properties,
)
from tidemark.table.properties.support import DEFAULT_RECORD_PAYLOAD, OVERWRITE_WITH_LATEST_PAYLOAD
from tidemark.table.timeline.archived import (
    ARCHIVE_FILE,
    COMPLETED,
    archive_folder,
    parse_archive_log,
)
from tidemark.table.timeline.instant import Instant, State, parse_instant_file_name
from tidemark.table.timeline.layout1 import Timeline
from tidemark.table.timeline.layout2 import TIMELINE_DIR
from tidemark.table.timeline.lsm import HistoryInstant, history_folder, write_history
from tidemark.table.timeline.versions import table_version

log = structlog.get_logger(__name__)

TARGETS = (8, 9)
MERGE_MODES = {
    "": COMMIT_TIME_ORDERING,
    OVERWRITE_WITH_LATEST_PAYLOAD: COMMIT_TIME_ORDERING,
    DEFAULT_RECORD_PAYLOAD: EVENT_TIME_ORDERING,
}
"""``hoodie.record.merge.mode`` of the 0.x payload class, as Hudi's upgrade maps it."""


@dataclass(frozen=True)
class UpgradeResult:
    from_version: int
    to_version: int
    instants: int
    """Completed instants moved to the layout 2 timeline."""
    archived: int
    """Archived instants moved to the LSM history."""


def upgrade_table(
    table: HoodieTable,
    to_version: int,
    *,
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S,
    lock_lease_s: float = DEFAULT_LOCK_LEASE_S,
) -> UpgradeResult:
    if to_version not in TARGETS:
        raise InvalidArgumentError(
            f"{to_version} is not a version Tidemark upgrades to (8 or 9)", field="to"
        )
    current = _check_upgradable(table.storage, to_version)
    if current == to_version and not _layout_one_files(
        table.storage, dict(table.config.properties)
    ):
        return UpgradeResult(current, to_version, 0, 0)
    with changing(
        table, "upgrade", wait_s=lock_wait_s, lease_s=lock_lease_s, merge_on_read=True
    ) as lock:
        current = _check_upgradable(table.storage, to_version)
        props = read_properties(table.storage)
        if current == to_version:
            _delete_layout_one(table.storage, props)
            return UpgradeResult(current, to_version, 0, 0)
        upgraded = _upgraded_properties(props, to_version)
        timeline = Timeline(table.storage)
        table.storage.delete_prefix(TIMELINE_DIR)
        moved = _write_active(table.storage, timeline)
        faults.exit_if_requested("upgrade.timeline_written")
        archived = _write_history(table.storage, props)
        faults.exit_if_requested("upgrade.history_written")
        lock.check()
        table.storage.write(PROPERTIES_PATH, format_properties(upgraded, comment="Updated"))
        faults.exit_if_requested("upgrade.properties_written")
        _delete_layout_one(table.storage, props)
    log.info("table.upgraded", table=table.uri, to=to_version, instants=moved, archived=archived)
    return UpgradeResult(current, to_version, moved, archived)


def _check_upgradable(storage: Storage, to_version: int) -> int:
    """The table's version; refuses a downgrade, a start other than 6, and pending
    instants, in one line each. Checked before the lock (a refusal changes nothing) and
    again under it."""
    props = read_properties(storage)
    current = table_version(props)
    if current == to_version:
        return current
    if current > to_version:
        raise FailedPreconditionError(
            f"the table is at version {current}: Tidemark never downgrades a table", field="to"
        )
    if current != 6:
        raise FailedPreconditionError(
            f"the table is at version {current}: Tidemark upgrades version 6 tables only",
            field="to",
        )
    pending = Timeline(storage).pending()
    if pending:
        first = pending[0]
        raise FailedPreconditionError(
            f"the table has pending instants ({first.action} {first.timestamp} is "
            f"{first.state.name.lower()}): roll them back or let them complete first",
            field="table",
        )
    _upgraded_properties(props, to_version)
    return current


def _write_active(storage: Storage, timeline: Timeline) -> int:
    """Every completed instant of the layout 1 timeline, written in layout 2."""
    present = {info.path for info in storage.list_dir(".hoodie/").files}
    completed = timeline.completed()
    for done in completed:
        requested_path = done.with_state(State.REQUESTED).path
        requested = storage.read(requested_path) if requested_path in present else b""
        action = done.action
        if action == REPLACE_COMMIT and read_parsed(storage, requested_path, plan_of_request):
            action = CLUSTERING
        pending = Instant(done.timestamp, action, State.REQUESTED, layout=2)
        storage.write(pending.path, requested)
        inflight_path = done.with_state(State.INFLIGHT).path
        inflight = b""
        if done.action not in WRITE_ACTIONS and inflight_path in present:
            inflight = storage.read(inflight_path)
        storage.write(pending.with_state(State.INFLIGHT).path, inflight)
        metadata = storage.read(done.path)
        if done.action in WRITE_ACTIONS:
            parsed = read_parsed(storage, done.path, CommitMetadata.from_json)
            metadata = commit_metadata_to_avro(parsed, done.action)
        final = Instant(done.timestamp, done.action, State.COMPLETED, done.timestamp, layout=2)
        storage.write(final.path, metadata)
    return len(completed)


def _write_history(storage: Storage, props: dict[str, str]) -> int:
    folder = archive_folder(props)
    instants = [
        HistoryInstant(entry.timestamp, entry.timestamp, entry.action)
        for info in storage.list_dir(folder).files
        if ARCHIVE_FILE.fullmatch(info.path.rpartition("/")[2])
        for entry in parse_archive_log(storage.read(info.path), info.path)
        if entry.state == COMPLETED
    ]
    if instants:
        write_history(storage, history_folder(props), instants)
    return len(instants)


def _upgraded_properties(props: dict[str, str], version: int) -> dict[str, str]:
    payload = props.get("hoodie.compaction.payload.class", "").strip()
    merge_mode = MERGE_MODES.get(payload)
    if merge_mode is None:
        raise FailedPreconditionError(
            f"value {payload!r} has no Hudi 1.x merge mode Tidemark knows",
            field="hoodie.compaction.payload.class",
        )
    config = TableConfig.from_properties(props)
    upgraded = dict(props)
    upgraded.pop("hoodie.table.checksum", None)
    upgraded |= hudi_1x_properties(config, version, merge_mode)
    upgraded.setdefault("hoodie.table.initial.version", "6")
    upgraded["hoodie.table.checksum"] = props["hoodie.table.checksum"]
    return upgraded


def _delete_layout_one(storage: Storage, props: dict[str, str]) -> None:
    """Layout 1's instant files and archive logs (none on a finished upgrade)."""
    stale = _layout_one_files(storage, props)
    if stale:
        storage.delete_many(stale)
        log.info("upgrade.layout_one_deleted", files=len(stale))


def _layout_one_files(storage: Storage, props: Mapping[str, str]) -> list[str]:
    stale = [
        info.path
        for info in storage.list_dir(".hoodie/").files
        if _is_layout_one_instant(info.path)
    ]
    return stale + [
        info.path
        for info in storage.list_dir(archive_folder(dict(props))).files
        if ARCHIVE_FILE.fullmatch(info.path.rpartition("/")[2])
    ]


def _is_layout_one_instant(path: str) -> bool:
    return parse_instant_file_name(path.rpartition("/")[2]) is not None
