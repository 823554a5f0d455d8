"""Client of the planner service: schedule, list, get and cancel clustering plans and
compaction plans, and set or read a table's trigger, retention and compaction policies.

Table paths travel absolute and normalised (the service may run elsewhere). Scheduling
and cancelling change the timeline, so only an unreachable service is retried; their
deadline covers the service's wait for the table lock.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from tidemark.clustering.layouts import LAYOUTS
from tidemark.config import MIB, ClientConfig
from tidemark.errors import InvalidArgumentError
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.planner.v1 import planner_service_pb2 as pb
from tidemark.proto.planner.v1.planner_service_pb2_grpc import PlannerServiceStub
from tidemark.rpc.client import ServiceClient, ServiceName
from tidemark.storage.uri import canonical_uri
from tidemark.table.leases.storage_lease import DEFAULT_LOCK_WAIT_S

PLANNER_SERVICE = ServiceName(
    full_name=pb.DESCRIPTOR.services_by_name["PlannerService"].full_name,
    label="planner service",
    address_field="planner_service_address",
)
TIMELINE_CHANGE_TIMEOUT_S = DEFAULT_LOCK_WAIT_S + 60.0
"""Deadline of a schedule or cancel: the service waits for the table lock (by default up
to ``DEFAULT_LOCK_WAIT_S``), then plans and saves."""


def partition_filter(text: str, field: str = "partitions") -> pb.PartitionFilter:
    """``all``, ``recent:N``, ``regex:R`` or ``list:p1,p2`` as a message (the service
    checks the values: a positive N, a valid regex)."""
    kind, sep, value = text.partition(":")
    if text == "all":
        return pb.PartitionFilter(all=pb.AllPartitions())
    if kind == "recent" and sep:
        if not value.isdigit():
            raise InvalidArgumentError(f"recent:N needs a count, got {value!r}", field=field)
        return pb.PartitionFilter(recent=pb.RecentPartitions(count=int(value)))
    if kind == "regex" and sep:
        return pb.PartitionFilter(regex=value)
    if kind == "list" and sep:
        paths = [path.strip() for path in value.split(",")]
        return pb.PartitionFilter(list=pb.PartitionList(partition_paths=paths))
    raise InvalidArgumentError(f"{text!r} is not all, recent:N, regex:R or list:p1,p2", field=field)


def plan_options(
    *,
    sort_columns: Sequence[str] = (),
    layout: str = "linear",
    partitions: str = "all",
    target_file_bytes: int | None = None,
    small_file_limit_bytes: int | None = None,
    max_bytes_per_group: int | None = None,
    max_groups: int | None = None,
    hot_commits: int | None = None,
    hot_minutes: int | None = None,
) -> pb.PlanOptions:
    """Options of a plan; None leaves a size to the service's (Hudi's) default."""
    if layout not in LAYOUTS:
        raise InvalidArgumentError(
            f"unknown layout {layout!r} (use {', '.join(LAYOUTS)})", field="layout"
        )
    return pb.PlanOptions(
        sort_columns=sort_columns,
        layout=LAYOUTS[layout],
        partitions=partition_filter(partitions),
        target_file_bytes=target_file_bytes,
        small_file_limit_bytes=small_file_limit_bytes,
        max_bytes_per_group=max_bytes_per_group,
        max_groups=max_groups,
        hot_commits=hot_commits,
        hot_minutes=hot_minutes,
    )


@dataclass(frozen=True)
class PlanOptions:
    """What to plan when scheduling a clustering (``tidemark cluster schedule``'s flags, with
    their defaults; ``tidemark.spark.cluster_schedule`` takes the same), and the planner
    service to ask. A size left None is the service's (Hudi's) default."""

    sort_columns: Sequence[str] = ()
    """Columns ordering the rewritten rows (``--sort-columns``)."""
    layout: str = "linear"
    """Row order: ``linear``, ``z-order`` or ``hilbert`` (``--layout``)."""
    partitions: str = "all"
    """``all``, ``recent:N``, ``regex:R`` or ``list:p1,p2`` (``--partitions``)."""
    target_file_bytes: int | None = None
    """Size of the written files (``--target-file-mb``)."""
    small_file_limit_bytes: int | None = None
    """Files below it are clustered (``--small-file-mb``)."""
    max_bytes_per_group: int | None = None
    """Input per group at most (``--max-group-mb``)."""
    max_groups: int | None = None
    """Groups per plan at most (``--max-groups``)."""
    hot_commits: int | None = None
    """Leave out the file groups the last N commits wrote (``--skip-hot-commits``)."""
    hot_minutes: int | None = None
    """Leave out the file groups written in the last T minutes (``--skip-hot-minutes``)."""
    planner_service_address: str | None = None
    """``host:port`` of a planner service; None starts an embedded one (``--planner-service``)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "sort_columns", tuple(self.sort_columns))
        self.message()

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> PlanOptions:
        """The options ``tidemark cluster schedule`` (or ``trigger``) parsed."""
        return cls(
            sort_columns=[c.strip() for c in args.sort_columns.split(",") if c.strip()],
            layout=args.layout,
            partitions=args.partitions,
            target_file_bytes=_bytes(args.target_file_mb),
            small_file_limit_bytes=_bytes(args.small_file_mb),
            max_bytes_per_group=_bytes(args.max_group_mb),
            max_groups=args.max_groups,
            hot_commits=args.skip_hot_commits,
            hot_minutes=args.skip_hot_minutes,
            planner_service_address=args.planner_service,
        )

    def message(self) -> pb.PlanOptions:
        """The plan's options as the service takes them (``plan_options``)."""
        return plan_options(
            sort_columns=self.sort_columns,
            layout=self.layout,
            partitions=self.partitions,
            target_file_bytes=self.target_file_bytes,
            small_file_limit_bytes=self.small_file_limit_bytes,
            max_bytes_per_group=self.max_bytes_per_group,
            max_groups=self.max_groups,
            hot_commits=self.hot_commits,
            hot_minutes=self.hot_minutes,
        )


