"""``python -m benchmarks stream-clustering``: a Structured Streaming query of spread-key
upserts through ``tidemark.spark.stream_writer`` beside a thread that schedules and runs
clustering, for ``--minutes``; then the table checked against a model.

The table: ``--rows`` rows in ``--files`` small files over four partitions, with a record
index. The query: Spark's rate source, ``--batch-rows`` upserts every ``--trigger-s``
seconds, keys spread over the whole table (each batch rewrites every file group, a
copy-on-write stream's worst case). The clusterer: every ``--cluster-every-s`` seconds it
schedules a plan through the embedded planner, waits ``--cluster-delay-s``, then runs it,
as a user's scheduler would. Reported: batches written and failed, batch latency p50 and
p99, clusterings committed, plans given up and protected, and whether hudi-rs reads
exactly the model's rows (every key with its greatest written ``ts``) and the record index
names exactly the snapshot's file group of every key. Not a speed benchmark: a stream
that dies, a clustering that never commits, or a row or key off is the finding.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
from hudi import HudiReadOptions, HudiTableBuilder
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

import tidemark.spark
from benchmarks.report import run_in_temp_root
from tidemark.commands.args import positive_int
from tidemark.errors import TidemarkError
from tidemark.index.record_index import RecordIndex
from tidemark.jobs.session import DEFAULT_MASTER, build_session
from tidemark.jobs.write_options import WriteOptions
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.files.file_names import parse_base_file_name
from tidemark.table.plans.clustering import plan_of
from tidemark.table.writes.commit import committed_with_key
from tidemark.table.writes.pending_clustering import given_up_plans, is_protected

PARTITIONS = 4


def register(bench_subparsers: Any) -> None:
    parser: argparse.ArgumentParser = bench_subparsers.add_parser(
        "stream-clustering",
        help="a spread-key stream beside scheduled clustering, checked against a model",
        description=__doc__,
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the query runs")
    parser.add_argument("--rows", type=positive_int, default=200_000, help="table rows")
    parser.add_argument("--files", type=positive_int, default=128, help="the table's files")
    parser.add_argument("--batch-rows", type=positive_int, default=1_500, help="upserts a batch")
    parser.add_argument("--trigger-s", type=positive_int, default=4, help="trigger interval")
    parser.add_argument("--cluster-every-s", type=positive_int, default=20)
    parser.add_argument("--cluster-delay-s", type=positive_int, default=10)
    parser.add_argument("--master", default=DEFAULT_MASTER, help="Spark master")
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    parser.set_defaults(handler=run)


class Model:
    """The greatest ``ts`` of each key over the batches the table committed: what every
    reader must return. A batch's rows are taken before it is written; whether it
    committed is decided at the end (the writer returned, or, for a batch the query's stop
    cut off after its commit, its idempotency key is on the timeline)."""

    def __init__(self, rows: int) -> None:
        self.ts = dict.fromkeys(range(rows), 0)
        self.batches: dict[int, list[tuple[int, int]]] = {}
        self.returned: set[int] = set()

    def batch_taken(self, batch_id: int, batch: DataFrame) -> None:
        self.batches[batch_id] = [
            (row["id"], row["ts"]) for row in batch.select("id", "ts").collect()
        ]

    def settle(self, table: HoodieTable, key_of: Callable[[int], str]) -> None:
        for batch_id, rows in sorted(self.batches.items()):
            if batch_id in self.returned or committed_with_key(table, key_of(batch_id)):
                for key, ts in rows:
                    self.ts[key] = max(self.ts[key], ts)


class Clusterer(threading.Thread):
    """Schedule, wait, run, as a user's scheduler thread would; outcomes counted."""

    def __init__(self, spark: SparkSession, table: str, args: argparse.Namespace) -> None:
        super().__init__(daemon=True)
        self.spark, self.table, self.args = spark, table, args
        self.stop_asked = threading.Event()
        self.outcomes: dict[str, int] = {"scheduled": 0, "nothing": 0, "committed": 0}
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.stop_asked.wait(self.args.cluster_every_s):
            try:
                instant = tidemark.spark.cluster_schedule(self.table, sort_columns=["id"])
                if instant is None:
                    self.outcomes["nothing"] += 1
                    continue
                self.outcomes["scheduled"] += 1
                if self.stop_asked.wait(self.args.cluster_delay_s):
                    return
                done = tidemark.spark.cluster_run(self.spark, self.table, instant)
                self.outcomes["committed"] += len(done)
            except TidemarkError as error:
                self.errors.append(str(error))


