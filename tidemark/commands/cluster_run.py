"""``tidemark cluster run``: execute pending clustering plans with Spark (spark_jobs/cluster.py)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from tidemark.jobs.cluster import add_arguments, run
from tidemark.jobs.job_metrics import reported
from tidemark.logs import configure_logging


def register(commands: Any) -> None:
    """Add ``run`` to the ``tidemark cluster`` subcommands."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "run",
        help="run pending clustering plans (all, or --instant)",
        description="Rewrite the file groups of pending clustering plans in the plan's "
        "layout and complete their replacecommits; a failed run is rolled back to its plan.",
    )
    add_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the results as one JSON line")
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    configure_logging(json=False, level="warning")
    with reported("cluster_run", args.table) as figures:
        results = run(args)
        figures.lock_wait_s = sum(result.lock_wait_s for result in results)
        figures.rows = sum(result.rows for result in results)
        figures.files = sum(result.files_written for result in results)
    if args.json:
        print(json.dumps({"plans": [asdict(result) for result in results]}))
        return 0
    if not results:
        print("no pending clustering plan")
    for result in results:
        print(
            f"clustering {result.instant} committed: {result.groups} groups, {result.rows} rows, "
            f"{result.files_replaced} files -> {result.files_written} files "
            f"({result.seconds:.1f} s)"
        )
    return 0
