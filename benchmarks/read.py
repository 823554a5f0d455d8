"""``python -m benchmarks read``: queries through ``tidemark.spark.read`` / ``lookup`` against
``spark.read.parquet`` over the same files and hudi-rs, in one run.

One table (bulk_insert of ``--rows`` generated rows from ``--files``/10 tasks, each writing
one file per partition of ten, then a record index; ``ts`` is a hash of the key, so every
file spans its whole range) and a copy of it clustered by ``ts`` are queried: a full scan
(sum of the keys), a count, one partition, a 1% range of ``ts``, one key and
``--keys`` keys. Tidemark prunes files in the driver (partitions, record index, column
statistics) and reads what is left in the driver when it is a few small files
(``tidemark.jobs.driver_read``: the key lookup, a point query, a range over clustered
files), else hands it to Spark's Parquet reader;
``spark.read.parquet`` is given every file of the snapshot and filters with its own
row-group statistics; hudi-rs reads the snapshot to Arrow (its partition filter passed
down) and pyarrow computes the answer.
All three must agree. Times are the best of ``--runs`` alternating rounds, each building
its DataFrame (planning, listing, schema) and running the query.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from hudi import HudiReadOptions, HudiTableBuilder
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from benchmarks.clustering import schedule_whole_table
from benchmarks.report import run_in_temp_root, times
from benchmarks.write import PARTITIONS, bulk_insert_generated
from tidemark import spark as tidemark_spark
from tidemark.commands.args import positive_int
from tidemark.errors import InvalidArgumentError
from tidemark.index.pruning import plan_snapshot
from tidemark.jobs.cluster import run_clustering
from tidemark.jobs.driver_read import read_pays_in_driver
from tidemark.jobs.index_build import build_index
from tidemark.jobs.lookup import plan_lookup
from tidemark.jobs.read import where_filters
from tidemark.jobs.session import DEFAULT_MASTER, build_session
from tidemark.storage.uri import hadoop_uri
from tidemark.table import HoodieTable

SEED = 0
TS_RANGE = 1_000_000_000
RANGE = (500_000_000, 510_000_000)
"""A 1% slice of ``ts``."""
PARTITION = 3
Answer = tuple[Any, ...]
Query = Callable[[DataFrame], Answer]


def register(bench_subparsers: Any) -> None:
    parser: argparse.ArgumentParser = bench_subparsers.add_parser(
        "read",
        help="reads through tidemark.spark vs spark.read.parquet and hudi-rs",
        description=__doc__,
    )
    parser.add_argument("--rows", type=positive_int, default=2_000_000, help="rows in the table")
    parser.add_argument(
        "--files", type=positive_int, default=400, help="base files (a multiple of 10)"
    )
    parser.add_argument(
        "--clustered-files",
        type=positive_int,
        default=40,
        help="about how many files clustering by ts leaves",
    )
    parser.add_argument("--keys", type=positive_int, default=100, help="keys in the key query")
    parser.add_argument("--runs", type=positive_int, default=3, help="alternating rounds")
    parser.add_argument("--master", default=DEFAULT_MASTER, help="Spark master")
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    parser.set_defaults(handler=_handle)


def generate(spark: SparkSession, rows: int, files: int) -> DataFrame:
    """Rows with a long key, a partition of ten and ``ts``, a hash of the key."""
    return (
        spark.range(0, rows)
        .select(
            sf.col("id"),
            (sf.col("id") % PARTITIONS).cast("int").alias("part"),
            sf.concat(sf.lit("name-"), sf.col("id").cast("string")).alias("name"),
            (sf.col("id") * 1.5).alias("amount"),
            sf.pmod(sf.xxhash64("id"), sf.lit(TS_RANGE)).alias("ts"),
            sf.lit(0).cast("long").alias("version"),
        )
        .repartition(max(1, files // PARTITIONS))
    )


def run_benchmark(
    spark: SparkSession,
    root: Path,
    rows: int,
    files: int,
    clustered_files: int,
    keys: int,
    runs: int,
) -> dict[str, Any]:
    """Write, index and cluster a copy; then every query on both tables."""
    table = str(root / "table")
    bulk_insert_generated(spark, generate(spark, rows, files), table)
    build_index(spark, HoodieTable.open(table))
    clustered = str(root / "clustered")
    shutil.copytree(table, clustered)
    total = sum(f.size for f in plan_snapshot(HoodieTable.open(clustered)).files)
    schedule_whole_table(clustered, ("ts",), "linear", max(1, total // clustered_files))
    run_clustering(spark, HoodieTable.open(clustered))
    wanted = sorted(random.Random(SEED).sample(range(rows), keys))
    result: dict[str, Any] = {
        "rows": rows,
        "keys": keys,
        "runs": runs,
        "master": str(spark.sparkContext.master),
        "load_average": os.getloadavg()[0],
        "tables": {
            "table": _measure(spark, table, wanted, runs),
            "clustered": _measure(spark, clustered, wanted, runs),
        },
    }
    plain, sorted_ = result["tables"]["table"], result["tables"]["clustered"]
    result["files"] = plain["files"]
    result["clustered_files"] = sorted_["files"]
    result["full_scan_vs_parquet"] = (
        plain["full scan"]["tidemark_s"] / plain["full scan"]["parquet_s"]
    )
    result["keys_speedup"] = plain["keys"]["parquet_s"] / plain["keys"]["tidemark_s"]
    result["clustered_range_speedup"] = (
        plain["range"]["tidemark_s"] / sorted_["range"]["tidemark_s"]
    )
    return result


def _measure(spark: SparkSession, uri: str, keys: list[int], runs: int) -> dict[str, Any]:
    table = HoodieTable.open(uri)
    snapshot = plan_snapshot(table)
    files = [f"{hadoop_uri(uri)}/{f.path}" for f in snapshot.files]
    low, high = RANGE
    between = [("ts", ">=", low), ("ts", "<", high)]

    def whole() -> DataFrame:
        return tidemark_spark.read(spark, uri)

    def parquet() -> DataFrame:
        return spark.read.parquet(*files)

    queries: dict[str, tuple[Callable[[], DataFrame], Callable[[], DataFrame], Any]] = {
        "full scan": (whole, parquet, None),
        "count": (whole, parquet, None),
        "partition": (
            lambda: tidemark_spark.read(spark, uri, where={"part": PARTITION}),
            lambda: parquet().where(sf.col("part") == PARTITION),
            ("part", PARTITION),
        ),
        "range": (
            lambda: tidemark_spark.read(spark, uri, filters=between),
            lambda: parquet().where(sf.col("ts").between(low, high - 1)),
            None,
        ),
        "point": (
            lambda: tidemark_spark.read(spark, uri, where={"id": keys[0]}),
            lambda: parquet().where(sf.col("id") == keys[0]),
            None,
        ),
        "keys": (
            lambda: tidemark_spark.lookup(spark, uri, keys),
            lambda: parquet().where(sf.col("id").isin(keys)),
            None,
        ),
    }
    arrow = {
        "full scan": _total,
        "count": lambda t: (t.num_rows,),
        "partition": lambda t: _total(t.filter(pc.equal(t.column("part"), PARTITION))),
        "range": lambda t: _total(
            t.filter(pc.and_(pc.greater_equal(t.column("ts"), low), pc.less(t.column("ts"), high)))
        ),
        "point": lambda t: _ids(t, pc.equal(t.column("id"), keys[0])),
        "keys": lambda t: _ids(t, pc.is_in(t.column("id"), pa.array(keys))),
    }
    spark_answers: dict[str, Query] = {
        "full scan": lambda f: _spark_total(f),
        "count": lambda f: (f.count(),),
        "partition": lambda f: _spark_total(f),
        "range": lambda f: _spark_total(f),
        "point": lambda f: tuple(sorted(r.id for r in f.select("id").collect())),
        "keys": lambda f: tuple(sorted(r.id for r in f.select("id").collect())),
    }
    report: dict[str, Any] = {"files": len(files)}
    for name, (ours, theirs, hudi_filter) in queries.items():
        answer = spark_answers[name]
        timings: dict[str, list[float]] = {"tidemark_s": [], "parquet_s": [], "hudi_rs_s": []}
        answers: set[Answer] = set()
        for _ in range(runs):
            for label, build in (("tidemark_s", ours), ("parquet_s", theirs)):
                started = time.perf_counter()
                answers.add(answer(build()))
                timings[label].append(time.perf_counter() - started)
            started = time.perf_counter()
            answers.add(arrow[name](_hudi_rs(uri, hudi_filter)))
            timings["hudi_rs_s"].append(time.perf_counter() - started)
        if len(answers) != 1:
            raise RuntimeError(f"{uri}: the readers disagree on {name}: {sorted(answers)}")
        report[name] = {label: min(runs_s) for label, runs_s in timings.items()}
    plans = {  # the files each read opens (rows read in the driver: Spark lists none)
        "full scan": snapshot,
        "partition": plan_snapshot(table, where_filters({"part": PARTITION})),
        "range": plan_snapshot(table, between),
        "point": plan_snapshot(table, where_filters({"id": keys[0]})),
    }
    plans["count"] = plans["full scan"]
    for name, plan in plans.items():
        report[name]["files_read"] = len(plan.files)
        report[name]["in_driver"] = read_pays_in_driver(plan)
    looked_up = plan_lookup(table, keys)
    report["keys"]["files_read"] = len(looked_up.snapshot.files)
    report["keys"]["in_driver"] = looked_up.in_driver("auto")
    return report


def _total(rows: pa.Table) -> Answer:
    return (rows.num_rows, pc.sum(rows.column("id")).as_py() if rows.num_rows else None)


def _ids(rows: pa.Table, mask: pa.ChunkedArray) -> Answer:
    return tuple(sorted(rows.column("id").filter(mask).to_pylist()))


def _spark_total(frame: DataFrame) -> Answer:
    row = frame.agg(sf.count("*"), sf.sum("id")).first()
    assert row is not None
    return (row[0], row[1])


def _hudi_rs(uri: str, partition: tuple[str, int] | None) -> pa.Table:
    options = HudiReadOptions(
        filters=[(partition[0], "=", str(partition[1]))] if partition else None,
        projection=["id", "part", "ts"],
    )
    return pa.Table.from_batches(HudiTableBuilder.from_base_uri(uri).build().read(options))


def readme_rows(result: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(benchmark, Tidemark, baseline, ratio) rows for the README's table."""
    plain, clustered = result["tables"]["table"], result["tables"]["clustered"]
    size = f"{result['rows']:,} rows in {result['files']:,} files"
    full, keys = plain["full scan"], plain["keys"]
    reader = _where_read(keys)
    return [
        (
            f"read: full scan, {size} (best s)",
            f"{full['tidemark_s']:.2f} s",
            f"{full['parquet_s']:.2f} s (spark.read.parquet)",
            f"{result['full_scan_vs_parquet']:.2f}x its time",
        ),
        (
            f"read: {result['keys']}-key query, {size}",
            f"{keys['tidemark_s']:.2f} s ({keys['files_read']} files, read {reader})",
            f"{keys['parquet_s']:.2f} s (spark.read.parquet, filtered)",
            times(keys["parquet_s"], keys["tidemark_s"]),
        ),
        (
            f"read: 1% range of ts, clustered by it ({result['clustered_files']} files)",
            f"{clustered['range']['tidemark_s']:.2f} s ({clustered['range']['files_read']} files, "
            f"read {_where_read(clustered['range'])})",
            f"{plain['range']['tidemark_s']:.2f} s (same, not clustered)",
            times(plain["range"]["tidemark_s"], clustered["range"]["tidemark_s"]),
        ),
    ]


