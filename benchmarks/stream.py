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

``--table-type MERGE_ON_READ|COPY_ON_WRITE|both`` compares table types instead (by default
with ``--keys spread`` and 20 batches): a table of each type, and the same rows as a Delta
table (``benchmarks.delta_merge``), take each batch in turns (which goes first rotates),
the Tidemark tables through a stream writer each, the Delta table through delta-rs's
``merge``. Reported per side: batch latency p50 and p90; per Tidemark table, the bytes a
batch's commit wrote (its write stats' ``totalWriteBytes``) beside the batch's own size
as one snappy Parquet file; after the batches (nothing compacted), a full snapshot scan
of every column (Spark's ``noop`` sink), the median of ``--read-repeats`` taking turns, and
a lookup of ``LOOKUP_KEYS`` keys, ``LOOKUPS_PER_SCAN`` after each scan (a lookup takes a
few tenths of a second, whose median of three swung 2x from run to run); ratios to
copy-on-write and to Tidemark MOR.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from array import array
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

import tidemark.spark
from benchmarks.delta_merge import DeltaMerge
from benchmarks.drift import Drift, format_drift
from benchmarks.report import ReadmeRow, run_in_temp_root, times
from benchmarks.write import DEFAULT_TARGET_FILE_BYTES, PARTITIONS, bulk_insert_generated, generate
from tidemark.commands.args import positive_int
from tidemark.index.pruning import plan_snapshot
from tidemark.jobs.session import DEFAULT_MASTER, build_session
from tidemark.jobs.write_options import WriteOptions
from tidemark.table import HoodieTable
from tidemark.table.logfiles.data_blocks import DEFAULT_LOG_BLOCK_FORMAT, LOG_BLOCK_FORMATS
from tidemark.table.properties.support import COPY_ON_WRITE as COW
from tidemark.table.properties.support import MERGE_ON_READ as MOR

SIDES = ("stream", "one_at_a_time")
KEY_PATTERNS = ("recent", "spread")
RECENT_SHARE = 100
"""``recent`` batches update keys among the newest 1/RECENT_SHARE of the table."""
PROGRESS_EVERY = 10
"""Batches between progress lines on stderr."""
TABLE_TYPE_CHOICES = (MOR, COW, "both")
DELTA = "delta"
"""The delta-rs side of a table-type run."""
DEFAULTS = {False: {"keys": "recent", "batches": 100}, True: {"keys": "spread", "batches": 20}}
"""``--keys`` and ``--batches`` when not given, without and with ``--table-type``."""
LOOKUP_KEYS = 100
LOOKUPS_PER_SCAN = 5
TARGETS: dict[str, tuple[str, float]] = {
    f"{MOR}_p50_s": ("<=", 1.5),
    "cow_over_mor_p50": (">=", 4.0),
    f"{MOR}_bytes_per_batch_ratio": ("<=", 3.0),
    f"{DELTA}_over_{MOR}_p50": (">=", 1.0),
    "mor_over_cow_scan": ("<=", 2.5),
    "mor_over_cow_lookup": ("<=", 1.5),
}
"""Issue 49's targets for a table-type run: a figure of the report, how it must compare."""


def register(bench_subparsers: Any) -> None:
    parser: argparse.ArgumentParser = bench_subparsers.add_parser(
        "stream",
        help="upsert micro-batches: stream writer vs one write at a time",
        description=__doc__,
    )
    parser.add_argument("--rows", type=positive_int, default=5_000_000, help="table rows")
    parser.add_argument(
        "--batches", type=positive_int, help="batches per side (100; 20 with --table-type)"
    )
    parser.add_argument("--batch-rows", type=positive_int, default=5_000, help="upserts a batch")
    parser.add_argument(
        "--keys",
        choices=KEY_PATTERNS,
        help="which keys a batch updates (recent; spread with --table-type)",
    )
    parser.add_argument(
        "--table-type",
        choices=TABLE_TYPE_CHOICES,
        help="compare table types (both: merge-on-read beside copy-on-write) and delta-rs "
        "instead of the stream writer against one write at a time",
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
    parser.add_argument(
        "--read-repeats",
        type=positive_int,
        default=3,
        help="with --table-type: scans and lookups a table, the median reported",
    )
    parser.add_argument(
        "--log-block-format",
        choices=LOG_BLOCK_FORMATS,
        default=DEFAULT_LOG_BLOCK_FORMAT,
        help="with --table-type: data blocks of the merge-on-read table's log files",
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
    """The run ``--table-type`` asks for, with the defaults of its kind."""
    for name, value in DEFAULTS[args.table_type is not None].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.table_type is not None:
        return measure_table_types(args, root)
    return measure_sides(args, root)


def measure_sides(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """The stream writer against one write at a time, taking turns on one table."""
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
    seconds: dict[str, array[float]] = {side: array("d") for side in sides}
    files_written = array("q")  # arrays, as the drift's samples: no objects a batch
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
            drift.batch_done(seconds["stream"][-1], writer.results[-1].stage_seconds)
            if (number + 1) % PROGRESS_EVERY == 0:
                print(
                    f"batch {number + 1}/{args.batches}: {drift.last()}",
                    file=sys.stderr,
                    flush=True,
                )
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
        "stream_stage_median_s": drift.stage_medians(),
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


def measure_table_types(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """Tables of each type asked for and a Delta table, taking each batch in turns."""
    spark = build_session(args.master, app_name="tidemark-bench-stream")
    types = (MOR, COW) if args.table_type == "both" else (args.table_type,)
    tables = {kind: str(root / kind.lower()) for kind in types}
    target_file_bytes = args.target_file_kb * 1024
    load_before = os.getloadavg()
    setup_s: dict[str, float] = {}
    for kind, uri in tables.items():
        started = time.perf_counter()
        rows = table_rows(spark, args.rows, args.keys)
        bulk_insert_generated(
            spark, rows, uri, target_file_bytes=target_file_bytes, table_type=kind
        )
        tidemark.spark.index_build(spark, uri)
        setup_s[kind] = time.perf_counter() - started
    started = time.perf_counter()
    delta = DeltaMerge.create(table_rows(spark, args.rows, args.keys), root / DELTA)
    setup_s[DELTA] = time.perf_counter() - started
    files_at_start = {
        kind: len(plan_snapshot(HoodieTable.open(uri)).files) for kind, uri in tables.items()
    }
    sides = (*types, DELTA)
    seconds: dict[str, list[float]] = {side: [] for side in sides}
    tagging: dict[str, str] = {}
    written: dict[str, list[int]] = {kind: [] for kind in types}
    stages: dict[str, list[dict[str, float]]] = {kind: [] for kind in types}
    batch_bytes: list[int] = []
    delta_metrics: list[dict[str, Any]] = []
    sized = dataclasses.replace(
        tidemark.spark.STREAM_OPTIONS,
        target_file_bytes=target_file_bytes,
        log_block_format=args.log_block_format,
    )
    with ExitStack() as stack:
        writers = {
            kind: stack.enter_context(
                tidemark.spark.stream_writer(uri, query_id=f"bench-{kind}", options=sized)
            )
            for kind, uri in tables.items()
        }
        for number in range(args.batches):
            rows = batch(spark, args.rows, args.batch_rows, number, args.keys).cache()
            arrow = rows.toArrow()
            batch_bytes.append(parquet_bytes(arrow, root / "batch.parquet"))
            turn = number % len(sides)
            for side in sides[turn:] + sides[:turn]:
                began = time.perf_counter()
                if side == DELTA:
                    delta_metrics.append(delta.merge(arrow))
                else:
                    writers[side](rows, number)
                seconds[side].append(time.perf_counter() - began)
            for kind, writer in writers.items():
                result = writer.results[-1]
                written[kind].append(commit_bytes(tables[kind], result.instant))
                stages[kind].append(result.stage_seconds)
                tagging[kind] = result.tagging
            if (number + 1) % PROGRESS_EVERY == 0:
                print(f"batch {number + 1}/{args.batches}", file=sys.stderr, flush=True)
            rows.unpersist()
    reads = read_seconds(spark, tables, args.rows, args.read_repeats)
    report: dict[str, Any] = {
        "table_types": list(types),
        "rows": args.rows,
        "batches": args.batches,
        "batch_rows": args.batch_rows,
        "keys": args.keys,
        "log_block_format": args.log_block_format,
        "master": spark.sparkContext.master,
        "cores": os.cpu_count(),
        "storage": "local file system (no moto)",
        "setup_s": {side: round(value, 1) for side, value in setup_s.items()},
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "batch_parquet_bytes_median": statistics.median(batch_bytes),
        "delta_files": delta.files(),
        "delta_rows_copied_median": statistics.median(
            m.get("num_target_rows_copied", 0) for m in delta_metrics
        ),
        "lookup_keys": LOOKUP_KEYS,
        "read_repeats": args.read_repeats,
        "lookups": args.read_repeats * LOOKUPS_PER_SCAN,
    }
    for side in sides:
        runs = sorted(seconds[side])
        report[f"{side}_p50_s"] = round(_percentile(runs, 0.5), 3)
        report[f"{side}_p90_s"] = round(_percentile(runs, 0.9), 3)
    for kind in types:
        report[f"{kind}_files_at_start"] = files_at_start[kind]
        report[f"{kind}_tagging"] = tagging[kind]
        report[f"{kind}_bytes_per_batch_median"] = statistics.median(written[kind])
        report[f"{kind}_bytes_per_batch_ratio"] = round(
            report[f"{kind}_bytes_per_batch_median"] / report["batch_parquet_bytes_median"], 2
        )
        report[f"{kind}_stage_median_s"] = {
            stage: round(statistics.median(run.get(stage, 0.0) for run in stages[kind]), 3)
            for stage in stages[kind][-1]
        }
        report |= {f"{kind}_{name}": value for name, value in reads[kind].items()}
    report |= table_type_ratios(report, types)
    report["targets"] = targets_met(report, TARGETS)
    return report


def targets_met(
    report: dict[str, Any], targets: dict[str, tuple[str, float]]
) -> dict[str, dict[str, Any]]:
    """Each target whose figure the report has: the target as text and whether it holds."""
    return {
        name: {"target": f"{op} {bound:g}", "met": _holds(report[name], op, bound)}
        for name, (op, bound) in targets.items()
        if name in report
    }


def _holds(value: float, op: str, bound: float) -> bool:
    return value <= bound if op == "<=" else value >= bound


def table_type_ratios(report: dict[str, Any], types: tuple[str, ...]) -> dict[str, float]:
    """What the targets compare: copy-on-write's and delta-rs's batch p50 over MOR's, MOR's
    scan and lookup over copy-on-write's (each present when both sides ran)."""
    ratios: dict[str, float] = {}
    for kind in types:
        ratios[f"{DELTA}_over_{kind}_p50"] = round(
            report[f"{DELTA}_p50_s"] / report[f"{kind}_p50_s"], 2
        )
    if types == (MOR, COW):
        ratios["cow_over_mor_p50"] = round(report[f"{COW}_p50_s"] / report[f"{MOR}_p50_s"], 2)
        for read in ("scan", "lookup"):
            ratios[f"mor_over_cow_{read}"] = round(
                report[f"{MOR}_{read}_s"] / report[f"{COW}_{read}_s"], 2
            )
    return ratios


def parquet_bytes(rows: pa.Table, path: Path) -> int:
    """The size of ``rows`` as one snappy Parquet file (pyarrow's defaults otherwise)."""
    pq.write_table(rows, path, compression="snappy")
    return path.stat().st_size


def commit_bytes(uri: str, instant: str) -> int:
    """The bytes the commit at ``instant`` wrote: its write stats' ``totalWriteBytes``."""
    timeline = HoodieTable.open(uri).timeline
    metadata = timeline.read_metadata(timeline.find(instant))
    return sum(stat.total_write_bytes for stat in metadata.write_stats)


def read_seconds(
    spark: SparkSession, tables: dict[str, str], rows: int, repeats: int
) -> dict[str, dict[str, float | int]]:
    """Per table: the median seconds of a full snapshot scan of every column (into Spark's
    ``noop`` sink), ``repeats`` times, and of a lookup of ``LOOKUP_KEYS`` keys spread over
    the table (read whole, ``toArrow``), ``LOOKUPS_PER_SCAN`` times after each scan, the
    tables taking turns, after one untimed scan
    of each (the JVM's warm-up, class loading and JIT, would otherwise fall on whichever
    table goes first); and the rows the lookup found."""
    keys = list(range(0, rows, max(1, rows // LOOKUP_KEYS)))[:LOOKUP_KEYS]
    for uri in tables.values():
        tidemark.spark.read(spark, uri).write.format("noop").mode("overwrite").save()
    scans: dict[str, list[float]] = {kind: [] for kind in tables}
    lookups: dict[str, list[float]] = {kind: [] for kind in tables}
    found: dict[str, int] = {}
    for repeat in range(repeats):
        for kind, uri in tables.items() if repeat % 2 == 0 else reversed(tables.items()):
            began = time.perf_counter()
            tidemark.spark.read(spark, uri).write.format("noop").mode("overwrite").save()
            scans[kind].append(time.perf_counter() - began)
            for _ in range(LOOKUPS_PER_SCAN):
                began = time.perf_counter()
                found[kind] = tidemark.spark.lookup(spark, uri, keys).toArrow().num_rows
                lookups[kind].append(time.perf_counter() - began)
    return {
        kind: {
            "scan_s": round(statistics.median(scans[kind]), 3),
            "lookup_s": round(statistics.median(lookups[kind]), 3),
            "lookup_rows": found[kind],
        }
        for kind in tables
    }


def _percentile(ordered: list[float], fraction: float) -> float:
    """The nearest-rank percentile of sorted values."""
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def readme_rows(result: dict[str, Any]) -> list[ReadmeRow]:
    """The benchmark table's rows (benchmark, Tidemark, baseline, ratio): both sides
    measured in one run, taking turns on one table."""
    if "table_types" in result:
        return table_type_rows(result)
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


def table_type_rows(result: dict[str, Any]) -> list[ReadmeRow]:
    """A table-type run of both types: merge-on-read against copy-on-write and delta-rs."""
    setting = (
        f"`bench stream --table-type both --rows {result['rows']} --batches "
        f"{result['batches']} --batch-rows {result['batch_rows']} --keys {result['keys']} "
        f"--log-block-format {result.get('log_block_format', 'avro')}` "
        f"({result[f'{MOR}_files_at_start']} file groups, "
        f"keys tagged by {result[f'{MOR}_tagging']} index, {result['master']}; "
        f"1-minute load average {result['load_average_before'][0]:.0f} before, "
        f"{result['load_average_after'][0]:.0f} after)"
    )
    mor, cow = f"{MOR}_", f"{COW}_"
    return [
        (
            f"{setting}: batch latency p50 (p90)",
            f"merge-on-read {result[mor + 'p50_s']:.2f} s ({result[mor + 'p90_s']:.2f} s)",
            f"copy-on-write {result[cow + 'p50_s']:.2f} s ({result[cow + 'p90_s']:.2f} s); "
            f"delta-rs merge {result[f'{DELTA}_p50_s']:.2f} s ({result[f'{DELTA}_p90_s']:.2f} s)",
            f"{result['cow_over_mor_p50']:.2f}x; {result[f'{DELTA}_over_{MOR}_p50']:.2f}x",
        ),
        (
            "same: bytes a batch's commit wrote (median)",
            f"{result[mor + 'bytes_per_batch_median']:,} "
            f"({result[mor + 'bytes_per_batch_ratio']:.2f}x the batch as Parquet)",
            f"copy-on-write {result[cow + 'bytes_per_batch_median']:,}; the batch as one "
            f"snappy Parquet file {result['batch_parquet_bytes_median']:,}",
            times(result[cow + "bytes_per_batch_median"], result[mor + "bytes_per_batch_median"])
            + " fewer",
        ),
        (
            f"same, after the {result['batches']} batches (not compacted): full scan; "
            f"{result['lookup_keys']}-key lookup (medians of {result['read_repeats']} and "
            f"{result['lookups']})",
            f"{result[mor + 'scan_s']:.2f} s; {result[mor + 'lookup_s']:.3f} s",
            f"copy-on-write {result[cow + 'scan_s']:.2f} s; {result[cow + 'lookup_s']:.3f} s",
            f"{result['mor_over_cow_scan']:.2f}x; {result['mor_over_cow_lookup']:.2f}x its time",
        ),
    ]


def format_table_types(report: dict[str, Any]) -> str:
    """A table-type run: one line a side, then the ratios against their targets."""
    types = report["table_types"]
    groups = ", ".join(f"{kind} {report[f'{kind}_files_at_start']}" for kind in types)
    tagging = ", ".join(f"{kind} {report[f'{kind}_tagging']}" for kind in types)
    lines = [
        f"stream bench, table types: {report['batches']} batches of "
        f"{report['batch_rows']:,} upserts of {report['keys']} keys over a "
        f"{report['rows']:,}-row table (file groups at the start: {groups}; "
        f"keys tagged by: {tagging}; log blocks: {report.get('log_block_format', 'avro')}), "
        f"delta-rs merge beside ({report['delta_files']} files, not partitioned); master "
        f"{report['master']}, {report['cores']} cores, {report['storage']}; load average "
        f"{report['load_average_before']} before, {report['load_average_after']} after",
        f"{'side':14} {'p50 s':>7} {'p90 s':>7} {'bytes/batch':>12} {'x batch':>8} "
        f"{'scan s':>7} {'lookup s':>8}",
    ]
    for side in [*types, DELTA]:
        line = f"{side:14} {report[f'{side}_p50_s']:>7.3f} {report[f'{side}_p90_s']:>7.3f}"
        if side != DELTA:
            line += (
                f" {report[f'{side}_bytes_per_batch_median']:>12,} "
                f"{report[f'{side}_bytes_per_batch_ratio']:>7.2f}x "
                f"{report[f'{side}_scan_s']:>7.3f} {report[f'{side}_lookup_s']:>8.3f}"
            )
        lines.append(line)
    lines.append(
        f"a batch as one snappy Parquet file: {report['batch_parquet_bytes_median']:,} bytes "
        f"(median); delta-rs copied {report['delta_rows_copied_median']:,} rows a merge "
        "(median)"
    )
    lines += [
        f"{name} = {report[name]} (target {goal['target']}: {'met' if goal['met'] else 'NOT met'})"
        for name, goal in report["targets"].items()
    ]
    for kind in types:
        stages = ", ".join(f"{k} {v:.2f} s" for k, v in report[f"{kind}_stage_median_s"].items())
        lines.append(f"{kind} stages (medians): {stages}")
    return "\n".join(lines)


def format_report(report: dict[str, Any]) -> str:
    if "table_types" in report:
        return format_table_types(report)
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
