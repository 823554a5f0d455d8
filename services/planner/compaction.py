"""Compaction of merge-on-read tables through the planner: options and policies as
messages and back, the table's compaction policy (kept in the table like the trigger
policy, ``.hoodie/.tidemark/planner/compaction-policy.json``), and the check the trigger
loop makes of each watched table on every poll: its compaction backlog (for the metrics)
and, when its policy is automatic, a schedule whenever the policy's trigger strategy
makes a compaction due. When and what to compact is the table library's
(``tidemark.table.maintenance.compaction``); this module only reads the policy and asks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf import json_format

from tidemark.checks import require_non_negative, require_positive
from tidemark.clustering.strategy import ALL_PARTITIONS, PartitionFilter
from tidemark.errors import InvalidArgumentError
from tidemark.proto.planner.v1 import planner_service_pb2 as pb
from tidemark.services.planner import messages, requests
from tidemark.services.planner.triggers import load_message
from tidemark.storage.base import Storage
from tidemark.table import HoodieTable
from tidemark.table.maintenance.compaction import (
    CompactionBacklog,
    CompactionSettings,
    TriggerStrategy,
    compaction_backlog,
    not_due,
)
from tidemark.table.plans.compaction import (
    TOTAL_LOG_FILES_SIZE,
    CompactionPlan,
    PendingCompaction,
)
from tidemark.table.timeline.instant import Instant, State

POLICY_PATH = ".hoodie/.tidemark/planner/compaction-policy.json"
STRATEGIES: dict[pb.CompactionTrigger, TriggerStrategy] = {
    pb.COMPACTION_TRIGGER_UNSPECIFIED: TriggerStrategy.NUM_COMMITS,
    pb.COMPACTION_TRIGGER_NUM_COMMITS: TriggerStrategy.NUM_COMMITS,
    pb.COMPACTION_TRIGGER_TIME_ELAPSED: TriggerStrategy.TIME_ELAPSED,
    pb.COMPACTION_TRIGGER_NUM_AND_TIME: TriggerStrategy.NUM_AND_TIME,
    pb.COMPACTION_TRIGGER_NUM_OR_TIME: TriggerStrategy.NUM_OR_TIME,
}
TRIGGERS = {strategy: number for number, strategy in reversed(STRATEGIES.items())}


@dataclass(frozen=True)
class CompactionPolicy:
    """``settings`` None: on demand (the service schedules nothing by itself)."""

    settings: CompactionSettings | None = None

    @property
    def on_demand(self) -> bool:
        return self.settings is None

    def describe(self) -> str:
        return "on demand" if self.settings is None else self.settings.describe()


def settings_from_message(message: pb.CompactionOptions, field: str) -> CompactionSettings:
    """A request's options; unset values take Hudi's defaults; errors name the field."""
    strategy = STRATEGIES.get(message.trigger)
    if strategy is None:
        raise InvalidArgumentError(f"unknown trigger {message.trigger}", field=f"{field}.trigger")
    given: dict[str, int] = {}
    for name in ("max_delta_commits", "max_delta_seconds", "target_io_mb"):
        if message.HasField(name):
            require_positive(f"{field}.{name}", getattr(message, name))
            given[name] = getattr(message, name)
    for name, setting in (
        ("log_file_size_threshold_bytes", "log_file_size_threshold"),
        ("log_file_num_threshold", "log_file_num_threshold"),
    ):
        if message.HasField(name):
            require_non_negative(f"{field}.{name}", getattr(message, name))
            given[setting] = getattr(message, name)
    partitions = requests.partition_filter(message.partitions, f"{field}.partitions")
    return CompactionSettings(strategy=strategy, partitions=partitions, **given)


def options_message(settings: CompactionSettings) -> pb.CompactionOptions:
    partitions = settings.partitions
    return pb.CompactionOptions(
        trigger=TRIGGERS[settings.strategy],
        max_delta_commits=settings.max_delta_commits,
        max_delta_seconds=settings.max_delta_seconds,
        log_file_size_threshold_bytes=settings.log_file_size_threshold,
        log_file_num_threshold=settings.log_file_num_threshold,
        partitions=messages.partition_filter_message(
            partitions if isinstance(partitions, PartitionFilter) else ALL_PARTITIONS
        ),
        target_io_mb=int(settings.target_io_mb),
    )


def policy_from_message(message: pb.CompactionPolicy) -> CompactionPolicy:
    if message.WhichOneof("trigger") == "automatic":
        return CompactionPolicy(settings_from_message(message.automatic, "policy.automatic"))
    return CompactionPolicy()


def policy_message(policy: CompactionPolicy) -> pb.CompactionPolicy:
    if policy.settings is None:
        return pb.CompactionPolicy(on_demand=pb.OnDemand())
    return pb.CompactionPolicy(automatic=options_message(policy.settings))


def plan_message(pending: PendingCompaction) -> pb.CompactionPlan:
    plan: CompactionPlan = pending.plan
    operations = [
        pb.CompactionOperation(
            partition_path=op.partition_path,
            file_id=op.file_id,
            base_instant_time=op.base_instant,
            base_file=op.data_file,
            log_files=op.log_files,
            log_bytes=int(op.metrics.get(TOTAL_LOG_FILES_SIZE, 0)),
            io_mb=op.io_mb,
        )
        for op in plan.operations
    ]
    return pb.CompactionPlan(
        instant_time=pending.timestamp,
        state=pb.PLAN_STATE_INFLIGHT
        if pending.instant.state is State.INFLIGHT
        else pb.PLAN_STATE_REQUESTED,
        operations=operations,
        num_log_files=sum(len(op.log_files) for op in operations),
        log_bytes=sum(op.log_bytes for op in operations),
        io_mb=plan.io_mb,
    )


def load_policy(storage: Storage) -> CompactionPolicy:
    """The table's policy (on demand when none is stored)."""
    stored = load_message(storage, POLICY_PATH, pb.CompactionPolicy())
    return CompactionPolicy() if stored is None else policy_from_message(stored)


