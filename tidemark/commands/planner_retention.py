"""``tidemark retention trigger|run``: the planner service's retention policy (when it
cleans and archives a table by itself, and with which retention) and a retention run now.

A group of its own rather than options of ``tidemark clean``: ``clean`` and ``archive``
run here, in this process, with settings given each time, while these ask the planner
service (or an embedded one), which keeps the policy with the table and follows it; as
subcommands they read like ``tidemark cluster trigger`` beside ``tidemark cluster
schedule``, and ``tidemark clean --table T`` keeps its meaning.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from tidemark.checks import require_positive
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
from tidemark.table.maintenance.archival import DEFAULT_KEEP_MAX, DEFAULT_KEEP_MIN
from tidemark.table.maintenance.clean_plan import DEFAULT_RETAIN_COMMITS

RETENTION_FIELDS = ("retain_commits", "keep_min_commits", "keep_max_commits")
"""The policy's numbers, each an option of ``trigger`` (``--retain-commits`` ...)."""


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "retention",
        help="when the planner service cleans and archives a table by itself",
        description=__doc__,
    )
    commands = parser.add_subparsers(dest="retention_command", required=True)
    trigger = planner_subcommand(
        commands,
        "trigger",
        "show or set when the planner service cleans and archives the table by itself, "
        "and what it keeps; options not given keep their value",
        run_trigger,
    )
    add_trigger_arguments(trigger)
    trigger.add_argument(
        "--retain-commits",
        type=int,
        metavar="N",
        help=f"snapshots of the last N commits stay readable (default {DEFAULT_RETAIN_COMMITS})",
    )
    trigger.add_argument(
        "--keep-min-commits",
        type=int,
        metavar="N",
        help=f"completed writes archival leaves on the active timeline, more than "
        f"--retain-commits (default {DEFAULT_KEEP_MIN})",
    )
    trigger.add_argument(
        "--keep-max-commits",
        type=int,
        metavar="M",
        help=f"archive once more completed writes than this are active, more than "
        f"--keep-min-commits (default {DEFAULT_KEEP_MAX})",
    )
    run = planner_subcommand(
        commands, "run", "clean, then archive, the table now with its policy's retention", run_now
    )
    add_lock_wait_option(run)


def run_trigger(args: argparse.Namespace) -> int:
    """Without a trigger or a number, show the policy; else change what is given."""
    numbers = {name: getattr(args, name) for name in RETENTION_FIELDS}
    given = {name: value for name, value in numbers.items() if value is not None}
    for name, value in given.items():  # 0 in the message would mean "Hudi's default"
        require_positive(f"policy.{name}", value)
    with planner_client(args.planner_service) as client:
        policy = client.get_retention_policy(args.table)
        if set_trigger(policy, args) or given:
            for name, value in given.items():
                setattr(policy, name, value)
            policy = client.set_retention_policy(args.table, policy)
    summary = {**trigger_summary(policy), **{name: getattr(policy, name) for name in numbers}}
    print_policy(
        args,
        "cleaning and archival",
        summary,
        f": snapshots of the last {policy.retain_commits} commits stay readable, "
        f"{policy.keep_min_commits} to {policy.keep_max_commits} completed writes active",
    )
    return 0


def run_now(args: argparse.Namespace) -> int:
    with planner_client(args.planner_service, args.lock_wait_s) as client:
        result = client.run_retention(args.table)
    summary = run_summary(result)
    if args.json:
        print(json.dumps(summary))
        return 0
    cleans = summary["clean_instants"]
    print(
        f"deleted {summary['files_deleted']} files"
        f"{' in clean ' + ', '.join(cleans) if cleans else ''}; earliest readable instant: "
        f"{summary['earliest_readable_instant'] or 'all retained'}"
    )
    archived = summary["archived_instants"]
    print(f"archived {len(archived)} instants{': ' + ', '.join(archived) if archived else ''}")
    return 0


def run_summary(result: pb.RunRetentionResponse) -> dict[str, Any]:
    return {
        "clean_instants": list(result.clean_instant_times),
        "files_deleted": result.files_deleted,
        "earliest_readable_instant": result.earliest_readable_instant_time or None,
        "archived_instants": list(result.archived_instants),
    }
