"""Compaction as a table service, the parts without Spark: when a compaction is due
(Hudi's trigger strategies), which file slices a plan takes (log-file thresholds,
partitions, the IO bound), scheduling it under the table lock, cancelling a requested
plan, and the checks a run makes before it takes a lock or starts Spark
(``spark_jobs/compaction.py`` runs the plans; ``plans.compaction`` encodes and makes
them).

Trigger strategies are Hudi's ``hoodie.compact.inline.trigger.strategy``: ``NUM_COMMITS``
(``max_delta_commits`` deltacommits since the last compaction, default 5),
``TIME_ELAPSED`` (``max_delta_seconds`` since the last compaction, or since the first
deltacommit when there was none, default 3600), ``NUM_AND_TIME`` (both) and
``NUM_OR_TIME`` (either). A slice is planned only when its logs reach both
``log_file_size_threshold`` bytes (``hoodie.compaction.logfile.size.threshold``) and
``log_file_num_threshold`` files (``hoodie.compaction.logfile.num.threshold``), and its
partition is selected; slices are taken largest logs first up to ``target_io_mb``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from tidemark.checks import require_non_negative, require_positive
from tidemark.errors import FailedPreconditionError
from tidemark.table import HoodieTable
from tidemark.table.leases.plan_run import forget_runs, live_run
from tidemark.table.leases.storage_lease import DEFAULT_LOCK_LEASE_S, DEFAULT_LOCK_WAIT_S
from tidemark.table.leases.table_lock import changing
from tidemark.table.plans.compaction import (
    DEFAULT_MAX_DELTA_COMMITS,
    DEFAULT_SCHEDULE_OPTIONS,
    DEFAULT_TARGET_IO_MB,
    TOTAL_LOG_FILES,
    TOTAL_LOG_FILES_SIZE,
    CompactionPlan,
    PendingCompaction,
    ScheduleOptions,
    bounded_plan,
    compactable_operations,
    delta_commits_after,
    last_compaction_time,
    pending_compaction,
    pending_compactions,
    plan_compaction,
    save_plan,
)
from tidemark.table.timeline.instant import Instant, State, instant_time_ago, validate_instant_time

ROLE = "compaction"
DEFAULT_MAX_DELTA_SECONDS = 3600
"""``hoodie.compact.inline.max.delta.seconds``."""


class TriggerStrategy(StrEnum):
    """``hoodie.compact.inline.trigger.strategy``."""

    NUM_COMMITS = "NUM_COMMITS"
    TIME_ELAPSED = "TIME_ELAPSED"
    NUM_AND_TIME = "NUM_AND_TIME"
    NUM_OR_TIME = "NUM_OR_TIME"


class PartitionSelection(Protocol):
    """Which partitions a plan considers (the planner's partition filters)."""

    def select(self, partitions: Sequence[str]) -> list[str]: ...


@dataclass(frozen=True)
class CompactionSettings:
    """When a compaction is due and what its plan takes; Hudi's defaults. ``partitions``
    None: every partition."""

    strategy: TriggerStrategy = TriggerStrategy.NUM_COMMITS
    max_delta_commits: int = DEFAULT_MAX_DELTA_COMMITS
    max_delta_seconds: int = DEFAULT_MAX_DELTA_SECONDS
    log_file_size_threshold: int = 0
    log_file_num_threshold: int = 0
    partitions: PartitionSelection | None = None
    target_io_mb: float = DEFAULT_TARGET_IO_MB

    def __post_init__(self) -> None:
        for name in ("max_delta_commits", "max_delta_seconds", "target_io_mb"):
            require_positive(name, getattr(self, name))
        for name in ("log_file_size_threshold", "log_file_num_threshold"):
            require_non_negative(name, getattr(self, name))

    def describe(self) -> str:
        commits = f"{self.max_delta_commits} deltacommits"
        elapsed = f"{self.max_delta_seconds} s"
        return {
            TriggerStrategy.NUM_COMMITS: f"after {commits}",
            TriggerStrategy.TIME_ELAPSED: f"after {elapsed}",
            TriggerStrategy.NUM_AND_TIME: f"after {commits} and {elapsed}",
            TriggerStrategy.NUM_OR_TIME: f"after {commits} or {elapsed}",
        }[self.strategy]


def check_compactable(table: HoodieTable) -> None:
    """FailedPreconditionError(field="table") unless ``table`` is merge-on-read."""
    if not table.config.merge_on_read:
        raise FailedPreconditionError(
            f"table {table.uri} is copy-on-write: only merge-on-read tables are compacted",
            field="table",
        )


def not_due(table: HoodieTable, settings: CompactionSettings) -> str:
    """Why no compaction is due by ``settings.strategy`` ("" when one is): counted, as
    Hudi does, from the latest compaction's requested time, or for the elapsed time from
    the first deltacommit when the table has had no compaction."""
    last = last_compaction_time(table)
    deltas = delta_commits_after(table, last)
    enough_commits = len(deltas) >= settings.max_delta_commits
    since = last or (deltas[0] if deltas else "")
    enough_time = bool(since) and since <= instant_time_ago(settings.max_delta_seconds)
    due = {
        TriggerStrategy.NUM_COMMITS: enough_commits,
        TriggerStrategy.TIME_ELAPSED: enough_time,
        TriggerStrategy.NUM_AND_TIME: enough_commits and enough_time,
        TriggerStrategy.NUM_OR_TIME: enough_commits or enough_time,
    }[settings.strategy]
    if due:
        return ""
    return (
        f"no compaction due {settings.describe()}: {len(deltas)} deltacommits since "
        f"{'compaction ' + last if last else 'the start'}"
    )


def plan_by_settings(
    table: HoodieTable, settings: CompactionSettings
) -> tuple[CompactionPlan | None, str]:
    """The plan due now by ``settings``, or None and why not. Run under the table lock
    for a plan to save (the pending plans and writes it leaves out stay pending)."""
    reason = not_due(table, settings)
    if reason:
        return None, reason
    candidates = compactable_operations(table)
    if settings.partitions is not None:
        chosen = set(settings.partitions.select(sorted({op.partition_path for op in candidates})))
        candidates = [op for op in candidates if op.partition_path in chosen]
    candidates = [
        op
        for op in candidates
        if op.metrics[TOTAL_LOG_FILES_SIZE] >= settings.log_file_size_threshold
        and op.metrics[TOTAL_LOG_FILES] >= settings.log_file_num_threshold
    ]
    plan = bounded_plan(candidates, settings.target_io_mb)
    if plan is None:
        return None, (
            "no file slice to compact: none with logs over the thresholds in the chosen "
            "partitions outside pending plans and writes"
        )
    return plan, ""


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


def schedule_by_settings(
    table: HoodieTable,
    settings: CompactionSettings,
    *,
    role: str = ROLE,
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S,
    lease_s: float = DEFAULT_LOCK_LEASE_S,
) -> tuple[PendingCompaction | None, str]:
    """Schedule the compaction ``settings`` make due, or answer why there is none. Planned
    first without the lock (a table with nothing due is never locked), then again under
    it, and saved with the lock's fencing check."""
    check_compactable(table)
    plan, reason = plan_by_settings(table, settings)
    if plan is None:
        return None, reason
    with changing(table, role, wait_s=lock_wait_s, lease_s=lease_s, merge_on_read=True):
        table.timeline.reload()
        plan, reason = plan_by_settings(table, settings)
        if plan is None:
            return None, reason
        return PendingCompaction(save_plan(table, plan), plan), ""


def cancel_compaction(
    table: HoodieTable,
    instant: str,
    *,
    role: str = ROLE,
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S,
    lease_s: float = DEFAULT_LOCK_LEASE_S,
) -> PendingCompaction:
    """Remove the requested compaction plan at ``instant`` from the timeline (Hudi's
    ``unscheduleCompactionPlan``: nothing was written for it yet), under the table lock.
    A plan inflight, or one a runner holds (its run lease is live), is refused with
    FailedPreconditionError(field="instant"): its run owns it (a failed run is rolled back
    to its plan by the next run)."""
    check_compactable(table)
    validate_instant_time(instant, field="instant")
    _check_cancellable(table, pending_compaction(table, instant))
    with changing(table, role, wait_s=lock_wait_s, lease_s=lease_s, merge_on_read=True):
        pending = pending_compaction(table, instant)
        _check_cancellable(table, pending)
        table.timeline.delete_pending(pending.instant)
        forget_runs(table.storage, instant)
    return pending


def _check_cancellable(table: HoodieTable, pending: PendingCompaction) -> None:
    if pending.instant.state is not State.REQUESTED:
        raise FailedPreconditionError(
            f"compaction {pending.timestamp} is {pending.instant.state.name.lower()}: a run "
            "started it; run `tidemark compaction run` to finish or roll it back",
            field="instant",
        )
    lease = live_run(table.storage, pending.timestamp)
    if lease is not None:
        raise FailedPreconditionError(
            f"compaction {pending.timestamp} is being run by {lease.owner!r} (its run lease "
            f"ends {lease.ends})",
            field="instant",
        )


@dataclass(frozen=True)
class CompactionBacklog:
    """What waits for compaction on a table: pending plans, the oldest one's instant time
    ("" when none), and the bytes of the log files in its latest file slices."""

    pending: int
    oldest_pending: str
    log_bytes: int


def compaction_backlog(table: HoodieTable) -> CompactionBacklog:
    """The table's backlog, as of its timeline as last loaded."""
    pending = pending_compactions(table, reload=False)
    slices = table.view().latest_file_slices()
    return CompactionBacklog(
        pending=len(pending),
        oldest_pending=pending[0].timestamp if pending else "",
        log_bytes=sum(log.size for piece in slices for log in piece.logs),
    )


def compactions_to_run(table: HoodieTable, instant: str | None) -> list[PendingCompaction]:
    """The pending compaction at ``instant`` (FailedPrecondition or NotFoundError naming
    what the instant is otherwise), or every pending one, oldest first."""
    check_compactable(table)
    table.timeline.reload()
    if instant is None:
        return pending_compactions(table)
    validate_instant_time(instant)
    return [pending_compaction(table, instant)]
