"""Running a clean as Hudi does: ``<t>.clean.requested`` (the plan), ``<t>.clean.inflight``,
the deletes, then ``<t>.clean`` (what was deleted); on table versions 8 and 9 the same
instants in timeline layout 2 (``.hoodie/timeline/``, the inflight empty as Hudi 1.x
leaves it, completed as ``<t>_<completion>.clean``).

The table lock is held only to plan (and publish the requested and inflight instants) and
to complete: writers go on while files are deleted, in batches (S3 DeleteObjects). A clean
killed after some deletes leaves its instant inflight; the next clean (or the one every
write runs after its commit) finishes it first from its stored plan (deleting a file
already gone is a no-op), so no clean is lost and none is done twice. The planner only
ever names files no snapshot from the earliest commit to retain needs, so the deletes are
safe in any order and whether they finish or not.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import structlog

from tidemark import faults
from tidemark.storage.damaged import read_parsed
from tidemark.table import HoodieTable
from tidemark.table.leases.storage_lease import DEFAULT_LOCK_WAIT_S
from tidemark.table.leases.table_lock import changing
from tidemark.table.maintenance.clean_plan import CleanSettings, plan_clean
from tidemark.table.metadata.actions import CLEAN, WRITE_ACTIONS
from tidemark.table.metadata.clean import CleanMetadata, CleanPlan
from tidemark.table.timeline.instant import Instant, State, new_instant_time
from tidemark.table.writes.hudi_metadata_table import (
    check_no_hudi_metadata_table,
    record_clean_in_metadata_table,
)

log = structlog.get_logger(__name__)

DELETED_SOME_POINT = "clean_after_first_delete"
"""Fault point: a clean killed after its first batch of deletes."""


@dataclass
class CleanResult:
    """What a clean did (or, dry, would do): the instants it completed, rolled-forward
    ones first, and the files deleted by partition."""

    instants: list[str] = field(default_factory=list)
    deleted: dict[str, list[str]] = field(default_factory=dict)
    earliest_to_retain: str | None = None
    dry_run: bool = False

    @property
    def files_deleted(self) -> int:
        return sum(len(files) for files in self.deleted.values())


def clean(
    table: HoodieTable,
    settings: CleanSettings | None = None,
    *,
    dry_run: bool = False,
    wait_s: float = DEFAULT_LOCK_WAIT_S,
) -> CleanResult:
    """Finish any pending clean, then plan and run a new one (none when nothing is to be
    deleted). A dry run only plans. A table with Hudi's metadata table, which would still
    list the deleted files to the Hudi readers that list through it, is refused once
    there is something to delete, unless Tidemark keeps its ``files`` partition alone:
    the clean then records tombstones there before it completes. The plan is first made
    without the lock and the lock taken only when there is something to do, so the clean
    after every write costs no lock on a table with nothing to clean."""
    settings = settings or CleanSettings()
    result = CleanResult(dry_run=dry_run)
    table.timeline.reload()
    planned_on = table.timeline.instants()
    optimistic = plan_clean(table, settings)
    result.earliest_to_retain = _retained(optimistic)
    if dry_run:
        result.deleted = {p: list(f) for p, f in optimistic.files_by_partition.items() if f}
        return result
    if not optimistic.file_count and not _pending_cleans(table):
        return result
    check_no_hudi_metadata_table(
        dict(table.config.properties), "cleaning", table_version=table.config.table_version
    )
    while True:
        with changing(table, "clean", wait_s=wait_s, merge_on_read=True):
            table.timeline.reload()
            pending = _pending_cleans(table)
            if pending:
                instant, plan = pending[0], _stored_plan(table, pending[0])
                if instant.state is State.REQUESTED:
                    table.timeline.transition_inflight(
                        instant.timestamp, CLEAN, _inflight(table, plan)
                    )
            else:
                unchanged = table.timeline.instants() == planned_on
                plan = optimistic if unchanged else plan_clean(table, settings)
                if not plan.file_count:
                    return result
                timestamp = new_instant_time(after=table.timeline.latest_timestamp())
                table.timeline.create_requested(timestamp, CLEAN, plan.to_avro(table.uri))
                table.timeline.transition_inflight(timestamp, CLEAN, _inflight(table, plan))
                instant = Instant(timestamp, CLEAN, State.INFLIGHT)
        _run(table, instant.timestamp, plan, wait_s, result)
        if not pending:
            return result


def _run(
    table: HoodieTable, timestamp: str, plan: CleanPlan, wait_s: float, result: CleanResult
) -> None:
    """Delete the plan's files outside the lock, then complete the instant under it."""
    started = time.monotonic()
    for number, (partition, files) in enumerate(sorted(plan.files_by_partition.items())):
        table.storage.delete_many(files)
        if number == 0:
            faults.exit_if_requested(DELETED_SOME_POINT)
        result.deleted.setdefault(partition, []).extend(files)
    with changing(table, "clean", wait_s=wait_s, merge_on_read=True):
        table.timeline.reload()
        if table.timeline.is_completed(timestamp):
            return  # another cleaner finished this plan meanwhile
        last = table.timeline.last_completed(WRITE_ACTIONS)
        metadata = CleanMetadata(
            policy=plan.policy,
            start_clean_time=timestamp,
            time_taken_ms=int((time.monotonic() - started) * 1000),
            earliest_commit_to_retain=_retained(plan) or "",
            last_completed_commit=last.timestamp if last else "",
            deleted_by_partition=plan.files_by_partition,
        )
        record_clean_in_metadata_table(table, timestamp, plan.files_by_partition)
        table.timeline.complete(timestamp, CLEAN, metadata.to_avro(table.uri))
    result.instants.append(timestamp)
    result.earliest_to_retain = _retained(plan)
    log.info(
        "clean.completed",
        table=table.uri,
        instant=timestamp,
        files_deleted=plan.file_count,
        earliest_to_retain=result.earliest_to_retain,
    )


def _pending_cleans(table: HoodieTable) -> list[Instant]:
    return [i for i in table.timeline.pending() if i.action == CLEAN]


def _stored_plan(table: HoodieTable, instant: Instant) -> CleanPlan:
    requested = instant.with_state(State.REQUESTED)
    return read_parsed(table.storage, requested.path, CleanPlan.from_avro)


def _inflight(table: HoodieTable, plan: CleanPlan) -> bytes:
    """Hudi 0.x copies the plan into the inflight file; Hudi 1.x leaves it empty."""
    return plan.to_avro(table.uri) if table.timeline.LAYOUT == 1 else b""


def _retained(plan: CleanPlan) -> str | None:
    return plan.earliest_to_retain.timestamp if plan.earliest_to_retain else None
