"""The planner's operations on tables: schedule, list, get and cancel plans, the trigger
policies, retention (clean then archive) on request or by a table's retention policy, and
compaction of merge-on-read tables (scheduled, listed, cancelled, by request or by the
table's compaction policy; ``tidemark.table.maintenance.compaction`` decides when and what).

Scheduling validates everything it can before touching the table (a table without
commits, unknown or unorderable sort columns), then takes the table lock, waiting up to
``lock_wait_s`` for a writer or another planner, and inside it reads the pending plans
and pending writes again, plans, and saves the plan with the lock's fencing check. Two
schedulers of one table, in one process or in two, therefore never plan the same file
group. Once writers have given up ``PROTECT_AFTER_GIVE_UPS`` plans since the table's last
clustering, the next plan is saved protected: writers wait for its run instead of taking
its file groups, so clustering gets its turn beside a stream that touches every group.
Every operation is blocking (storage); the servicer runs them in threads.
"""

from __future__ import annotations

import threading
from collections import Counter
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace

import structlog

from tidemark import faults
from tidemark.clustering.curves import check_sortable
from tidemark.clustering.strategy import FileSlices, PlanOptions, PlanOutcome, plan_clustering
from tidemark.errors import FailedPreconditionError
from tidemark.index.record_index import discard_staged
from tidemark.retention import RetentionResult, run_retention
from tidemark.services.planner import compaction
from tidemark.services.planner.config import PlannerConfig
from tidemark.services.planner.exclusions import busy_file_groups, hot_file_groups
from tidemark.services.planner.policy import TriggerPolicy
from tidemark.services.planner.retention import (
    RetentionPolicy,
    RetentionTrigger,
)
from tidemark.services.planner.retention import load_policy as load_retention
from tidemark.services.planner.retention import save_policy as save_retention
from tidemark.services.planner.triggers import TriggerLoop, load_policy, save_policy
from tidemark.table import HoodieTable
from tidemark.table.leases.plan_run import check_not_running, forget_runs
from tidemark.table.leases.storage_lease import StorageLease
from tidemark.table.leases.table_lock import changing, owner_name
from tidemark.table.maintenance.compaction import (
    CompactionSettings,
    cancel_compaction,
    check_compactable,
    schedule_by_settings,
)
from tidemark.table.plans.clustering import PendingPlan, pending_plan, pending_plans, save_plan
from tidemark.table.plans.compaction import PendingCompaction, pending_compactions
from tidemark.table.records.schema import avro_to_arrow_schema
from tidemark.table.writes.checks import check_clusterable
from tidemark.table.writes.commit import RollbackResult, rollback
from tidemark.table.writes.markers import StorageMarkerReader
from tidemark.table.writes.pending_clustering import (
    PROTECT_AFTER_GIVE_UPS,
    GivenUpTo,
    given_up_plans,
    given_up_since_clustering,
    protected,
)

log = structlog.get_logger(__name__)

PLANNER_ROLE = "planner"


@dataclass(frozen=True)
class ScheduleResult:
    """The saved plan, or None and why there is nothing to cluster."""

    plan: PendingPlan | None
    reason: str = ""