def measure(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    spark = build_session(args.master, app_name="tidemark-bench-stream-clustering")
    table = str(root / "table")
    rows = spark.range(args.rows).select(
        "id",
        (sf.col("id") % PARTITIONS).cast("string").alias("part"),
        sf.lit(0).cast("long").alias("ts"),
        sf.concat(sf.lit("v"), sf.col("id").cast("string")).alias("name"),
    )
    options = WriteOptions(
        record_key_fields=["id"], partition_fields=["part"], precombine_field="ts"
    )
    tidemark.spark.write(rows.repartition(args.files), table, "bulk_insert", options=options)
    tidemark.spark.index_build(spark, table)
    model = Model(args.rows)
    latencies: list[float] = []
    stride = max(1, args.rows // args.batch_rows)
    upserts = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", max(1, args.batch_rows // args.trigger_s))
        .load()
        .select(
            ((sf.col("value") * stride + sf.floor(sf.col("value") / args.rows)) % args.rows).alias(
                "id"
            ),
            (sf.col("value") + 1).alias("ts"),
        )
        .select(
            "id",
            (sf.col("id") % PARTITIONS).cast("string").alias("part"),
            "ts",
            sf.lit("streamed").alias("name"),
        )
    )
    clusterer = Clusterer(spark, table, args)
    with tidemark.spark.stream_writer(table, query_id="bench-stream-clustering") as writer:

        def batch(df: DataFrame, batch_id: int) -> None:
            began = time.perf_counter()
            df.persist()
            model.batch_taken(batch_id, df)
            writer(df, batch_id)
            model.returned.add(batch_id)
            df.unpersist()
            latencies.append(time.perf_counter() - began)

        query = (
            upserts.writeStream.foreachBatch(batch)
            .option("checkpointLocation", str(root / "checkpoint"))
            .trigger(processingTime=f"{args.trigger_s} seconds")
            .start()
        )
        clusterer.start()
        ends = time.monotonic() + args.minutes * 60
        while query.isActive and time.monotonic() < ends:
            query.awaitTermination(10)
            print(f"{len(latencies)} batches, clustering {clusterer.outcomes}", file=sys.stderr)
        alive, failed = query.isActive, query.exception()
        clusterer.stop_asked.set()
        query.stop()
        clusterer.join()
    hoodie = HoodieTable.open(table)
    model.settle(hoodie, writer.idempotency_key)
    given_up = given_up_plans(hoodie)
    report: dict[str, Any] = {
        "minutes": args.minutes,
        "rows": args.rows,
        "files": args.files,
        "batch_rows": args.batch_rows,
        "master": spark.sparkContext.master,
        "query_alive_at_end": alive,
        "query_exception": str(failed).splitlines()[0] if failed else None,
        "batches": len(latencies),
        "batch_p50_s": round(statistics.median(latencies), 2) if latencies else None,
        "batch_p99_s": round(sorted(latencies)[int(0.99 * (len(latencies) - 1))], 2)
        if latencies
        else None,
        "clustering": clusterer.outcomes,
        "clustering_errors": clusterer.errors[-3:],
        "plans_given_up": len(given_up),
        "plans_protected": sum(
            1
            for instant in hoodie.timeline.instants()
            if (plan := plan_of(hoodie, instant)) is not None and is_protected(plan)
        ),
    }
    report.update(_check(table, model))
    return report


def _check(table: str, model: Model) -> dict[str, Any]:
    """hudi-rs's rows against the model; the record index against hudi-rs's locations."""
    hudi_table = HudiTableBuilder.from_base_uri(table).build()
    read = pa.Table.from_batches(hudi_table.read(HudiReadOptions()))
    ts = dict(zip(read.column("id").to_pylist(), read.column("ts").to_pylist(), strict=True))
    keys = read.column("_hoodie_record_key").to_pylist()
    where = {
        key: (partition, parse_base_file_name(name).file_id)
        for key, partition, name in zip(
            keys,
            read.column("_hoodie_partition_path").to_pylist(),
            read.column("_hoodie_file_name").to_pylist(),
            strict=True,
        )
    }
    located = RecordIndex.open(open_storage(table)).lookup(pa.array(sorted(where), pa.string()))
    index = {r["key"]: (r["partition"], r["file_id"]) for r in located.to_pylist()}
    return {
        "rows_exact_by_hudi_rs": read.num_rows == len(model.ts) and ts == model.ts,
        "rows_off": sum(1 for key, value in model.ts.items() if ts.get(key) != value),
        "keys_exact_in_index": index == where,
    }


def format_report(report: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"stream beside clustering: {report['minutes']:g} minutes, {report['rows']:,} rows "
            f"in {report['files']} files, {report['batch_rows']:,} spread upserts a batch "
            f"({report['master']})",
            f"query alive at the end: {report['query_alive_at_end']} "
            f"(exception: {report['query_exception']})",
            f"batches: {report['batches']}, p50 {report['batch_p50_s']} s, "
            f"p99 {report['batch_p99_s']} s",
            f"clustering: {report['clustering']}; plans given up {report['plans_given_up']}, "
            f"protected {report['plans_protected']}; errors {report['clustering_errors']}",
            f"rows exact by hudi-rs: {report['rows_exact_by_hudi_rs']} "
            f"({report['rows_off']} off); keys exact in the index: "
            f"{report['keys_exact_in_index']}",
        ]
    )


def run(args: argparse.Namespace) -> int:
    report = run_in_temp_root(args, "tidemark-bench-stream-clustering-", measure, format_report)
    healthy = report["query_alive_at_end"] and report["rows_exact_by_hudi_rs"]
    return 0 if healthy and report["keys_exact_in_index"] else 1
