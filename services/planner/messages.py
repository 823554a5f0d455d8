"""Domain objects as planner messages (the other direction is ``requests.py``)."""

from __future__ import annotations

from tidemark.clustering.layouts import LAYOUTS
from tidemark.clustering.strategy import PartitionFilter, PlanOptions
from tidemark.proto.planner.v1 import planner_service_pb2 as pb
from tidemark.services.planner.policy import TriggerPolicy
from tidemark.table.plans.clustering import PendingPlan
from tidemark.table.timeline.instant import State
from tidemark.table.writes.pending_clustering import GivenUpTo, is_protected


def plan_message(pending: PendingPlan) -> pb.Plan:
    plan = pending.plan
    return pb.Plan(
        instant_time=pending.timestamp,
        state=pb.PLAN_STATE_INFLIGHT
        if pending.instant.state is State.INFLIGHT
        else pb.PLAN_STATE_REQUESTED,
        groups=[
            pb.PlanGroup(
                partition_path=group.partition_path,
                slices=[
                    pb.PlanSlice(file_id=s.file_id, path=s.path, size_bytes=s.size_bytes)
                    for s in group.slices
                ],
                num_output_file_groups=group.num_output_file_groups,
                size_bytes=group.size_bytes,
            )
            for group in plan.groups
        ],
        sort_columns=plan.strategy.sort_columns,
        layout=LAYOUTS[plan.strategy.layout],
        target_file_bytes=plan.strategy.target_file_bytes,
        num_files=plan.num_slices,
        size_bytes=plan.size_bytes,
        num_output_file_groups=plan.num_output_file_groups,
        protected=is_protected(plan),
    )


def given_up_message(gone: GivenUpTo) -> pb.GivenUpPlan:
    return pb.GivenUpPlan(
        instant_time=gone.record.plan,
        write_instant_time=gone.write,
        file_groups_taken=gone.record.file_groups,
        replacement_instant_time=gone.record.replacement or "",
    )


def options_message(options: PlanOptions) -> pb.PlanOptions:
    return pb.PlanOptions(
        sort_columns=options.sort_columns,
        layout=LAYOUTS[options.layout],
        partitions=partition_filter_message(options.partitions),
        target_file_bytes=options.target_file_bytes,
        small_file_limit_bytes=options.small_file_limit_bytes,
        max_bytes_per_group=options.max_bytes_per_group,
        max_groups=options.max_groups,
        hot_commits=options.hot_commits,
        hot_minutes=options.hot_minutes,
    )


def partition_filter_message(selection: PartitionFilter) -> pb.PartitionFilter:
    if selection.kind == "recent":
        return pb.PartitionFilter(recent=pb.RecentPartitions(count=selection.count))
    if selection.kind == "regex":
        return pb.PartitionFilter(regex=selection.pattern)
    if selection.kind == "list":
        return pb.PartitionFilter(list=pb.PartitionList(partition_paths=selection.partitions))
    return pb.PartitionFilter(all=pb.AllPartitions())


def policy_message(policy: TriggerPolicy) -> pb.TriggerPolicy:
    options = options_message(policy.options)
    if policy.every_n_commits:
        return pb.TriggerPolicy(every_n_commits=policy.every_n_commits, options=options)
    if policy.every_seconds:
        return pb.TriggerPolicy(every_seconds=policy.every_seconds, options=options)
    return pb.TriggerPolicy(on_demand=pb.OnDemand(), options=options)
