"""``tidemark compaction run``: run pending compactions with Spark (spark_jobs/compaction.py)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from tidemark.jobs.compaction import add_arguments, run
from tidemark.logs import configure_logging


def register(commands: Any) -> None:
    """Add ``run`` to the ``tidemark compaction`` subcommands."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "run",
        help="run pending compactions (all, or --instant)",
        description="Merge each planned file slice into a new base file and complete the "
        "compaction as a commit; a failed run is rolled back to its plan.",
    )
    add_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the results as one JSON line")
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    configure_logging(json=False, level="warning")
    results = run(args)
    if args.json:
        print(json.dumps({"compactions": [asdict(result) for result in results]}))
        return 0
    if not results:
        print("no pending compaction")
    for result in results:
        print(
            f"compaction {result.instant} committed: {result.file_groups} file groups, "
            f"{result.rows} rows ({result.seconds:.1f} s)"
        )
    return 0
