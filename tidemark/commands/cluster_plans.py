"""``tidemark cluster schedule|list|cancel|trigger``: clustering plans and trigger
policies through the planner service.

Without ``--planner-service HOST:PORT`` the commands start an embedded planner service in
this process (like ``tidemark write``'s embedded marker service) and talk to it over
loopback gRPC, so both paths run the same code. ``--json`` prints one JSON object on one
line.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tidemark.clients.planner import PlannerClient, plan_options
from tidemark.clustering.layouts import LAYOUT_NAMES, LAYOUTS
from tidemark.config import MIB, add_client_arguments
from tidemark.jobs.job_options import add_lock_wait_option
from tidemark.logs import configure_logging
from tidemark.proto.planner.v1 import planner_service_pb2 as pb

ON_DEMAND = "on demand"
PLAN_STATES = {pb.PLAN_STATE_REQUESTED: "requested", pb.PLAN_STATE_INFLIGHT: "inflight"}


def register(actions: Any) -> None:
    """Add ``schedule``, ``list``, ``cancel`` and ``trigger`` to the ``tidemark cluster``
    subcommands."""
    schedule = _subcommand(actions, "schedule", "plan the table's small files", run_schedule)
    _add_plan_options(schedule)
    add_lock_wait_option(schedule)

    _subcommand(actions, "list", "list the pending plans", run_list)

    cancel = _subcommand(actions, "cancel", "roll a pending plan back", run_cancel)
    cancel.add_argument("--instant", required=True, help="instant time of the plan")
    add_lock_wait_option(cancel)

    trigger = _subcommand(
        actions,
        "trigger",
        "show or set when the planner service schedules the table by itself",
        run_trigger,
    )
    when = trigger.add_mutually_exclusive_group()
    when.add_argument("--every-commits", type=int, metavar="N", help="after every N commits")
    when.add_argument("--every-seconds", type=int, metavar="S", help="every S seconds")
    when.add_argument("--on-demand", action="store_true", help="only on request (clears it)")
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


def _plan_options(args: argparse.Namespace) -> pb.PlanOptions:
    return plan_options(
        sort_columns=[c.strip() for c in args.sort_columns.split(",") if c.strip()],
        layout=args.layout,
        partitions=args.partitions,
        target_file_bytes=_bytes(args.target_file_mb),
        small_file_limit_bytes=_bytes(args.small_file_mb),
        max_bytes_per_group=_bytes(args.max_group_mb),
        max_groups=args.max_groups,
        hot_commits=args.skip_hot_commits,
        hot_minutes=args.skip_hot_minutes,
    )


def _subcommand(
    actions: Any, name: str, summary: str, handler: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = actions.add_parser(name, help=summary, description=summary)
    parser.add_argument("--table", required=True, help="table base URI (path or s3://)")
    parser.add_argument(
        "--planner-service",
        metavar="HOST:PORT",
        help="planner service address, or dns:///name:port for several replicas (default: "
        "an embedded service in this process)",
    )
    add_client_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=handler)
    return parser


@contextmanager
def planner_client(
    address: str | None, lock_wait_s: float | None = None
) -> Iterator[PlannerClient]:
    """A client of the service at ``address``, or of an embedded one for this command
    (waiting ``lock_wait_s`` for the table lock, if given; a running service has its
    own setting). Logs go to stderr, warnings only: stdout carries the answer."""
    configure_logging(json=False, level="warning")
    if address:
        yield PlannerClient(address)
        return
    from tidemark.services.planner.config import PlannerConfig
    from tidemark.services.planner.embedded import start_embedded_planner_service

    overrides = {} if lock_wait_s is None else {"lock_wait_s": lock_wait_s}
    with start_embedded_planner_service(PlannerConfig.load(overrides)) as service:
        yield PlannerClient(service.address)


def run_schedule(args: argparse.Namespace) -> int:
    with planner_client(args.planner_service, args.lock_wait_s) as client:
        response = client.schedule(args.table, _plan_options(args))
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
        plans = [plan_summary(plan) for plan in client.list_plans(args.table)]
    if args.json:
        print(json.dumps({"plans": plans}))
        return 0
    if not plans:
        print("no pending clustering plans")
    for plan in plans:
        print(
            f"{plan['instant']} {plan['state']}: {plan['groups']} groups, {plan['files']} "
            f"files, {plan['bytes']} bytes -> {plan['output_files']} files in "
            f"{', '.join(plan['partitions']) or '(root)'}"
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
    options = _plan_options(args)
    if args.every_commits is not None:
        policy: pb.TriggerPolicy | None = pb.TriggerPolicy(
            every_n_commits=max(args.every_commits, 0), options=options
        )
    elif args.every_seconds is not None:
        policy = pb.TriggerPolicy(every_seconds=max(args.every_seconds, 0), options=options)
    elif args.on_demand:
        policy = pb.TriggerPolicy(on_demand=pb.OnDemand(), options=options)
    else:
        policy = None
    with planner_client(args.planner_service) as client:
        if policy is None:
            policy = client.get_policy(args.table)
        else:
            policy = client.set_policy(args.table, policy)
    summary = policy_summary(policy)
    followed = args.planner_service is not None or summary["trigger"] == ON_DEMAND
    if args.json:
        print(json.dumps({**summary, "followed_by_service": followed}))
        return 0
    print(f"clustering of {args.table} is scheduled {summary['trigger']}")
    if not followed:
        print(
            "the policy is saved with the table, but no planner service follows it yet: run "
            "`tidemark serve planner` with the table in TIDEMARK_PLANNER_TABLES, or set the "
            "policy through it with --planner-service"
        )
    return 0


def policy_summary(policy: pb.TriggerPolicy) -> dict[str, Any]:
    kind = policy.WhichOneof("trigger")
    if kind == "every_n_commits":
        trigger = f"after every {policy.every_n_commits} commits"
    elif kind == "every_seconds":
        trigger = f"every {policy.every_seconds} s"
    else:
        trigger = ON_DEMAND
    options = policy.options
    return {
        "trigger": trigger,
        "every_n_commits": policy.every_n_commits,
        "every_seconds": policy.every_seconds,
        "sort_columns": list(options.sort_columns),
        "layout": LAYOUT_NAMES.get(options.layout, "linear"),
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
    }


def _bytes(megabytes: int | None) -> int | None:
    return None if megabytes is None else megabytes * MIB