def save_policy(storage: Storage, policy: CompactionPolicy) -> None:
    """Store the policy; on demand deletes it."""
    if policy.on_demand:
        storage.delete(POLICY_PATH)
    else:
        storage.write(POLICY_PATH, json_format.MessageToJson(policy_message(policy)).encode())


Schedule = Callable[[HoodieTable, CompactionSettings, str], tuple[PendingCompaction | None, str]]
"""``schedule(table, settings, trigger)``: the engine's compaction scheduling path."""


class CompactionTrigger:
    """Asked by the trigger loop on every poll for each watched table. A merge-on-read
    table's backlog is read again only after its timeline changed. An automatic policy
    asks for a schedule once its trigger strategy makes a compaction due (read from the
    timeline, no lock); a table where that found nothing to compact (every slice with
    logs busy, or below the thresholds) is asked again only after its timeline changed."""

    def __init__(self, schedule: Schedule) -> None:
        self._schedule = schedule
        self._backlogs: dict[str, tuple[tuple[Instant, ...], CompactionBacklog]] = {}
        """Table URI -> (its timeline's instants when read, backlog)."""
        self._nothing: dict[str, tuple[Instant, ...]] = {}
        """Table URI -> its timeline's instants when a due schedule found nothing."""
        self._lock = threading.Lock()

    def check(self, storage: Storage) -> bool:
        """Note the backlog of the table at ``storage`` and schedule its compaction when
        its policy is automatic; True if it asked for a schedule."""
        table = HoodieTable.from_storage(storage)
        if not table.config.merge_on_read:
            return False
        self.note(table)
        policy = load_policy(storage)
        if policy.settings is None or not_due(table, policy.settings):
            return False
        instants = tuple(table.timeline.instants())
        if self._nothing.get(table.uri) == instants:
            return False
        pending, _ = self._schedule(table, policy.settings, "policy")
        if pending is None:
            self._nothing[table.uri] = instants
        self.note(table)
        return True

    def note(self, table: HoodieTable) -> None:
        """Read the table's backlog unless its timeline is as when last read."""
        instants = tuple(table.timeline.instants())
        with self._lock:
            known = self._backlogs.get(table.uri)
        if known is not None and known[0] == instants:
            return
        backlog = compaction_backlog(table)
        with self._lock:
            self._backlogs[table.uri] = (instants, backlog)

    def backlogs(self) -> dict[str, CompactionBacklog]:
        """Table URI -> its backlog as last read."""
        with self._lock:
            return {uri: backlog for uri, (_, backlog) in self._backlogs.items()}