class PlannerEngine:
    def __init__(self, config: PlannerConfig) -> None:
        self.config = config
        self.owner = owner_name(PLANNER_ROLE)
        self.counts: Counter[str] = Counter()
        """Plans ``cancelled`` and ``given_up``, read by the metrics collector."""
        self.schedules: Counter[tuple[str, str, str]] = Counter()
        """Schedule attempts by (outcome: ``scheduled`` or ``nothing``, trigger, table
        URI), read by the metrics collector: per table, so an alert joins a table's plans
        with its clustering runs."""
        self._counts_lock = threading.Lock()
        self._given_up_seen: dict[str, set[str]] = {}
        """Table -> the given-up plans already counted (``given_up``), those on its active
        timeline only."""
        self.retention_runs: Counter[str] = Counter()
        """Retention runs by trigger (``request``, ``commits``, ``periodic``) and
        ``files_deleted``, ``instants_archived``, read by the metrics collector."""
        self.retention = RetentionTrigger(self.run_retention)
        self.compactions: Counter[tuple[str, str, str]] = Counter()
        """Compaction schedule attempts by (outcome: ``scheduled``, ``nothing`` or
        ``cancelled``, trigger: ``request`` or ``policy``, table URI), read by the metrics
        collector."""
        self.compaction = compaction.CompactionTrigger(self.schedule_compaction)
        self.triggers = TriggerLoop(
            self._trigger,
            config.trigger_poll_s,
            also=[self.retention.check, self.compaction.check],
        )
        for table_uri in config.tables:
            self.triggers.watch(table_uri)
        self.triggers.start()

    def close(self) -> None:
        self.triggers.close()

    def schedule(
        self, table: HoodieTable, options: PlanOptions, trigger: str = "request"
    ) -> ScheduleResult:
        check_clusterable(table.config)
        if table.timeline.last_completed() is None:
            raise FailedPreconditionError(
                f"the table at {table.uri} has no completed commits to cluster", field="table"
            )
        check_sortable(avro_to_arrow_schema(table.current_avro_schema()), options.sort_columns)
        options = replace(
            options,
            hot_commits=_given(options.hot_commits, self.config.hot_commits),
            hot_minutes=_given(options.hot_minutes, self.config.hot_minutes),
        )
        outcome = _plan(table, options)
        if outcome.plan is not None:  # planned again under the lock, from what it reads
            with self._locked(table):
                table.timeline.reload()
                outcome = _plan(table, options)
                if outcome.plan is not None:
                    starved = given_up_since_clustering(table)
                    self._note_given_up(table.uri, given_up_plans(table))
                    plan = outcome.plan
                    if len(starved) >= PROTECT_AFTER_GIVE_UPS:
                        plan = protected(plan)
                        log.info(
                            "planner.plan_protected",
                            table=table.uri,
                            given_up=[gone.record.plan for gone in starved],
                        )
                    outcome = replace(outcome, plan=plan)
                    instant = save_plan(table, plan)
                    faults.hold_if_requested("planner_plan_saved")
        if outcome.plan is None:  # nothing changed: no lock was taken, or none is left
            self._count_schedule("nothing", trigger, table.uri)
            log.info("planner.nothing_to_cluster", table=table.uri, reason=outcome.reason)
            return ScheduleResult(None, outcome.reason)
        self._count_schedule("scheduled", trigger, table.uri)
        return ScheduleResult(PendingPlan(instant, outcome.plan))

    def list_plans(self, table: HoodieTable) -> tuple[list[PendingPlan], list[GivenUpTo]]:
        """The pending plans and the plans given up to writers on the active timeline."""
        given_up = given_up_plans(table)
        self._note_given_up(table.uri, given_up)
        return pending_plans(table, reload=False), given_up

    def get_plan(self, table: HoodieTable, instant: str) -> PendingPlan:
        return pending_plan(table, instant)

    def cancel(self, table: HoodieTable, instant: str) -> RollbackResult:
        """Roll the pending plan back as Hudi rolls back a pending replacecommit (files an
        interrupted run wrote are deleted, what it staged in the record index discarded);
        refused while a runner executes it (its run lease is live)."""
        pending_plan(table, instant)
        check_not_running(table.storage, instant)
        with self._locked(table):
            pending_plan(table, instant)
            check_not_running(table.storage, instant)
            result = rollback(table, instant, StorageMarkerReader(table.storage))
            discard_staged(table.storage, instant)
            forget_runs(table.storage, instant)
        self._count("cancelled")
        return result

    def set_policy(self, table: HoodieTable, policy: TriggerPolicy) -> TriggerPolicy:
        check_sortable(
            avro_to_arrow_schema(table.current_avro_schema()), policy.options.sort_columns
        )
        save_policy(table.storage, policy)
        self.triggers.watch(table.uri)
        log.info("planner.policy_set", table=table.uri, policy=policy.describe())
        return policy

    def get_policy(self, table: HoodieTable) -> TriggerPolicy:
        self.triggers.watch(table.uri)
        return load_policy(table.storage)

    def set_retention(self, table: HoodieTable, policy: RetentionPolicy) -> RetentionPolicy:
        save_retention(table.storage, policy)
        self.triggers.watch(table.uri)
        log.info("planner.retention_policy_set", table=table.uri, policy=str(policy))
        return policy

    def get_retention(self, table: HoodieTable) -> RetentionPolicy:
        self.triggers.watch(table.uri)
        return load_retention(table.storage)

    def run_retention(self, table: HoodieTable, trigger: str = "request") -> RetentionResult:
        """Clean, then archive, with the table's retention policy's settings (archival
        keeps the deltacommits the table's compaction policy counts, as Hudi's does)."""
        settings = load_retention(table.storage).settings()
        due = compaction.load_policy(table.storage).settings
        if due is not None:
            kept = replace(settings.archive, compaction_delta_commits=due.max_delta_commits)
            settings = replace(settings, archive=kept)
        result = run_retention(table, settings, wait_s=self.config.lock_wait_s)
        with self._counts_lock:
            self.retention_runs[trigger] += 1
            self.retention_runs["files_deleted"] += result.clean.files_deleted
            self.retention_runs["instants_archived"] += len(result.archive.archived)
        log.info(
            "planner.retention_run",
            table=table.uri,
            trigger=trigger,
            cleans=result.clean.instants,
            files_deleted=result.clean.files_deleted,
            archived=len(result.archive.archived),
        )
        return result

    def schedule_compaction(
        self, table: HoodieTable, settings: CompactionSettings, trigger: str = "request"
    ) -> tuple[PendingCompaction | None, str]:
        """Schedule the compaction ``settings`` make due (a merge-on-read table only), or
        answer why none is."""
        pending, reason = schedule_by_settings(
            table,
            settings,
            role=PLANNER_ROLE,
            lock_wait_s=self.config.lock_wait_s,
            lease_s=self.config.lock_lease_s,
        )
        outcome = "nothing" if pending is None else "scheduled"
        self._count_compaction(outcome, trigger, table.uri)
        log.info(
            "planner.compaction_scheduled" if pending else "planner.no_compaction_due",
            table=table.uri,
            trigger=trigger,
            instant=pending.timestamp if pending else None,
            reason=reason or None,
        )
        return pending, reason

    def list_compactions(self, table: HoodieTable) -> list[PendingCompaction]:
        check_compactable(table)
        pending = pending_compactions(table, reload=False)
        self.compaction.note(table)
        return pending

    def cancel_compaction(self, table: HoodieTable, instant: str) -> PendingCompaction:
        """Remove a requested compaction plan; refused for one inflight or being run."""
        cancelled = cancel_compaction(
            table,
            instant,
            role=PLANNER_ROLE,
            lock_wait_s=self.config.lock_wait_s,
            lease_s=self.config.lock_lease_s,
        )
        self._count_compaction("cancelled", "request", table.uri)
        self.compaction.note(table)
        log.info("planner.compaction_cancelled", table=table.uri, instant=instant)
        return cancelled

    def set_compaction_policy(
        self, table: HoodieTable, policy: compaction.CompactionPolicy
    ) -> compaction.CompactionPolicy:
        check_compactable(table)
        compaction.save_policy(table.storage, policy)
        self.triggers.watch(table.uri)
        log.info("planner.compaction_policy_set", table=table.uri, policy=policy.describe())
        return policy

    def get_compaction_policy(self, table: HoodieTable) -> compaction.CompactionPolicy:
        self.triggers.watch(table.uri)
        return compaction.load_policy(table.storage)

    def _count_compaction(self, outcome: str, trigger: str, table_uri: str) -> None:
        with self._counts_lock:
            self.compactions[outcome, trigger, table_uri] += 1

    def _trigger(self, table: HoodieTable, options: PlanOptions, trigger: str) -> ScheduleResult:
        result = self.schedule(table, options, trigger)
        log.info(
            "planner.triggered",
            table=table.uri,
            trigger=trigger,
            instant=result.plan.timestamp if result.plan else None,
            reason=result.reason or None,
        )
        return result

    def _note_given_up(self, table_uri: str, given_up: list[GivenUpTo]) -> None:
        """Count and log the plans given up to writers that this engine had not seen."""
        plans = {gone.record.plan: gone for gone in given_up}
        with self._counts_lock:
            seen = self._given_up_seen.get(table_uri, set())
            new = [gone for plan, gone in plans.items() if plan not in seen]
            self._given_up_seen[table_uri] = set(plans)
            self.counts["given_up"] += len(new)
        for gone in new:
            log.info(
                "planner.plan_given_up",
                table=table_uri,
                plan=gone.record.plan,
                write=gone.write,
                file_groups=gone.record.file_groups,
                replacement=gone.record.replacement,
            )

    def _count(self, name: str) -> None:
        with self._counts_lock:
            self.counts[name] += 1

    def _count_schedule(self, outcome: str, trigger: str, table_uri: str) -> None:
        with self._counts_lock:
            self.schedules[outcome, trigger, table_uri] += 1

    def _locked(self, table: HoodieTable) -> AbstractContextManager[StorageLease]:
        """The table lock, waited for up to ``lock_wait_s``; its fence guards every
        timeline change made inside."""
        return changing(
            table,
            PLANNER_ROLE,
            wait_s=self.config.lock_wait_s,
            lease_s=self.config.lock_lease_s,
            merge_on_read=True,
        )


def _given(value: int | None, default: int) -> int:
    return default if value is None else value


def _plan(table: HoodieTable, options: PlanOptions) -> PlanOutcome:
    """A plan of the table's live file groups that no pending plan or write holds and no
    recent commit wrote (``PlanOptions.hot_commits``, ``hot_minutes``); on a merge-on-read
    table of their latest slices, logs included."""
    view = table.view()
    if table.config.merge_on_read:
        file_slices = view.latest_file_slices()
        live = [s.base for s in file_slices if s.base is not None]
        slices = FileSlices.from_file_slices(file_slices)
    else:
        live = view.latest_base_files()
        slices = FileSlices.from_base_files(live)
    busy = busy_file_groups(table, pending_plans(table), live).keys()
    hot = hot_file_groups(table, options.hot_commits or 0, options.hot_minutes or 0)
    return plan_clustering(slices, options, busy | hot)