def _bytes(megabytes: int | None) -> int | None:
    return None if megabytes is None else megabytes * MIB


class PlannerClient:
    def __init__(self, address: str, config: ClientConfig | None = None) -> None:
        self._client = ServiceClient(PLANNER_SERVICE, address, PlannerServiceStub, config)

    @property
    def address(self) -> str:
        return self._client.address

    def schedule(self, table: str, options: pb.PlanOptions) -> pb.SchedulePlanResponse:
        request = pb.SchedulePlanRequest(table=_table(table), options=options)
        return self._client.call(
            self._client.stub.SchedulePlan,
            request,
            idempotent=False,
            timeout=TIMELINE_CHANGE_TIMEOUT_S,
        )

    def list_plans(self, table: str) -> list[pb.Plan]:
        """The pending plans, oldest first."""
        return list(self.list_all(table).plans)

    def list_all(self, table: str) -> pb.ListPlansResponse:
        """The pending plans and the plans given up to writers, oldest first."""
        request = pb.ListPlansRequest(table=_table(table))
        return self._client.call(self._client.stub.ListPlans, request)

    def get_plan(self, table: str, instant: str) -> pb.Plan:
        request = pb.GetPlanRequest(table=_table(table), instant_time=instant)
        return self._client.call(self._client.stub.GetPlan, request).plan

    def cancel_plan(self, table: str, instant: str) -> str:
        """Roll the plan back; returns the rollback's instant time."""
        request = pb.CancelPlanRequest(table=_table(table), instant_time=instant)
        response = self._client.call(
            self._client.stub.CancelPlan,
            request,
            idempotent=False,
            timeout=TIMELINE_CHANGE_TIMEOUT_S,
        )
        return response.rollback_instant_time

    def set_policy(self, table: str, policy: pb.TriggerPolicy) -> pb.TriggerPolicy:
        request = pb.SetTriggerPolicyRequest(table=_table(table), policy=policy)
        return self._client.call(self._client.stub.SetTriggerPolicy, request).policy

    def get_policy(self, table: str) -> pb.TriggerPolicy:
        request = pb.GetTriggerPolicyRequest(table=_table(table))
        return self._client.call(self._client.stub.GetTriggerPolicy, request).policy

    def set_retention_policy(self, table: str, policy: pb.RetentionPolicy) -> pb.RetentionPolicy:
        request = pb.SetRetentionPolicyRequest(table=_table(table), policy=policy)
        return self._client.call(self._client.stub.SetRetentionPolicy, request).policy

    def get_retention_policy(self, table: str) -> pb.RetentionPolicy:
        request = pb.GetRetentionPolicyRequest(table=_table(table))
        return self._client.call(self._client.stub.GetRetentionPolicy, request).policy

    def run_retention(self, table: str) -> pb.RunRetentionResponse:
        """Clean, then archive, the table now (its retention policy's settings)."""
        request = pb.RunRetentionRequest(table=_table(table))
        return self._client.call(
            self._client.stub.RunRetention, request, timeout=TIMELINE_CHANGE_TIMEOUT_S
        )

    def schedule_compaction(
        self, table: str, options: pb.CompactionOptions
    ) -> pb.ScheduleCompactionResponse:
        request = pb.ScheduleCompactionRequest(table=_table(table), options=options)
        return self._client.call(
            self._client.stub.ScheduleCompaction,
            request,
            idempotent=False,
            timeout=TIMELINE_CHANGE_TIMEOUT_S,
        )

    def list_compactions(self, table: str) -> list[pb.CompactionPlan]:
        """The pending compactions, oldest first."""
        request = pb.ListCompactionsRequest(table=_table(table))
        return list(self._client.call(self._client.stub.ListCompactions, request).plans)

    def cancel_compaction(self, table: str, instant: str) -> pb.CompactionPlan:
        """Remove the requested compaction plan; returns it."""
        request = pb.CancelCompactionRequest(table=_table(table), instant_time=instant)
        response = self._client.call(
            self._client.stub.CancelCompaction,
            request,
            idempotent=False,
            timeout=TIMELINE_CHANGE_TIMEOUT_S,
        )
        return response.plan

    def set_compaction_policy(self, table: str, policy: pb.CompactionPolicy) -> pb.CompactionPolicy:
        request = pb.SetCompactionPolicyRequest(table=_table(table), policy=policy)
        return self._client.call(self._client.stub.SetCompactionPolicy, request).policy

    def get_compaction_policy(self, table: str) -> pb.CompactionPolicy:
        request = pb.GetCompactionPolicyRequest(table=_table(table))
        return self._client.call(self._client.stub.GetCompactionPolicy, request).policy


def _table(table: str) -> TableRef:
    return TableRef(base_path=canonical_uri(table))


DEFAULT_PLAN = PlanOptions()
