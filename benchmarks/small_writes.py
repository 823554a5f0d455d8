"""``python -m benchmarks small-writes``: small upserts with their shuffles sized to the
input against the same upserts run with the session's ``spark.sql.shuffle.partitions``
(Spark's default 200, what every write ran with before).

A table of ``--rows`` rows (three partitions, no record index) gets ``--writes`` upserts
of ``--batch-rows`` rows per side, the sides taking turns on the same table (which goes
first alternates): one with ``WriteOptions(shuffle_parallelism=0)`` (sized, the default),
the other with ``shuffle_parallelism`` set to the session's setting. The session is a
user's: ``spark.sql.shuffle.partitions`` 200, adaptive execution on (Spark 4's default).
Reported per side: the median wall time of an upsert (call to return) and the Spark
tasks it ran (completed tasks of its jobs, from Spark's status tracker), and the load
average before and after (the machine may be shared).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

import tidemark.spark
from benchmarks.report import ReadmeRow, run_in_temp_root, times
from tidemark.commands.args import positive_int
from tidemark.jobs.session import DEFAULT_MASTER, build_session
from tidemark.jobs.shuffles import SHUFFLE_PARTITIONS
from tidemark.jobs.write_options import WriteOptions

SESSION_SHUFFLE_PARTITIONS = 200
"""Spark's default ``spark.sql.shuffle.partitions``, as a user's session has it."""
SIDES = ("sized", "session")
SCHEMA = "id long, user string, day string, ts long"


def register(bench_subparsers: Any) -> None:
    parser: argparse.ArgumentParser = bench_subparsers.add_parser(
        "small-writes",
        help="small upserts: shuffles sized to the input vs the session's 200 partitions",
        description=__doc__,
    )
    parser.add_argument("--rows", type=positive_int, default=2_000, help="table rows")
    parser.add_argument("--batch-rows", type=positive_int, default=10, help="rows an upsert")
    parser.add_argument("--writes", type=positive_int, default=5, help="upserts per side")
    parser.add_argument("--master", default=DEFAULT_MASTER, help="Spark master")
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    parser.set_defaults(handler=run)


def stage_tasks(spark: SparkSession, jobs_before: set[int]) -> list[int]:
    """Tasks completed by each stage of the jobs started since ``jobs_before`` was taken."""
    tracker = spark.sparkContext.statusTracker()
    counts = []
    for job in sorted(set(tracker.getJobIdsForGroup(None)) - jobs_before):
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info else ():
            stage_info = tracker.getStageInfo(stage)
            counts.append(stage_info.numCompletedTasks if stage_info else 0)
    return counts


def measure(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    load_before = os.getloadavg()
    spark = build_session(  # a user's shuffle partitions, Tidemark's default parallelism
        args.master,
        app_name="tidemark-bench-small-writes",
        conf={SHUFFLE_PARTITIONS: str(SESSION_SHUFFLE_PARTITIONS)},
    )
    table = str(root / "table")
    rows = [(i, f"user-{i % 7}", f"2026-11-0{1 + i % 3}", i) for i in range(args.rows)]
    options = WriteOptions(
        record_key_fields=["id"], partition_fields=["day"], precombine_field="ts"
    )
    tidemark.spark.write(spark.createDataFrame(rows, SCHEMA), table, "bulk_insert", options=options)
    parallelism = {"sized": 0, "session": SESSION_SHUFFLE_PARTITIONS}
    seconds: dict[str, list[float]] = {side: [] for side in SIDES}
    tasks: dict[str, list[int]] = {side: [] for side in SIDES}
    for turn in range(args.writes):
        for side in SIDES if turn % 2 == 0 else SIDES[::-1]:
            step = args.rows // args.batch_rows
            batch = [
                (k * step, f"{side}-{turn}", f"2026-11-0{1 + (k * step) % 3}", args.rows + turn)
                for k in range(args.batch_rows)
            ]
            frame = spark.createDataFrame(batch, SCHEMA)
            jobs_before = set(spark.sparkContext.statusTracker().getJobIdsForGroup(None))
            started = time.perf_counter()
            tidemark.spark.write(
                frame, table, "upsert", options=WriteOptions(shuffle_parallelism=parallelism[side])
            )
            seconds[side].append(time.perf_counter() - started)
            tasks[side].append(sum(stage_tasks(spark, jobs_before)))
    report: dict[str, Any] = {
        "rows": args.rows,
        "batch_rows": args.batch_rows,
        "writes": args.writes,
        "master": args.master,
        "session_shuffle_partitions": SESSION_SHUFFLE_PARTITIONS,
        "cores": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    for side in SIDES:
        report[f"{side}_median_s"] = round(statistics.median(seconds[side]), 3)
        report[f"{side}_tasks"] = int(statistics.median(tasks[side]))
    return report


def readme_rows(result: dict[str, Any]) -> list[ReadmeRow]:
    """The benchmark table's rows (benchmark, Tidemark, baseline, ratio): both sides in
    one run, taking turns on one table."""
    setting = (
        f"`bench small-writes --rows {result['rows']} --batch-rows {result['batch_rows']} "
        f"--writes {result['writes']}` ({result['master']}, {result['cores']} cores; 1-minute "
        f"load average {result['load_average_before'][0]:.0f} before, "
        f"{result['load_average_after'][0]:.0f} after): an upsert's median time"
    )
    return [
        (
            setting,
            f"shuffles sized to the input {result['sized_median_s']:.2f} s",
            f"the session's {result['session_shuffle_partitions']} partitions "
            f"{result['session_median_s']:.2f} s",
            times(result["session_median_s"], result["sized_median_s"]),
        ),
        (
            "same: Spark tasks an upsert ran",
            f"{result['sized_tasks']}",
            f"{result['session_tasks']}",
            times(result["session_tasks"], result["sized_tasks"]),
        ),
    ]


def format_report(report: dict[str, Any]) -> str:
    lines = [
        f"small-writes bench: {report['writes']} upserts of {report['batch_rows']} rows per "
        f"side into a {report['rows']:,}-row table (master {report['master']}, "
        f"{report['cores']} cores; load average {report['load_average_before']} before, "
        f"{report['load_average_after']} after)",
        f"{'side':30} {'median s':>9} {'tasks':>6}",
        f"{'shuffles sized to the input':30} {report['sized_median_s']:>9.2f} "
        f"{report['sized_tasks']:>6}",
        f"{'the session partitions (200)':30} {report['session_median_s']:>9.2f} "
        f"{report['session_tasks']:>6}",
        "median session / sized: " + times(report["session_median_s"], report["sized_median_s"]),
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    run_in_temp_root(args, "tidemark-bench-small-writes-", measure, format_report)
    return 0
