"""``tidemark compaction trigger|cancel``: the planner service's compaction policy (when it
schedules a merge-on-read table's compaction by itself, by Hudi's trigger strategies,
and what a plan takes) and cancelling a requested plan.

They ask the planner service (``--planner-service``, or one embedded in this process),
which keeps the policy with the table and follows it, like ``tidemark retention
trigger``; ``schedule``, ``list`` and ``run`` work on the table in this process.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from tidemark.clients.planner import partition_filter
from tidemark.commands.planner import ON_DEMAND, planner_client, planner_subcommand, print_policy
from tidemark.config import MIB
from tidemark.errors import InvalidArgumentError
from tidemark.jobs.job_options import add_lock_wait_option
from tidemark.proto.planner.v1 import planner_service_pb2 as pb
from tidemark.table.maintenance.compaction import (
    DEFAULT_MAX_DELTA_SECONDS,
    CompactionSettings,
    TriggerStrategy,
)
from tidemark.table.plans.compaction import DEFAULT_MAX_DELTA_COMMITS, DEFAULT_TARGET_IO_MB

STRATEGY_NAMES = [strategy.value for strategy in TriggerStrategy]
OPTIONS = (
    "max_delta_commits",
    "max_delta_seconds",
    "log_file_num_threshold",
    "target_io_mb",
)
"""The policy's numbers given as they are (``--max-delta-commits`` ...)."""


def register(commands: Any) -> None:
    """Add ``trigger`` and ``cancel`` to the ``tidemark compaction`` subcommands."""
    trigger = planner_subcommand(
        commands,
        "trigger",
        "show or set when the planner service schedules the table's compaction by itself, "
        "and what a plan takes; options not given keep their value, and giving one makes "
        "the policy automatic",
        run_trigger,
    )
    when = trigger.add_mutually_exclusive_group()
    when.add_argument(
        "--automatic",
        action="store_true",
        help="the service schedules a compaction whenever the strategy makes one due",
    )
    when.add_argument("--on-demand", action="store_true", help="only on request (clears it)")
    trigger.add_argument(
        "--strategy",
        choices=STRATEGY_NAMES,
        help="Hudi's trigger strategy (default NUM_COMMITS)",
    )
    trigger.add_argument(
        "--max-delta-commits",
        type=int,
        metavar="N",
        help=f"deltacommits since the last compaction (default {DEFAULT_MAX_DELTA_COMMITS})",
    )
    trigger.add_argument(
        "--max-delta-seconds",
        type=int,
        metavar="S",
        help=f"seconds since the last compaction (default {DEFAULT_MAX_DELTA_SECONDS})",
    )
    trigger.add_argument(
        "--log-file-size-threshold-mb",
        type=float,
        metavar="MB",
        help="plan a file slice only when its logs hold this many MB (default 0)",
    )
    trigger.add_argument(
        "--log-file-num-threshold",
        type=int,
        metavar="N",
        help="plan a file slice only when it has this many log files (default 0)",
    )
    trigger.add_argument(
        "--partitions",
        metavar="FILTER",
        help="all, recent:N, regex:R or list:p1,p2 (default all)",
    )
    trigger.add_argument(
        "--target-io-mb",
        type=int,
        metavar="MB",
        help=f"MB one plan reads and writes at most (default {DEFAULT_TARGET_IO_MB})",
    )
    cancel = planner_subcommand(
        commands,
        "cancel",
        "remove a requested compaction plan from the timeline (one inflight or being run "
        "is refused)",
        run_cancel,
    )
    cancel.add_argument("--instant", required=True, help="instant time of the plan")
    add_lock_wait_option(cancel)


