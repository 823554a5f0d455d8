"""``tidemark write``: run the Spark write job on a local (or given) Spark master.

A spinner per job stage goes to stderr (a line per stage when it is no terminal); the
result summary to stdout.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from rich.console import Console

from tidemark.commands.progress import StageProgress
from tidemark.jobs.job_metrics import reported
from tidemark.jobs.write import add_arguments, run
from tidemark.logs import configure_logging


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "write",
        help="write a file into a Hudi table (bulk_insert, insert, upsert, delete, ...)",
        description="Write Parquet/CSV/JSON Lines input into a Hudi copy-on-write table, "
        "creating the table on the first write when --key is given.",
    )
    add_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line")
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    configure_logging(json=False, level="warning")
    with reported("write", args.table) as figures, StageProgress(Console(stderr=True)) as progress:
        result = run(args, progress)
        figures.stage_seconds = result.stage_seconds
        figures.lock_wait_s = result.lock_wait_s
        figures.rows, figures.files = result.rows_written, result.files_written
    if args.json:
        print(json.dumps(asdict(result)))
        return 0
    if result.empty_input:
        print(f"{result.operation}: the input is empty, nothing written")
        return 0
    if result.already_committed:
        print(
            f"{result.operation} already committed as instant {result.instant} "
            f"(idempotency key {args.idempotency_key!r}): nothing written"
        )
        return 0
    print(
        f"{result.operation} committed instant {result.instant} (completed "
        f"{result.completion_time}): "
        f"{result.rows_inserted} inserted, {result.rows_updated} updated, "
        f"{result.rows_deleted} deleted, {result.files_written} files written"
    )
    for compaction in result.compactions:
        print(
            f"compaction {compaction.instant} committed inline: {compaction.file_groups} "
            f"file groups, {compaction.rows} rows"
        )
    if result.compaction_error:
        print(f"inline compaction failed (the write committed): {result.compaction_error}")
    return 0
