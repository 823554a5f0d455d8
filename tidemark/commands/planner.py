"""What the commands talking to the planner service share (``tidemark cluster
schedule|list|cancel|trigger``, ``tidemark retention trigger|run``): the subcommand's
``--table``, ``--planner-service`` and ``--json``; the client, of an embedded service when
no address is given; and the trigger of a policy (``--every-commits N | --every-seconds S |
--on-demand``), which clustering's ``TriggerPolicy`` and retention's ``RetentionPolicy``
hold in the same ``trigger`` oneof.

Without ``--planner-service HOST:PORT`` a command starts an embedded planner service in
this process (like ``tidemark write``'s embedded marker service) and talks to it over
loopback gRPC, so both paths run the same code. ``--json`` prints one JSON object on one
line.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tidemark.checks import require_positive
from tidemark.clients.planner import PlannerClient
from tidemark.config import add_client_arguments
from tidemark.logs import configure_logging
from tidemark.proto.planner.v1 import planner_service_pb2 as pb

ON_DEMAND = "on demand"

Policy = pb.TriggerPolicy | pb.RetentionPolicy
"""A policy message with the ``trigger`` oneof (on_demand, every_n_commits, every_seconds)."""


def planner_subcommand(
    actions: Any, name: str, summary: str, handler: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    """The subcommand ``name`` of a group, with the options every planner command takes."""
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


def add_trigger_arguments(parser: argparse.ArgumentParser) -> None:
    """``--every-commits N | --every-seconds S | --on-demand``; none of them: show."""
    when = parser.add_mutually_exclusive_group()
    when.add_argument("--every-commits", type=int, metavar="N", help="after every N commits")
    when.add_argument("--every-seconds", type=int, metavar="S", help="every S seconds")
    when.add_argument("--on-demand", action="store_true", help="only on request (clears it)")


def set_trigger(policy: Policy, args: argparse.Namespace) -> bool:
    """Put the trigger ``add_trigger_arguments`` parsed into ``policy``; False when none was
    given. A count below one is refused here (the message's fields are unsigned), naming
    the field as the service would."""
    if args.every_commits is not None:
        require_positive("policy.every_n_commits", args.every_commits)
        policy.every_n_commits = args.every_commits
    elif args.every_seconds is not None:
        require_positive("policy.every_seconds", args.every_seconds)
        policy.every_seconds = args.every_seconds
    elif args.on_demand:
        policy.on_demand.SetInParent()
    else:
        return False
    return True


def trigger_summary(policy: Policy) -> dict[str, Any]:
    kind = policy.WhichOneof("trigger")
    if kind == "every_n_commits":
        trigger = f"after every {policy.every_n_commits} commits"
    elif kind == "every_seconds":
        trigger = f"every {policy.every_seconds} s"
    else:
        trigger = ON_DEMAND
    return {
        "trigger": trigger,
        "every_n_commits": policy.every_n_commits,
        "every_seconds": policy.every_seconds,
    }


def print_policy(
    args: argparse.Namespace, service: str, summary: dict[str, Any], detail: str = ""
) -> None:
    """Print ``summary`` (a ``trigger_summary`` and more) of the table's ``service`` policy,
    ``detail`` closing its line; when only this command's embedded service saw a trigger,
    say that no service follows it yet."""
    followed = args.planner_service is not None or summary["trigger"] == ON_DEMAND
    if args.json:
        print(json.dumps({**summary, "followed_by_service": followed}))
        return
    print(f"{service} of {args.table} is scheduled {summary['trigger']}{detail}")
    if not followed:
        print(
            "the policy is saved with the table, but no planner service follows it yet: run "
            "`tidemark serve planner` with the table in TIDEMARK_PLANNER_TABLES, or set the "
            "policy through it with --planner-service"
        )
