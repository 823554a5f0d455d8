"""``tidemark index build``: bootstrap a table's record index with Spark (one task per
shard, ``spark_jobs/index_build.py``), a spinner per stage on stderr."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from tidemark.jobs.job_options import add_lock_options
from tidemark.logs import configure_logging


def add_build(commands: Any) -> None:
    build: argparse.ArgumentParser = commands.add_parser(
        "build",
        help="build a table's record index from its latest base files (Spark)",
        description="Build the record index of a table (ours or one Apache Hudi wrote) as "
        "of its latest completed commit; writes go on meanwhile and are caught up with "
        "under the table lock before the index is published. A table without a commit "
        "gets an empty index that its writes fill (size it with --shards).",
    )
    build.add_argument("--table", required=True, help="table base URI (path or s3://)")
    build.add_argument(
        "--shards",
        type=int,
        help="shard count, 1 to 10000 (default: sized from the record count as Hudi does)",
    )
    build.add_argument(
        "--rebuild",
        action="store_true",
        help="delete the table's record index and build it again (under the table lock)",
    )
    build.add_argument("--master", default="local[*]", help="Spark master")
    add_lock_options(build)
    build.add_argument("--json", action="store_true", help="print the result as one JSON line")
    build.set_defaults(handler=_run_build)


def _run_build(args: argparse.Namespace) -> int:
    from rich.console import Console

    from tidemark.commands.progress import StageProgress
    from tidemark.jobs.index_build import build_index, check_build
    from tidemark.jobs.index_build_options import IndexBuildOptions
    from tidemark.jobs.job_metrics import reported
    from tidemark.jobs.session import build_session
    from tidemark.table import HoodieTable

    configure_logging(json=False, level="warning")
    options = IndexBuildOptions.from_args(args)  # refused before Spark starts
    table = HoodieTable.open(args.table)
    check_build(table, options.rebuild)
    with (
        reported("index_build", args.table) as figures,
        StageProgress(Console(stderr=True)) as progress,
    ):
        result = build_index(build_session(args.master), table, options, progress)
        figures.stage_seconds = result.stage_seconds
        figures.rows, figures.files = result.entries, result.shards
    if args.json:
        print(json.dumps(asdict(result)))
    else:
        print(
            f"record index built as of {result.as_of}: {result.entries} keys in "
            f"{result.shards} shards ({result.bytes} bytes) from {result.base_files_read} "
            f"base files, {result.commits_caught_up} commits made meanwhile caught up"
        )
    return 0