def _where_read(query: dict[str, Any]) -> str:
    return "in the driver" if query["in_driver"] else "by Spark"


def format_report(result: dict[str, Any]) -> str:
    lines = [
        f"{result['rows']:,} rows; best of {result['runs']} rounds; load average "
        f"{result['load_average']:.1f}",
    ]
    for table, report in result["tables"].items():
        lines.append(f"{table} ({report['files']} files)")
        lines.append(
            f"  {'query':12} {'tidemark':>10} {'files':>6} {'read':>7} {'parquet':>10} "
            f"{'hudi-rs':>10} {'parquet/tidemark':>17}"
        )
        for name, row in report.items():
            if name == "files":
                continue
            lines.append(
                f"  {name:12} {row['tidemark_s']:>10.3f} {row['files_read']:>6} "
                f"{'driver' if row['in_driver'] else 'spark':>7} "
                f"{row['parquet_s']:>10.3f} {row['hudi_rs_s']:>10.3f} "
                f"{times(row['parquet_s'], row['tidemark_s']):>17}"
            )
    return "\n".join(lines)


def _handle(args: argparse.Namespace) -> int:
    if args.keys > args.rows:
        raise InvalidArgumentError(f"must be at most --rows ({args.rows})", field="keys")
    spark = build_session(args.master, app_name="tidemark-bench-read")

    def measure(options: argparse.Namespace, root: Path) -> dict[str, Any]:
        return run_benchmark(
            spark,
            root,
            options.rows,
            options.files,
            options.clustered_files,
            options.keys,
            options.runs,
        )

    run_in_temp_root(args, "tidemark-bench-read-", measure, format_report)
    return 0
