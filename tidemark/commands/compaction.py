"""``tidemark compaction schedule|list|run|trigger|cancel``: compaction of merge-on-read
tables.

``schedule`` and ``list`` read and change the timeline in this process (no Spark, no
service); ``run`` rewrites the planned slices with Spark (``spark_jobs/compaction.py``);
``trigger`` and ``cancel`` ask the planner service (``compaction_planner.py``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from tidemark.commands import compaction_planner
from tidemark.commands.spark_extra import add_needs_spark, import_command
from tidemark.jobs.job_options import add_lock_wait_option
from tidemark.logs import configure_logging
from tidemark.table import HoodieTable
from tidemark.table.maintenance.compaction import compactions_to_run, schedule_compaction
from tidemark.table.plans.compaction import DEFAULT_SCHEDULE_OPTIONS, ScheduleOptions


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "compaction",
        help="compact a merge-on-read table's log files into new base files",
        description=__doc__,
    )
    commands = parser.add_subparsers(dest="compaction_command", required=True)
    schedule = commands.add_parser(
        "schedule",
        help="plan a compaction by Hudi's defaults (<t>.compaction.requested)",
        description="Plan the file groups whose latest slice has log files, once enough "
        "deltacommits completed since the last compaction, and save the plan as Hudi does.",
    )
    schedule.add_argument("--table", required=True, help="table base URI (path or s3://)")
    schedule.add_argument(
        "--max-delta-commits",
        type=int,
        default=DEFAULT_SCHEDULE_OPTIONS.max_delta_commits,
        help="plan once this many deltacommits completed since the last compaction "
        "(Hudi's hoodie.compact.inline.max.delta.commits; default %(default)s)",
    )
    schedule.add_argument(
        "--target-io-mb",
        type=float,
        default=DEFAULT_SCHEDULE_OPTIONS.target_io_mb,
        help="MB one plan may read and write (Hudi's hoodie.compaction.target.io; default "
        "%(default)s)",
    )
    add_lock_wait_option(schedule)
    schedule.set_defaults(handler=_schedule)
    listing = commands.add_parser("list", help="list the pending compactions")
    listing.add_argument("--table", required=True, help="table base URI (path or s3://)")
    listing.add_argument("--json", action="store_true", help="print one JSON line")
    listing.set_defaults(handler=_list)
    compaction_run = import_command("tidemark.commands.compaction_run")
    if compaction_run is None:
        add_needs_spark(commands, "run", "tidemark compaction run")
    else:
        compaction_run.register(commands)
    compaction_planner.register(commands)


def _schedule(args: argparse.Namespace) -> int:
    configure_logging(json=False, level="warning")
    options = ScheduleOptions(args.max_delta_commits, args.target_io_mb)
    instant = schedule_compaction(
        HoodieTable.open(args.table), options, lock_wait_s=args.lock_wait_s
    )
    print("no compaction due" if instant is None else f"scheduled compaction {instant.timestamp}")
    return 0


def _list(args: argparse.Namespace) -> int:
    configure_logging(json=False, level="warning")
    pending = compactions_to_run(HoodieTable.open(args.table), None)
    rows = [
        {
            "instant": p.timestamp,
            "state": p.instant.state.name.lower(),
            "file_groups": len(p.plan.operations),
            "log_files": sum(len(op.log_files) for op in p.plan.operations),
            "io_mb": round(p.plan.io_mb, 3),
        }
        for p in pending
    ]
    if args.json:
        print(json.dumps({"compactions": rows}))
        return 0
    if not rows:
        print("no pending compaction")
    for row in rows:
        print(
            f"{row['instant']} {row['state']}: {row['file_groups']} file groups, "
            f"{row['log_files']} log files, {row['io_mb']} MB of IO"
        )
    return 0
