"""Compaction as a table service, the parts without Spark: scheduling a plan under the
table lock, and the checks a run makes before it takes a lock or starts Spark
(``spark_jobs/compaction.py`` runs the plans; ``plans.compaction`` encodes and makes
them)."""

from __future__ import annotations

from tidemark.errors import FailedPreconditionError
from tidemark.table import HoodieTable
from tidemark.table.leases.storage_lease import DEFAULT_LOCK_WAIT_S
from tidemark.table.leases.table_lock import changing
from tidemark.table.plans.compaction import (
    DEFAULT_SCHEDULE_OPTIONS,
    PendingCompaction,
    ScheduleOptions,
    pending_compaction,
    pending_compactions,
    plan_compaction,
    save_plan,
)
from tidemark.table.timeline.instant import Instant, validate_instant_time

ROLE = "compaction"


def check_compactable(table: HoodieTable) -> None:
    """FailedPreconditionError(field="table") unless ``table`` is merge-on-read."""
    if not table.config.merge_on_read:
        raise FailedPreconditionError(
            f"table {table.uri} is copy-on-write: only merge-on-read tables are compacted",
            field="table",
        )


def schedule_compaction(
    table: HoodieTable,
    options: ScheduleOptions = DEFAULT_SCHEDULE_OPTIONS,
    *,
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S,
) -> Instant | None:
    """Plan a compaction under the table lock and save it as ``<t>.compaction.requested``;
    None when none is due (fewer deltacommits than ``options.max_delta_commits`` since the
    last compaction, or no file group with log files outside pending plans and writes)."""
    check_compactable(table)
    with changing(table, ROLE, wait_s=lock_wait_s, merge_on_read=True):
        plan = plan_compaction(table, options)
        return None if plan is None else save_plan(table, plan)


def compactions_to_run(table: HoodieTable, instant: str | None) -> list[PendingCompaction]:
    """The pending compaction at ``instant`` (FailedPrecondition or NotFoundError naming
    what the instant is otherwise), or every pending one, oldest first."""
    check_compactable(table)
    table.timeline.reload()
    if instant is None:
        return pending_compactions(table)
    validate_instant_time(instant)
    return [pending_compaction(table, instant)]
