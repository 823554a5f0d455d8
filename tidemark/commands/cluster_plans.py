"""``tidemark cluster schedule|list|cancel|trigger``: clustering plans and trigger
policies through the planner service.

The options, client and trigger they share with ``tidemark retention`` are in
``tidemark.commands.planner``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from tidemark.clients.planner import PlanOptions
from tidemark.clustering.layouts import LAYOUT_NAMES, LAYOUTS
from tidemark.commands.planner import (
    add_trigger_arguments,
    planner_client,
    planner_subcommand,
    print_policy,
    set_trigger,
    trigger_summary,
)
from tidemark.jobs.job_options import add_lock_wait_option
from tidemark.proto.planner.v1 import planner_service_pb2 as pb

PLAN_STATES = {pb.PLAN_STATE_REQUESTED: "requested", pb.PLAN_STATE_INFLIGHT: "inflight"}


def register(actions: Any) -> None:
    """Add ``schedule``, ``list``, ``cancel`` and ``trigger`` to the ``tidemark cluster``
    subcommands."""
    schedule = planner_subcommand(actions, "schedule", "plan the table's small files", run_schedule)
    _add_plan_options(schedule)
    add_lock_wait_option(schedule)

    planner_subcommand(actions, "list", "list the pending plans", run_list)

    cancel = planner_subcommand(actions, "cancel", "roll a pending plan back", run_cancel)
    cancel.add_argument("--instant", required=True, help="instant time of the plan")
    add_lock_wait_option(cancel)

    trigger = planner_subcommand(
        actions,
        "trigger",
        "show or set when the planner service schedules the table by itself",
        run_trigger,
    )
    add_trigger_arguments(trigger)
    _add_plan_options(trigger)


def _add_plan_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sort-columns", default="", help="columns ordering the rewritten rows, a,b"
    )
    parser.add_argument(
        "--layout", choices=tuple(LAYOUTS), default="linear", help="row order (default linear)"
    )
    parser.add_argument(
        "--partitions",
        default="all",
        help="all (default), recent:N (the N greatest partition paths), regex:R, list:p1,p2",
    )
    parser.add_argument("--target-file-mb", type=int, help="size of written files (1024)")
    parser.add_argument("--small-file-mb", type=int, help="cluster files below this (300)")
    parser.add_argument("--max-group-mb", type=int, help="input per group at most (2048)")
    parser.add_argument("--max-groups", type=int, help="groups per plan at most (30)")
    parser.add_argument(
        "--skip-hot-commits",
        type=int,
        metavar="N",
        help="leave out file groups the last N commits wrote, which a stream still updates "
        "(default: the planner's setting, 0)",
    )
    parser.add_argument(
        "--skip-hot-minutes",
        type=int,
        metavar="T",
        help="leave out file groups written in the last T minutes (default: the planner's "
        "setting, 0)",
    )


def run_schedule(args: argparse.Namespace) -> int:
    with planner_client(args.planner_service, args.lock_wait_s) as client:
        response = client.schedule(args.table, PlanOptions.from_args(args).message())
    if not response.HasField("plan"):
        if args.json:
            print(json.dumps({"instant": None, "reason": response.reason}))
        else:
            print(f"nothing to cluster: {response.reason}")
        return 0
    summary = plan_summary(response.plan)
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"scheduled clustering plan {summary['instant']}: {summary['groups']} groups, "
            f"{summary['files']} files, {summary['bytes']} bytes -> "
            f"{summary['output_files']} files ({summary['layout']}"
            f"{' by ' + ','.join(summary['sort_columns']) if summary['sort_columns'] else ''})"
        )
    return 0


def run_list(args: argparse.Namespace) -> int:
    with planner_client(args.planner_service) as client:
        listed = client.list_all(args.table)
    plans = [plan_summary(plan) for plan in listed.plans]
    given_up = [given_up_summary(gone) for gone in listed.given_up]
    if args.json:
        print(json.dumps({"plans": plans, "given_up": given_up}))
        return 0
    if not plans:
        print("no pending clustering plans")
    for plan in plans:
        print(
            f"{plan['instant']} {plan['state']}{' (protected)' if plan['protected'] else ''}: "
            f"{plan['groups']} groups, {plan['files']} files, {plan['bytes']} bytes -> "
            f"{plan['output_files']} files in {', '.join(plan['partitions']) or '(root)'}"
        )
    for gone in given_up:
        rest = f"the rest in plan {gone['replacement']}" if gone["replacement"] else "none left"
        print(
            f"{gone['instant']} given up: write {gone['write']} took "
            f"{gone['file_groups_taken']} file groups, {rest}"
        )
    return 0


def run_cancel(args: argparse.Namespace) -> int:
    with planner_client(args.planner_service, args.lock_wait_s) as client:
        rollback = client.cancel_plan(args.table, args.instant)
    if args.json:
        print(json.dumps({"instant": args.instant, "rollback_instant": rollback}))
    else:
        print(f"cancelled clustering plan {args.instant} (rollback {rollback})")
    return 0


def run_trigger(args: argparse.Namespace) -> int:
    """Without --every-commits, --every-seconds or --on-demand, show the policy."""
    policy = pb.TriggerPolicy(options=PlanOptions.from_args(args).message())
    with planner_client(args.planner_service) as client:
        if set_trigger(policy, args):
            policy = client.set_policy(args.table, policy)
        else:
            policy = client.get_policy(args.table)
    print_policy(args, "clustering", policy_summary(policy))
    return 0


def policy_summary(policy: pb.TriggerPolicy) -> dict[str, Any]:
    return {
        **trigger_summary(policy),
        "sort_columns": list(policy.options.sort_columns),
        "layout": LAYOUT_NAMES.get(policy.options.layout, "linear"),
    }


def plan_summary(plan: pb.Plan) -> dict[str, Any]:
    return {
        "instant": plan.instant_time,
        "state": PLAN_STATES.get(plan.state, "unknown"),
        "groups": len(plan.groups),
        "files": plan.num_files,
        "bytes": plan.size_bytes,
        "output_files": plan.num_output_file_groups,
        "partitions": sorted({group.partition_path for group in plan.groups}),
        "sort_columns": list(plan.sort_columns),
        "layout": LAYOUT_NAMES.get(plan.layout, "linear"),
        "target_file_bytes": plan.target_file_bytes,
        "protected": plan.protected,
    }


def given_up_summary(gone: pb.GivenUpPlan) -> dict[str, Any]:
    return {
        "instant": gone.instant_time,
        "write": gone.write_instant_time,
        "file_groups_taken": gone.file_groups_taken,
        "replacement": gone.replacement_instant_time or None,
    }
