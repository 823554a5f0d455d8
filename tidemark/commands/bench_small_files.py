"""``tidemark bench small-files``: a bulk_insert of many small files, direct vs service markers.

The marker issue's end-to-end case (Hudi measured 1.45x for timeline-server markers): a
direct marker is one more storage object per data file, created on the critical path of
the task writing it, so with many small files on S3 the markers cost about as much as the
data. The same rows (one partition per file, a few rows each) are bulk-inserted twice
into fresh tables on the same storage, once with direct markers and once through an
embedded marker service, after a small warm-up write so neither run pays for Spark's
start-up. ``--tasks`` write tasks run at once (Spark ``local[tasks]``): they wait on
storage, not on cores, and the service can only batch markers of concurrent tasks. S3 is
a local S3 server started here (unless ``AWS_ENDPOINT_URL`` is set) behind a latency
proxy adding ``--latency-ms`` to every request.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from services.marker.embedded import start_embedded_marker_service
from spark_jobs.job_options import MarkerKind
from spark_jobs.session import build_session
from spark_jobs.write import WriteResult
from tidemark.commands.args import positive_int
from tidemark.commands.bench import ReadmeRow, times
from tidemark.commands.bench_markers import table_root
from tidemark.commands.bench_write import bulk_insert_generated
from tidemark.errors import InvalidArgumentError
from tidemark.logs import configure_logging

ROWS_PER_FILE = 4
TARGET_FILE_BYTES = 1024
"""Far below one file's size, so bulk_insert splits the input into ``--tasks`` tasks (it
rolls files at partition changes anyway: one partition per file makes the files small)."""
WARM_UP_FILES = 4
WRITES = ("put", "conditional_put")


def register(bench_subparsers: Any) -> None:
    parser: argparse.ArgumentParser = bench_subparsers.add_parser(
        "small-files",
        help="bulk_insert of many small files: direct vs service markers",
        description=__doc__,
    )
    parser.add_argument("--files", type=positive_int, default=10_000, help="data files to write")
    parser.add_argument("--storage", choices=("s3", "local"), default="s3")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="added per S3 request")
    parser.add_argument("--tasks", type=positive_int, default=16, help="concurrent write tasks")
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    parser.set_defaults(handler=run)


@dataclass(frozen=True)
class TimedWrite:
    """One measured bulk_insert and the marker writes it caused."""

    seconds: float
    result: WriteResult
    marker_writes: int


def generate(spark: SparkSession, files: int) -> DataFrame:
    """``ROWS_PER_FILE`` consecutive ids in each of ``files`` partitions, so a partition's
    rows stay in one task however the input is split: one small file per partition."""
    return spark.range(files * ROWS_PER_FILE).select(
        sf.col("id"),
        sf.floor(sf.col("id") / ROWS_PER_FILE).cast("int").alias("part"),
        sf.concat(sf.lit("name-"), sf.col("id").cast("string")).alias("name"),
        sf.lit(0).cast("long").alias("version"),
    )


def bulk_insert(
    spark: SparkSession,
    source: DataFrame,
    table_uri: str,
    markers: MarkerKind,
    marker_service_address: str | None = None,
) -> tuple[float, WriteResult]:
    """Wall time of the whole write (prepare to commit) and its result."""
    started = time.perf_counter()
    result = bulk_insert_generated(
        spark,
        source,
        table_uri,
        markers=markers,
        marker_service_address=marker_service_address,
        target_file_bytes=TARGET_FILE_BYTES,
    )
    return time.perf_counter() - started, result


def write_direct(spark: SparkSession, source: DataFrame, table_uri: str) -> TimedWrite:
    """Direct markers: one marker object per data file, written by the executors."""
    seconds, result = bulk_insert(spark, source, table_uri, "direct")
    return TimedWrite(seconds, result, result.files_written)


def write_service(spark: SparkSession, source: DataFrame, table_uri: str) -> TimedWrite:
    """Service markers: a fresh embedded service; its storage writes are the marker writes
    (MARKERS files, MARKERS.type and the lease), counted before it stops."""
    with start_embedded_marker_service(allowed_roots=[table_uri]) as service:
        seconds, result = bulk_insert(spark, source, table_uri, "service", service.address)
        requests = service.storage_requests()
    return TimedWrite(seconds, result, sum(requests.get(kind, 0) for kind in WRITES))


def measure(spark: SparkSession, root: str, files: int) -> dict[str, Any]:
    """Warm up, then the direct and the service run into fresh tables under ``root``."""
    bulk_insert(spark, generate(spark, WARM_UP_FILES), f"{root}/warm-up", "direct")
    source = generate(spark, files)
    direct = write_direct(spark, source, f"{root}/direct")
    service = write_service(spark, source, f"{root}/service")
    rows = files * ROWS_PER_FILE
    for name, run in (("direct", direct), ("service", service)):
        if run.result.files_written < files:
            raise RuntimeError(
                f"the {name} run wrote {run.result.files_written} files, expected >= {files}"
            )
        if run.result.rows_written != rows:
            raise RuntimeError(f"the {name} run wrote {run.result.rows_written} rows, not {rows}")
    return {
        "requested_files": files,
        "files": direct.result.files_written,
        "service_files": service.result.files_written,
        "rows": rows,
        "direct_rows": direct.result.rows_written,
        "service_rows": service.result.rows_written,
        "direct_s": direct.seconds,
        "service_s": service.seconds,
        "speedup": direct.seconds / service.seconds,
        "direct_write_files_s": direct.result.stage_seconds["write files"],
        "service_write_files_s": service.result.stage_seconds["write files"],
        "direct_commit_s": direct.result.stage_seconds["commit"],
        "service_commit_s": service.result.stage_seconds["commit"],
        "direct_marker_objects": direct.marker_writes,
        "service_marker_writes": service.marker_writes,
    }


def run(args: argparse.Namespace) -> int:
    if args.latency_ms < 0:
        raise InvalidArgumentError("must be >= 0", field="latency_ms")
    configure_logging(json=False, level="warning")
    with table_root(args.storage, args.latency_ms) as root:
        spark = build_session(
            f"local[{args.tasks}]",
            app_name="tidemark-bench-small-files",
            shuffle_partitions=args.tasks,
        )
        report = {
            **measure(spark, root, args.files),
            "storage": args.storage,
            "tasks": args.tasks,
            "latency_ms": args.latency_ms if args.storage == "s3" else 0.0,
        }
    print(format_report(report))
    if args.json:
        print(json.dumps(report))
    return 0


def format_report(report: dict[str, Any]) -> str:
    rows = [
        ("files written", report["files"], report["service_files"]),
        ("rows written", report["direct_rows"], report["service_rows"]),
        (
            "marker objects / marker writes",
            report["direct_marker_objects"],
            report["service_marker_writes"],
        ),
        ("total write time (s)", report["direct_s"], report["service_s"]),
        ("write files stage (s)", report["direct_write_files_s"], report["service_write_files_s"]),
        ("commit stage (s)", report["direct_commit_s"], report["service_commit_s"]),
    ]
    latency = f", +{report['latency_ms']:g} ms per request" if report["latency_ms"] else ""
    lines = [
        f"bulk_insert of {report['requested_files']:,} small files, "
        f"{report['storage']} storage{latency}, {report['tasks']} concurrent tasks",
        f"{'':32} {'direct':>12} {'service':>12} {'direct/service':>15}",
    ]
    for label, direct, service in rows:
        ratio = f"{direct / service:,.2f}x" if service else "-"
        lines.append(f"{label:32} {_cell(direct):>12} {_cell(service):>12} {ratio:>15}")
    lines.append(f"end-to-end speedup of service markers: {report['speedup']:.2f}x")
    return "\n".join(lines)


def _cell(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,.3f}"


def readme_rows(result: dict[str, Any]) -> list[ReadmeRow]:
    """The README's rows for one ``bench small-files --json`` result."""
    return [
        (
            f"`bench small-files --files {result['requested_files']} --storage "
            f"{result['storage']} --latency-ms {result['latency_ms']:g} --tasks "
            f"{result['tasks']}`: bulk_insert of small files, end to end",
            f"{result['service_s']:.1f} s ({result['service_marker_writes']:,} marker writes)",
            f"{result['direct_s']:.1f} s direct ({result['direct_marker_objects']:,} marker "
            "objects)",
            f"{result['speedup']:.2f}x",
        ),
        (
            "same: write-files stage / commit stage",
            f"{result['service_write_files_s']:.1f} s / {result['service_commit_s']:.1f} s",
            f"{result['direct_write_files_s']:.1f} s / {result['direct_commit_s']:.1f} s",
            f"{times(result['direct_write_files_s'], result['service_write_files_s'])} / "
            f"{times(result['direct_commit_s'], result['service_commit_s'])}",
        ),
    ]