def run_trigger(args: argparse.Namespace) -> int:
    """Without an option, show the policy; else change what is given."""
    changes = _option_changes(args)
    if args.on_demand and changes:
        raise InvalidArgumentError(
            "--on-demand takes no strategy or plan options", field="on_demand"
        )
    with planner_client(args.planner_service) as client:
        policy = client.get_compaction_policy(args.table)
        if args.on_demand:
            policy = client.set_compaction_policy(
                args.table, pb.CompactionPolicy(on_demand=pb.OnDemand())
            )
        elif args.automatic or changes:
            options = pb.CompactionOptions()
            if policy.WhichOneof("trigger") == "automatic":
                options.CopyFrom(policy.automatic)
            options.MergeFrom(pb.CompactionOptions(**changes))
            policy = client.set_compaction_policy(
                args.table, pb.CompactionPolicy(automatic=options)
            )
    summary = policy_summary(policy)
    detail = ""
    if policy.WhichOneof("trigger") == "automatic":
        detail = (
            f" ({summary['strategy']}); slices with logs of at least "
            f"{summary['log_file_size_threshold_bytes']} bytes and "
            f"{summary['log_file_num_threshold']} files, partitions {summary['partitions']}, "
            f"at most {summary['target_io_mb']} MB of IO per plan"
        )
    print_policy(args, "compaction", summary, detail)
    return 0


def _option_changes(args: argparse.Namespace) -> dict[str, Any]:
    """The fields of ``CompactionOptions`` the arguments give."""
    changes: dict[str, Any] = {
        name: getattr(args, name) for name in OPTIONS if getattr(args, name) is not None
    }
    if args.strategy is not None:
        changes["trigger"] = pb.CompactionTrigger.Value(f"COMPACTION_TRIGGER_{args.strategy}")
    if args.log_file_size_threshold_mb is not None:
        changes["log_file_size_threshold_bytes"] = round(args.log_file_size_threshold_mb * MIB)
    if args.partitions is not None:
        changes["partitions"] = partition_filter(args.partitions, field="partitions")
    return changes


def policy_summary(policy: pb.CompactionPolicy) -> dict[str, Any]:
    """The policy as printed: its trigger described, and its options with defaults."""
    if policy.WhichOneof("trigger") != "automatic":
        return {"trigger": ON_DEMAND}
    options = policy.automatic
    defaults = CompactionSettings()
    strategy = pb.CompactionTrigger.Name(options.trigger).removeprefix("COMPACTION_TRIGGER_")
    settings = CompactionSettings(
        strategy=TriggerStrategy.NUM_COMMITS
        if strategy == "UNSPECIFIED"
        else TriggerStrategy(strategy),
        max_delta_commits=options.max_delta_commits or defaults.max_delta_commits,
        max_delta_seconds=options.max_delta_seconds or defaults.max_delta_seconds,
    )
    kind = options.partitions.WhichOneof("filter")
    return {
        "trigger": settings.describe(),
        "strategy": settings.strategy.value,
        "max_delta_commits": settings.max_delta_commits,
        "max_delta_seconds": settings.max_delta_seconds,
        "log_file_size_threshold_bytes": options.log_file_size_threshold_bytes,
        "log_file_num_threshold": options.log_file_num_threshold,
        "partitions": "all" if kind in (None, "all") else _filter_text(options.partitions),
        "target_io_mb": options.target_io_mb or int(defaults.target_io_mb),
    }


def _filter_text(selection: pb.PartitionFilter) -> str:
    kind = selection.WhichOneof("filter")
    if kind == "recent":
        return f"recent:{selection.recent.count}"
    if kind == "regex":
        return f"regex:{selection.regex}"
    return "list:" + ",".join(selection.list.partition_paths)


def run_cancel(args: argparse.Namespace) -> int:
    with planner_client(args.planner_service, args.lock_wait_s) as client:
        plan = client.cancel_compaction(args.table, args.instant)
    summary = {
        "cancelled": plan.instant_time,
        "file_groups": len(plan.operations),
        "log_files": plan.num_log_files,
    }
    if args.json:
        print(json.dumps(summary))
        return 0
    print(
        f"cancelled compaction {plan.instant_time}: {len(plan.operations)} file groups, "
        f"{plan.num_log_files} log files"
    )
    return 0
