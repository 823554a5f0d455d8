"""``python -m benchmarks write``: bulk_insert and a 1% upsert vs Spark writing plain Parquet.

Both writers get the same cached input in the same Spark session and write the same ten
partitions (the plain baseline with ``partitionBy``), so the ratio shows the cost of
Hudi's layout (keys, meta columns, markers, commit) over a bare partitioned write. The
writers take turns going first, round by round; ``--cold-first`` picks who opens the
session (the cold round pays for Spark's start-up code paths).
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

from tidemark.commands.args import positive_int
from tidemark.jobs.job_options import MarkerKind
from tidemark.jobs.session import DEFAULT_MASTER, build_session
from tidemark.jobs.sizing import DEFAULT_TARGET_FILE_BYTES
from tidemark.jobs.write import WriteResult, write
from tidemark.jobs.write_options import WriteOptions
from tidemark.logs import configure_logging

PARTITIONS = 10
UPSERT_EVERY = 100
DEFAULT_REPEATS = 3
WRITERS = ("bulk_insert", "plain")


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
    parser.add_argument(
        "--cold-first",
        choices=WRITERS,
        default="bulk_insert",
        help="the writer that goes first in the cold round (then they alternate)",
    )
    parser.add_argument(
        "--table-version",
        type=int,
        choices=(6, 8, 9),
        default=6,
        help="also bulk_insert and upsert tables at this Hudi table version beside version "
        "6, taking turns, and compare (8 and 9 write timeline layout 2)",
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
    spark: SparkSession,
    rows: int,
    workdir: Path,
    repeats: int = DEFAULT_REPEATS,
    cold_first: str = "bulk_insert",
) -> dict[str, Any]:
    """The first run of each writer is cold (JVM code paths, Python workers); the ratio is
    taken on the medians of the ``repeats`` warm runs that follow. Each round runs both
    writers, ``cold_first`` first in round 0 and the other first in the next, so
    neither always runs on a machine the other just warmed or loaded."""
    source = generate(spark, rows).cache()
    source.count()
    runs: dict[str, list[float]] = {"plain": [], "bulk_insert": []}
    stages: list[dict[str, float]] = []
    first = WRITERS.index(cold_first)
    for run in range(repeats + 1):
        for writer in (WRITERS[(first + run) % 2], WRITERS[(first + run + 1) % 2]):
            if writer == "plain":
                target = str(workdir / f"plain-{run}")
                runs[writer].append(_timed(source.write.partitionBy("part").parquet, target))
            else:
                started = time.perf_counter()
                result = bulk_insert_generated(spark, source, _table(workdir, run))
                runs[writer].append(time.perf_counter() - started)
                stages.append(result.stage_seconds)
    updates = generate(spark, rows, step=UPSERT_EVERY, version=1).cache()
    upsert_rows = updates.count()
    upsert_s = _timed(write, spark, updates, _table(workdir, repeats), "upsert")
    source.unpersist()
    updates.unpersist()
    plain_runs, bulk_runs = runs["plain"], runs["bulk_insert"]
    plain_s, bulk_s = statistics.median(plain_runs[1:]), statistics.median(bulk_runs[1:])
    return {
        "rows": rows,
        "repeats": repeats,
        "partitions": PARTITIONS,
        "cold_first": cold_first,
        "master": spark.sparkContext.master,
        "plain_parquet_s": round(plain_s, 3),
        "bulk_insert_s": round(bulk_s, 3),
        "plain_parquet_runs_s": [round(s, 3) for s in plain_runs],
        "bulk_insert_runs_s": [round(s, 3) for s in bulk_runs],
        "plain_rows_per_s": round(rows / plain_s),
        "bulk_insert_rows_per_s": round(rows / bulk_s),
        "bulk_vs_plain_ratio": round(plain_s / bulk_s, 3),
        "plain_parquet_cold_s": round(plain_runs[0], 3),
        "bulk_insert_cold_s": round(bulk_runs[0], 3),
        "cold_bulk_vs_plain_ratio": round(plain_runs[0] / bulk_runs[0], 3),
        "bulk_insert_stage_s": {
            stage: round(statistics.median(run[stage] for run in stages[1:]), 3)
            for stage in stages[-1]
        },
        "upsert_rows": upsert_rows,
        "upsert_s": round(upsert_s, 3),
        "references": [],
    }


def compare_versions(
    spark: SparkSession, rows: int, workdir: Path, version: int, repeats: int = DEFAULT_REPEATS
) -> dict[str, Any]:
    """bulk_insert then a 1% upsert into a new table at version 6 and at ``version``, the
    two taking turns round by round (a cold round first); warm medians compared."""
    source = generate(spark, rows).cache()
    updates = generate(spark, rows, step=UPSERT_EVERY, version=1).cache()
    source.count()
    updates.count()
    versions = (6, version)
    bulk: dict[int, list[float]] = {v: [] for v in versions}
    upsert: dict[int, list[float]] = {v: [] for v in versions}
    for run in range(repeats + 1):
        for v in versions if run % 2 == 0 else versions[::-1]:
            table = str(workdir / f"v{v}-{run}")
            bulk[v].append(_timed(bulk_insert_generated, spark, source, table, table_version=v))
            upsert[v].append(_timed(write, spark, updates, table, "upsert"))
    source.unpersist()
    updates.unpersist()
    medians = {
        (kind, v): statistics.median(runs[v][1:])
        for kind, runs in (("bulk_insert", bulk), ("upsert", upsert))
        for v in versions
    }
    return {
        "table_version": version,
        "versions_bulk_insert_runs_s": {str(v): [round(s, 3) for s in bulk[v]] for v in versions},
        "versions_upsert_runs_s": {str(v): [round(s, 3) for s in upsert[v]] for v in versions},
        "versions_bulk_insert_s": {str(v): round(medians["bulk_insert", v], 3) for v in versions},
        "versions_upsert_s": {str(v): round(medians["upsert", v], 3) for v in versions},
        "version_vs_6_bulk_insert_ratio": round(
            medians["bulk_insert", version] / medians["bulk_insert", 6], 3
        ),
        "version_vs_6_upsert_ratio": round(medians["upsert", version] / medians["upsert", 6], 3),
    }


def readme_rows(result: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """The README's rows (benchmark, Tidemark, baseline, ratio) from one ``--json``
    result; both sides measured in that run."""
    setting = (
        f"`bench write --rows {result['rows']} --repeats {result['repeats']}` "
        f"({result['partitions']} partitions both sides)"
    )
    rows = [
        (
            f"{setting}: bulk_insert, warm median of {result['repeats']}",
            f"{result['bulk_insert_s']:.2f} s ({_spread(result['bulk_insert_runs_s'][1:])})",
            f"Spark plain Parquet, `partitionBy`: {result['plain_parquet_s']:.2f} s "
            f"({_spread(result['plain_parquet_runs_s'][1:])})",
            f"{result['bulk_vs_plain_ratio']:.2f}x",
        ),
        (
            f"same, cold round ({result['cold_first']} first)",
            f"{result['bulk_insert_cold_s']:.2f} s",
            f"{result['plain_parquet_cold_s']:.2f} s",
            f"{result['cold_bulk_vs_plain_ratio']:.2f}x",
        ),
        (
            "same: bulk_insert's stages (warm medians)",
            ", ".join(f"{k} {v:.2f} s" for k, v in result["bulk_insert_stage_s"].items()),
            "-",
            "-",
        ),
        (
            "same: upsert of 1% (global simple index join)",
            f"{result['upsert_s']:.2f} s ({result['upsert_rows']:,} rows)",
            "-",
            "-",
        ),
    ]
    if "table_version" in result:
        version = str(result["table_version"])
        for kind in ("bulk_insert", "upsert"):
            seconds = result[f"versions_{kind}_s"]
            rows.append(
                (
                    f"same, `--table-version {version}`: {kind} at version {version}",
                    f"{seconds[version]:.2f} s",
                    f"version 6: {seconds['6']:.2f} s",
                    f"{result[f'version_vs_6_{kind}_ratio']:.2f}x",
                )
            )
    return rows


def _spread(runs: list[float]) -> str:
    return f"runs {min(runs):.2f}-{max(runs):.2f} s"


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
    table_version: int = 6,
    table_type: str | None = None,
) -> WriteResult:
    """bulk_insert of benchmark rows (key ``id``, partition ``part``, precombine
    ``version``) into a new table (``table_type``: copy-on-write when None); service
    markers need ``marker_service_address``."""
    return write(
        spark,
        source,
        table_uri,
        "bulk_insert",
        WriteOptions(
            record_key_fields=["id"],
            partition_fields=["part"],
            precombine_field="version",
            markers=markers,
            marker_service_address=marker_service_address,
            target_file_bytes=target_file_bytes,
            table_version=table_version,
            table_type=table_type,
        ),
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
        result = run_benchmark(spark, args.rows, workdir, args.repeats, args.cold_first)
        if args.table_version != 6:
            result |= compare_versions(spark, args.rows, workdir, args.table_version, args.repeats)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    _print_table(result)
    if args.json:
        print(json.dumps(result))
    return 0


def _print_table(result: dict[str, Any]) -> None:
    rows = int(result["rows"])
    table = Table(
        title=f"write benchmark, {rows:,} rows in {result['partitions']} partitions "
        f"(warm: median of {result['repeats']} runs; cold round: {result['cold_first']} first)"
    )
    for column in ("writer", "rows", "warm s", "rows/s", "vs plain", "cold s", "cold vs plain"):
        table.add_column(column, justify="right")
    table.add_row(
        "Spark plain Parquet (partitionBy)",
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
    stages = ", ".join(
        f"{name} {seconds:.2f} s" for name, seconds in result["bulk_insert_stage_s"].items()
    )
    Console().print(f"bulk_insert stages (warm medians): {stages}")
    if "table_version" in result:
        _print_versions(result)


def _print_versions(result: dict[str, Any]) -> None:
    version = str(result["table_version"])
    table = Table(
        title=f"table version {version} beside 6 (warm medians of {result['repeats']} runs, "
        "the versions taking turns)"
    )
    for column in ("write", "version 6 s", f"version {version} s", f"{version} / 6"):
        table.add_column(column, justify="right")
    for kind in ("bulk_insert", "upsert"):
        seconds = result[f"versions_{kind}_s"]
        table.add_row(
            kind,
            f"{seconds['6']:.2f}",
            f"{seconds[version]:.2f}",
            f"{result[f'version_vs_6_{kind}_ratio']:.2f}",
        )
    Console().print(table)
