"""``python -m benchmarks stream``: micro-batches of upserts through the stream writer
against the same batches written one ``tidemark.spark.write`` at a time.

A table of ``--rows`` rows (ten partitions) gets a record index; then ``--batches``
generated batches of ``--batch-rows`` upserts of existing keys are written in turns:
batch i through ``tidemark.spark.stream_writer`` (services kept up for the query's life,
as a ``foreachBatch`` query calls it) and then the same rows, as batch i of another
query, through ``tidemark.spark.write`` with the idempotency key a user's
``foreachBatch`` function would give it (an embedded marker and index service started
and stopped per write). Both see the same table, taking turns (which goes first
alternates), so neither runs on a timeline the other did not also have. Generated
batches stand in for a rate source: the same rows reach both sides.

``--keys`` says which keys a batch updates: ``recent`` (the default), a change stream's
usual pattern: the table is partitioned by the tenth of the key range a key was created
in (as events are by day) and each batch updates keys among the newest 1%, so a batch
rewrites the file group or two holding them; ``spread``: keys over the whole table
(partitioned by the key modulo ten), copy-on-write's worst case: a batch of a few
thousand keys lands in every file group, so each batch rewrites the whole table.

Reported: each side's batch commit latency (call to return) p50 and p99 and rows per
second, the stream side's stage medians and the files a batch rewrote, what a long stream
must keep flat (``benchmarks.drift``: memory, the longest string handed to Spark, batch
latency; first against last tenth of the batches), and the load average before and after
(the machine may be shared). ``--sides stream`` runs the stream writer alone (a long
endurance run); ``--target-file-kb`` makes the table of many small files.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

import tidemark.spark
from benchmarks.drift import Drift, format_drift
from benchmarks.report import ReadmeRow, run_in_temp_root, times
from benchmarks.write import DEFAULT_TARGET_FILE_BYTES, PARTITIONS, bulk_insert_generated, generate
from tidemark.commands.args import positive_int
from tidemark.index.pruning import plan_snapshot
from tidemark.jobs.session import DEFAULT_MASTER, build_session
from tidemark.jobs.write_options import WriteOptions
from tidemark.table import HoodieTable

SIDES = ("stream", "one_at_a_time")
KEY_PATTERNS = ("recent", "spread")
RECENT_SHARE = 100
PROGRESS_EVERY = 10
"""Batches between progress lines on stderr."""
"""``recent`` batches update keys among the newest 1/RECENT_SHARE of the table."""


def register(bench_subparsers: Any) -> None:
    parser: argparse.ArgumentParser = bench_subparsers.add_parser(
        "stream",
        help="upsert micro-batches: stream writer vs one write at a time",
        description=__doc__,
    )
    parser.add_argument("--rows", type=positive_int, default=5_000_000, help="table rows")
    parser.add_argument("--batches", type=positive_int, default=100, help="batches per side")
    parser.add_argument("--batch-rows", type=positive_int, default=5_000, help="upserts a batch")
    parser.add_argument(
        "--keys", choices=KEY_PATTERNS, default="recent", help="which keys a batch updates"
    )
    parser.add_argument(
        "--sides", choices=("both", "stream"), default="both", help="stream: no baseline side"
    )
    parser.add_argument(
        "--target-file-kb",
        type=positive_int,
        default=DEFAULT_TARGET_FILE_BYTES // 1024,
        help="the table's file size (a small one makes many files)",
    )
    parser.add_argument("--master", default=DEFAULT_MASTER, help="Spark master")
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    parser.set_defaults(handler=run)


def table_rows(spark: SparkSession, rows: int, keys: str) -> DataFrame:
    """The table's rows; ``recent`` partitions them by the tenth of the key range a key
    was created in."""
    return _with_partition(generate(spark, rows), rows, keys)


def batch(spark: SparkSession, rows: int, size: int, number: int, keys: str) -> DataFrame:
    """``size`` distinct existing keys with a new version: for ``recent``, consecutive keys
    among the newest 1/RECENT_SHARE of the table (the next ones each batch); for
    ``spread``, keys a stride apart (at most rows/size, one more than a multiple of the
    partitions, so consecutive keys go to every partition) from an offset that moves with
    ``number``."""
    size = min(size, rows)
    if keys == "recent":
        window = max(size, rows // RECENT_SHARE)
        first = rows - window + (number * size) % (window - size + 1)
        key = sf.col("id") + first
    else:
        stride = rows // size
        stride = max(1, stride - (stride - 1) % PARTITIONS)
        key = sf.col("id") * stride + (number * 7919) % stride
    updates = generate(spark, size, version=number + 1).withColumn("id", key)
    return _with_partition(updates, rows, keys)


def _with_partition(frame: DataFrame, rows: int, keys: str) -> DataFrame:
    """``part`` of each row as the key pattern lays the table out."""
    part = sf.col("id") * PARTITIONS / rows if keys == "recent" else sf.col("id") % PARTITIONS
    return frame.withColumn("part", sf.floor(part).cast("int"))


def measure(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    spark = build_session(args.master, app_name="tidemark-bench-stream")
    table = str(root / "table")
    load_before = os.getloadavg()
    started = time.perf_counter()
    bulk_insert_generated(
        spark,
        table_rows(spark, args.rows, args.keys),
        table,
        target_file_bytes=args.target_file_kb * 1024,
    )
    tidemark.spark.index_build(spark, table)
    setup_s = time.perf_counter() - started
    sides = SIDES if args.sides == "both" else SIDES[:1]
    seconds: dict[str, list[float]] = {side: [] for side in sides}
    stages: list[dict[str, float]] = []
    files_written: list[int] = []
    drift = Drift(spark)
    files_at_start = len(plan_snapshot(HoodieTable.open(table)).files)
    sized = dataclasses.replace(
        tidemark.spark.STREAM_OPTIONS, target_file_bytes=args.target_file_kb * 1024
    )  # the stream keeps the table's file size, so a table of many files stays one
    with tidemark.spark.stream_writer(table, query_id="bench-stream", options=sized) as writer:
        for number in range(args.batches):
            rows = batch(spark, args.rows, args.batch_rows, number, args.keys).cache()
            rows.count()
            for side in sides if number % 2 == 0 else reversed(sides):
                began = time.perf_counter()
                if side == "stream":
                    writer(rows, number)
                else:
                    key = f"bench-one-at-a-time-{number}"
                    options = WriteOptions(
                        idempotency_key=key, target_file_bytes=args.target_file_kb * 1024
                    )
                    tidemark.spark.write(rows, table, "upsert", options=options)
                seconds[side].append(time.perf_counter() - began)
            drift.batch_done(seconds["stream"][-1])
            if (number + 1) % PROGRESS_EVERY == 0:
                print(
                    f"batch {number + 1}/{args.batches}: {drift.last()}",
                    file=sys.stderr,
                    flush=True,
                )
            stages.append(writer.results[-1].stage_seconds)
            files_written.append(writer.results[-1].files_written)
            rows.unpersist()
    report: dict[str, Any] = {
        "rows": args.rows,
        "batches": args.batches,
        "batch_rows": args.batch_rows,
        "keys": args.keys,
        "sides": args.sides,
        "files_at_start": files_at_start,
        "files": len(plan_snapshot(HoodieTable.open(table)).files),
        "files_written_median": statistics.median(files_written),
        "master": spark.sparkContext.master,
        "setup_s": round(setup_s, 1),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "stream_stage_median_s": {
            stage: round(statistics.median(run.get(stage, 0.0) for run in stages), 3)
            for stage in stages[-1]
        },
    }
    for side in sides:
        runs = sorted(seconds[side])
        report[f"{side}_p50_s"] = round(_percentile(runs, 0.5), 3)
        report[f"{side}_p99_s"] = round(_percentile(runs, 0.99), 3)
        report[f"{side}_rows_per_s"] = round(args.batch_rows * len(runs) / sum(runs))
    if args.sides == "both":
        report["p50_ratio"] = round(report["one_at_a_time_p50_s"] / report["stream_p50_s"], 2)
    report["drift"] = drift.report()
    return report


def _percentile(ordered: list[float], fraction: float) -> float:
    """The nearest-rank percentile of sorted values."""
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def readme_rows(result: dict[str, Any]) -> list[ReadmeRow]:
    """The benchmark table's rows (benchmark, Tidemark, baseline, ratio): both sides
    measured in one run, taking turns on one table."""
    setting = (
        f"`bench stream --rows {result['rows']} --batches {result['batches']} --batch-rows "
        f"{result['batch_rows']} --keys {result['keys']}` ({result['files']} file groups, "
        f"{result['files_written_median']:g} rewritten a batch, record index, "
        f"{result['master']}; 1-minute load average "
        f"{result['load_average_before'][0]:.0f} before, {result['load_average_after'][0]:.0f} "
        "after)"
    )
    stages = ", ".join(f"{k} {v:.2f} s" for k, v in result["stream_stage_median_s"].items())
    return [
        (
            f"{setting}: batch commit latency p50 (p99)",
            f"stream writer {result['stream_p50_s']:.2f} s ({result['stream_p99_s']:.2f} s)",
            f"one `write` at a time {result['one_at_a_time_p50_s']:.2f} s "
            f"({result['one_at_a_time_p99_s']:.2f} s)",
            f"{result['p50_ratio']:.2f}x",
        ),
        (
            "same: rows per second",
            f"{result['stream_rows_per_s']:,}",
            f"{result['one_at_a_time_rows_per_s']:,}",
            f"{result['stream_rows_per_s'] / result['one_at_a_time_rows_per_s']:.2f}x",
        ),
        ("same: the stream writer's stages (medians)", stages, "-", "-"),
    ]


def format_report(report: dict[str, Any]) -> str:
    lines = [
        f"stream bench: {report['batches']} batches of {report['batch_rows']:,} upserts of "
        f"{report['keys']} keys per side over a {report['rows']:,}-row table "
        f"({report['files_at_start']} file groups at the start, {report['files']} at the end, "
        f"{report['files_written_median']:g} rewritten a batch) with the record index "
        f"(master {report['master']}; load average {report['load_average_before']} before, "
        f"{report['load_average_after']} after)",
        f"{'side':16} {'p50 s':>8} {'p99 s':>8} {'rows/s':>10}",
    ]
    sides = SIDES if report.get("sides", "both") == "both" else SIDES[:1]
    for side in sides:
        lines.append(
            f"{side:16} {report[f'{side}_p50_s']:>8.3f} {report[f'{side}_p99_s']:>8.3f} "
            f"{report[f'{side}_rows_per_s']:>10,}"
        )
    if "p50_ratio" in report:
        lines.append(
            "p50 one at a time / stream: "
            + times(report["one_at_a_time_p50_s"], report["stream_p50_s"])
        )
    stages = ", ".join(f"{k} {v:.2f} s" for k, v in report["stream_stage_median_s"].items())
    lines.append(f"stream stages (medians): {stages}")
    if "drift" in report:
        lines += format_drift(report["drift"])
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    run_in_temp_root(args, "tidemark-bench-stream-", measure, format_report)
    return 0
