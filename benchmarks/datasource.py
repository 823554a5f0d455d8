"""``python -m benchmarks datasource``: a 100-key ``IN`` query through the ``tidemark`` data source
against a full scan of the same table.

One table (bulk_insert of generated rows from ``--input-tasks`` tasks, each writing one file
per partition, then a record index) is queried for ``--keys`` keys
spread over it, twice per run, alternating: through ``tidemark.spark.read`` (the record index
picks the files holding the keys) and through the same data source without pushdown (the one
PySpark discovers, in a session where ``spark.sql.python.filterPushdown.enabled`` is off), which
reads every file while Spark filters the rows. Both must return the same rows. Times are the
median of ``--runs``; files and rows read are what each query's planning opens (the rows are
those files' footer counts).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.datasource import In

from benchmarks.write import bulk_insert_generated, generate
from tidemark import spark as tidemark_spark
from tidemark.commands.args import positive_int
from tidemark.errors import InvalidArgumentError
from tidemark.jobs.datasource import (
    NAME,
    FilePartition,
    PushdownReader,
    ScanDataSource,
    TidemarkDataSource,
)
from tidemark.jobs.index_build import build_index
from tidemark.jobs.session import DEFAULT_MASTER, build_session
from tidemark.logs import configure_logging
from tidemark.storage import open_storage
from tidemark.table.table import HoodieTable

SEED = 0
"""The keys are a fixed random sample of the ids: spread over partitions and files, as the
ids of a GDPR request or a join's other side would be."""


def register(bench_subparsers: Any) -> None:
    parser: argparse.ArgumentParser = bench_subparsers.add_parser(
        "datasource",
        help="IN query on the record key through the data source vs a full scan",
        description=__doc__,
    )
    parser.add_argument("--rows", type=positive_int, default=1_000_000, help="rows in the table")
    parser.add_argument("--keys", type=positive_int, default=100, help="keys in the IN list")
    parser.add_argument(
        "--input-tasks",
        type=positive_int,
        default=40,
        help="tasks writing the table, each one file per partition: how many files it has",
    )
    parser.add_argument("--runs", type=positive_int, default=3, help="alternating runs of each")
    parser.add_argument("--master", default=DEFAULT_MASTER, help="Spark master")
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    parser.set_defaults(handler=_handle)


def run_benchmark(
    spark: SparkSession, table_uri: str, rows: int, keys: int, runs: int, input_tasks: int = 40
) -> dict[str, Any]:
    """Write and index the table, then time both queries ``runs`` times, alternating."""
    bulk_insert_generated(spark, generate(spark, rows).repartition(input_tasks), table_uri)
    build_index(spark, HoodieTable.open(table_uri))
    wanted = sorted(random.Random(SEED).sample(range(rows), keys))
    pruned = _query(tidemark_spark.read(spark, table_uri), wanted)
    full = _query(spark.newSession().read.format(NAME).load(table_uri), wanted)
    pruned_files = _planned_files(TidemarkDataSource({"path": table_uri}), wanted)
    full_files = _planned_files(ScanDataSource({"path": table_uri}), wanted)
    pruned_s: list[float] = []
    full_s: list[float] = []
    expected: list[Any] | None = None
    for _ in range(runs):
        for query, times in ((pruned, pruned_s), (full, full_s)):
            started = time.perf_counter()
            found = sorted(tuple(r) for r in query.collect())
            times.append(time.perf_counter() - started)
            expected = expected if expected is not None else found
            if found != expected or len(found) != keys:
                raise RuntimeError(f"the queries disagree: {len(found)} rows, {keys} keys")
    result = {
        "rows": rows,
        "keys": keys,
        "runs": runs,
        "input_tasks": input_tasks,
        "rows_returned": keys,
        "files": len(full_files),
        "datasource_files_read": len(pruned_files),
        "full_scan_files_read": len(full_files),
        "datasource_rows_read": _rows_in(table_uri, pruned_files),
        "full_scan_rows_read": _rows_in(table_uri, full_files),
        "datasource_s": statistics.median(pruned_s),
        "full_scan_s": statistics.median(full_s),
    }
    result["speedup"] = result["full_scan_s"] / result["datasource_s"]
    return result


def readme_rows(result: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(benchmark, Tidemark, baseline, ratio) rows for the README's table."""
    query = (
        f"{result['keys']}-key IN query on the key, {result['rows']:,} rows in "
        f"{result['files']:,} files"
    )
    return [
        (
            f"data source: {query} (median s)",
            f"{result['datasource_s']:.2f} s",
            f"{result['full_scan_s']:.2f} s (full scan)",
            f"{result['speedup']:.1f}x",
        ),
        (
            "data source: files read",
            f"{result['datasource_files_read']:,}",
            f"{result['full_scan_files_read']:,}",
            f"{result['full_scan_files_read'] / max(result['datasource_files_read'], 1):.1f}x",
        ),
        (
            "data source: rows read",
            f"{result['datasource_rows_read']:,}",
            f"{result['full_scan_rows_read']:,}",
            f"{result['full_scan_rows_read'] / max(result['datasource_rows_read'], 1):.1f}x",
        ),
    ]


def format_report(result: dict[str, Any]) -> str:
    lines = [
        f"{result['keys']}-key IN query on the record key, {result['rows']:,} rows in "
        f"{result['files']:,} files (median of {result['runs']} alternating runs)",
        f"{'':24} {'data source':>14} {'full scan':>14} {'full/source':>12}",
    ]
    for label, ours, theirs in (
        ("files read", result["datasource_files_read"], result["full_scan_files_read"]),
        ("rows read", result["datasource_rows_read"], result["full_scan_rows_read"]),
        ("rows returned", result["rows_returned"], result["rows_returned"]),
        ("query time (s)", result["datasource_s"], result["full_scan_s"]),
    ):
        cells = [f"{v:,}" if isinstance(v, int) else f"{v:,.3f}" for v in (ours, theirs)]
        lines.append(f"{label:24} {cells[0]:>14} {cells[1]:>14} {theirs / ours:>11,.2f}x")
    return "\n".join(lines)


def _query(frame: DataFrame, keys: list[int]) -> DataFrame:
    return frame.where(sf.col("id").isin(keys)).select("_hoodie_record_key", "id", "name")


def _planned_files(source: ScanDataSource, keys: list[int]) -> list[str]:
    """The base files the source's reader plans for the query, as PySpark's planning worker
    runs it (filters pushed only to a reader that takes them)."""
    reader = source.reader(source.schema())
    if isinstance(reader, PushdownReader):
        reader.pushFilters([In(("id",), tuple(keys))])
    return [
        path
        for partition in reader.partitions()
        if isinstance(partition, FilePartition)
        for path in partition.plan.paths
    ]


def _rows_in(table_uri: str, paths: list[str]) -> int:
    storage = open_storage(table_uri)
    total = 0
    for path in paths:
        with storage.open_input(path) as stream:
            total += pq.ParquetFile(stream).metadata.num_rows
    return total


def _handle(args: argparse.Namespace) -> int:
    if args.keys > args.rows:
        raise InvalidArgumentError(f"must be at most --rows ({args.rows})", field="keys")
    configure_logging(json=False, level="warning")
    spark = build_session(args.master, app_name="tidemark-bench-datasource")
    workdir = Path(tempfile.mkdtemp(prefix="tidemark-bench-datasource-"))
    try:
        result = run_benchmark(
            spark, str(workdir / "table"), args.rows, args.keys, args.runs, args.input_tasks
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(format_report(result))
    if args.json:
        print(json.dumps(result))
    return 0
