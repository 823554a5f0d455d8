"""``tidemark bench write``: bulk_insert and a 1% upsert vs Spark writing plain Parquet.

Both writers get the same cached input in the same Spark session, so the ratio shows the
cost of Hudi's layout (keys, meta columns, sorting, markers, commit) over a bare write.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from rich.console import Console
from rich.table import Table

from spark_jobs.job_options import MarkerKind
from spark_jobs.session import DEFAULT_MASTER, build_session
from spark_jobs.sizing import DEFAULT_TARGET_FILE_BYTES
from spark_jobs.write import WriteResult, write
from tidemark.commands.args import positive_int
from tidemark.commands.bench import ReadmeRow
from tidemark.logs import configure_logging

PARTITIONS = 10
UPSERT_EVERY = 100
DEFAULT_REPEATS = 3


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "write", help="bulk_insert/upsert throughput vs plain Spark Parquet", description=__doc__
    )
    parser.add_argument("--rows", type=positive_int, default=1_000_000, help="rows to bulk insert")
    parser.add_argument(
        "--repeats",
        type=positive_int,
        default=DEFAULT_REPEATS,
        help="warm runs of each writer after the cold one (the median is compared)",
    )
    parser.add_argument("--master", default=DEFAULT_MASTER, help="Spark master")
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    parser.set_defaults(handler=_handle)


def generate(spark: SparkSession, rows: int, *, step: int = 1, version: int = 0) -> DataFrame:
    """Synthetic rows: a long key, a partition of ten, a string, a double and a version."""
    return spark.range(0, rows, step).select(
        sf.col("id"),
        (sf.col("id") % PARTITIONS).cast("int").alias("part"),
        sf.concat(sf.lit("name-"), sf.col("id").cast("string")).alias("name"),
        (sf.col("id") * 1.5 + version).alias("amount"),
        sf.lit(version).cast("long").alias("version"),
    )


def run_benchmark(
    spark: SparkSession, rows: int, workdir: Path, repeats: int = DEFAULT_REPEATS
) -> dict[str, float | int]:
    """The first run of each writer is cold (JVM code paths, Python workers); the ratio is
    taken on the medians of the ``repeats`` warm runs that follow, plain and bulk_insert
    alternating so both see the same machine."""
    source = generate(spark, rows).cache()
    source.count()
    plain_runs: list[float] = []
    bulk_runs: list[float] = []
    for run in range(repeats + 1):
        plain_runs.append(_timed(source.write.parquet, str(workdir / f"plain-{run}")))
        bulk_runs.append(_timed(bulk_insert_generated, spark, source, _table(workdir, run)))
    updates = generate(spark, rows, step=UPSERT_EVERY, version=1).cache()
    upsert_rows = updates.count()
    upsert_s = _timed(write, spark, updates, _table(workdir, repeats), "upsert")
    source.unpersist()
    updates.unpersist()
    plain_s, bulk_s = statistics.median(plain_runs[1:]), statistics.median(bulk_runs[1:])
    return {
        "rows": rows,
        "repeats": repeats,
        "plain_parquet_s": round(plain_s, 3),
        "bulk_insert_s": round(bulk_s, 3),
        "plain_rows_per_s": round(rows / plain_s),
        "bulk_insert_rows_per_s": round(rows / bulk_s),
        "bulk_vs_plain_ratio": round(plain_s / bulk_s, 3),
        "plain_parquet_cold_s": round(plain_runs[0], 3),
        "bulk_insert_cold_s": round(bulk_runs[0], 3),
        "cold_bulk_vs_plain_ratio": round(plain_runs[0] / bulk_runs[0], 3),
        "upsert_rows": upsert_rows,
        "upsert_s": round(upsert_s, 3),
    }


def _table(workdir: Path, run: int) -> str:
    return str(workdir / f"table-{run}")


def bulk_insert_generated(
    spark: SparkSession,
    source: DataFrame,
    table_uri: str,
    *,
    markers: MarkerKind = "direct",
    marker_service_address: str | None = None,
    target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES,
) -> WriteResult:
    """bulk_insert of benchmark rows (key ``id``, partition ``part``, precombine
    ``version``) into a new table; service markers need ``marker_service_address``."""
    return write(
        spark,
        source,
        table_uri,
        "bulk_insert",
        record_key_fields=["id"],
        partition_fields=["part"],
        precombine_field="version",
        markers=markers,
        marker_service_address=marker_service_address,
        target_file_bytes=target_file_bytes,
    )


def _timed(action: Callable[..., object], *args: object, **options: object) -> float:
    started = time.perf_counter()
    action(*args, **options)
    return time.perf_counter() - started


def _handle(args: argparse.Namespace) -> int:
    configure_logging(json=False, level="warning")
    spark = build_session(args.master, app_name="tidemark-bench-write")
    workdir = Path(tempfile.mkdtemp(prefix="tidemark-bench-write-"))
    try:
        result = run_benchmark(spark, args.rows, workdir, args.repeats)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    _print_table(result)
    if args.json:
        print(json.dumps(result))
    return 0


def _print_table(result: dict[str, float | int]) -> None:
    rows = int(result["rows"])
    table = Table(
        title=f"write benchmark, {rows:,} rows (warm: median of {result['repeats']} runs)"
    )
    for column in ("writer", "rows", "warm s", "rows/s", "vs plain", "cold s", "cold vs plain"):
        table.add_column(column, justify="right")
    table.add_row(
        "Spark plain Parquet",
        f"{rows:,}",
        f"{result['plain_parquet_s']:.2f}",
        f"{result['plain_rows_per_s']:,}",
        "1.00",
        f"{result['plain_parquet_cold_s']:.2f}",
        "1.00",
    )
    table.add_row(
        "Tidemark bulk_insert",
        f"{rows:,}",
        f"{result['bulk_insert_s']:.2f}",
        f"{result['bulk_insert_rows_per_s']:,}",
        f"{result['bulk_vs_plain_ratio']:.2f}",
        f"{result['bulk_insert_cold_s']:.2f}",
        f"{result['cold_bulk_vs_plain_ratio']:.2f}",
    )
    upsert_rate = result["upsert_rows"] / result["upsert_s"]
    table.add_row(
        "Tidemark upsert (1%)",
        f"{result['upsert_rows']:,}",
        f"{result['upsert_s']:.2f}",
        f"{upsert_rate:,.0f}",
        "",
        "",
        "",
    )
    Console().print(table)


def readme_rows(result: dict[str, Any]) -> list[ReadmeRow]:
    """The README's rows for one ``bench write --json`` result."""
    return [
        (
            f"`bench write --rows {result['rows']}`: bulk_insert (sort mode none, warm median "
            f"of {result['repeats']})",
            f"{result['bulk_insert_s']:.2f} s",
            f"Spark plain Parquet {result['plain_parquet_s']:.2f} s",
            f"{result['bulk_vs_plain_ratio']:.2f}x",
        ),
        (
            "same, first (cold) run of each writer",
            f"{result['bulk_insert_cold_s']:.2f} s",
            f"{result['plain_parquet_cold_s']:.2f} s",
            f"{result['cold_bulk_vs_plain_ratio']:.2f}x",
        ),
        (
            f"same: upsert of 1% ({result['upsert_rows']:,} rows, global simple index join)",
            f"{result['upsert_s']:.2f} s",
            "—",
            "—",
        ),
    ]
