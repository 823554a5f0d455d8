"""``python -m benchmarks small-files``: many small files, direct vs service markers.

The marker issue's end-to-end case (Hudi measured 1.45x for timeline-server markers): a
direct marker is one more storage object per data file, created on the critical path of
the task writing it, so with many small files on S3 the markers cost about as much as the
data. The same rows (one partition per file, a few rows each) are bulk-inserted twice
into fresh tables on the same storage, once with direct markers and once through an
embedded marker service, after a small warm-up write so neither run pays for Spark's
start-up; ``--repeats`` rounds, the two taking turns going first, report the median and
the spread. ``--tasks`` write tasks run at once (Spark ``local[tasks]`` unless
``--master`` says otherwise): they wait on storage, not on cores, and the service can only
batch markers of concurrent tasks. S3 is
a local S3 server started here (unless ``AWS_ENDPOINT_URL`` is set) behind a latency
proxy adding ``--latency-ms`` to every request.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from benchmarks.markers import table_root
from benchmarks.write import bulk_insert_generated
from tidemark.checks import require_non_negative
from tidemark.commands.args import positive_int
from tidemark.jobs.job_options import MarkerKind
from tidemark.jobs.session import build_session
from tidemark.jobs.write import WriteResult
from tidemark.logs import configure_logging
from tidemark.services.marker.embedded import start_embedded_marker_service
from tidemark.table import HoodieTable

ROWS_PER_FILE = 4
TARGET_FILE_BYTES = 1024
"""Far below one file's size, so bulk_insert splits the input into ``--tasks`` tasks (it
rolls files at partition changes anyway: one partition per file makes the files small)."""
WARM_UP_FILES = 4
WRITES = ("put", "conditional_put")
DEFAULT_REPEATS = 3
REFERENCES = (
    {
        "what": "end-to-end speedup of timeline-server markers over direct markers",
        "figure": "31% lower write completion time (1.45x), 165k data files on S3",
        "source": "Apache Hudi blog, 'Improving Marker Mechanism in Apache Hudi' (2021)",
    },
)


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
    parser.add_argument(
        "--repeats",
        type=positive_int,
        default=DEFAULT_REPEATS,
        help="rounds of both runs, taking turns going first (median and spread reported)",
    )
    parser.add_argument("--master", help="Spark master (default: local[--tasks])")
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    parser.set_defaults(handler=run)


@dataclass(frozen=True)
class TimedWrite:
    """One measured bulk_insert and the marker writes it caused."""

    seconds: float
    result: WriteResult
    marker_writes: int
    files_on_storage: int


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
    return TimedWrite(seconds, result, result.files_written, files_on_storage(table_uri))


def write_service(spark: SparkSession, source: DataFrame, table_uri: str) -> TimedWrite:
    """Service markers: a fresh embedded service; its storage writes are the marker writes
    (MARKERS files, MARKERS.type and the lease), counted before it stops."""
    with start_embedded_marker_service(allowed_roots=[table_uri]) as service:
        seconds, result = bulk_insert(spark, source, table_uri, "service", service.address)
        requests = service.storage_requests()
    writes = sum(requests.get(kind, 0) for kind in WRITES)
    return TimedWrite(seconds, result, writes, files_on_storage(table_uri))


def files_on_storage(table_uri: str) -> int:
    """Data files the table's view lists on storage after the commit."""
    return len(HoodieTable.open(table_uri).view().latest_base_files())


def measure(spark: SparkSession, root: str, files: int, repeats: int = 1) -> dict[str, Any]:
    """Warm up, then ``repeats`` rounds of the direct and the service run into fresh
    tables under ``root``, direct first in even rounds and service first in odd ones;
    times are the rounds' medians, with every round's in ``*_runs_s``."""
    bulk_insert(spark, generate(spark, WARM_UP_FILES), f"{root}/warm-up", "direct")
    source = generate(spark, files)
    rows = files * ROWS_PER_FILE
    runs: dict[str, list[TimedWrite]] = {"direct": [], "service": []}
    writers = {"direct": write_direct, "service": write_service}
    for round_ in range(repeats):
        order = ("direct", "service") if round_ % 2 == 0 else ("service", "direct")
        for name in order:
            run = writers[name](spark, source, f"{root}/{name}-{round_}")
            if run.files_on_storage < files or run.result.files_written != run.files_on_storage:
                raise RuntimeError(
                    f"the {name} run wrote {run.result.files_written} files "
                    f"({run.files_on_storage} on storage), expected >= {files}"
                )
            if run.result.rows_written != rows:
                raise RuntimeError(
                    f"the {name} run wrote {run.result.rows_written} rows, not {rows}"
                )
            runs[name].append(run)
    direct, service = runs["direct"], runs["service"]
    direct_s, service_s = _median(direct), _median(service)
    return {
        "requested_files": files,
        "repeats": repeats,
        "files": direct[-1].files_on_storage,
        "service_files": service[-1].files_on_storage,
        "rows": rows,
        "direct_rows": direct[-1].result.rows_written,
        "service_rows": service[-1].result.rows_written,
        "direct_s": direct_s,
        "service_s": service_s,
        "direct_runs_s": [run.seconds for run in direct],
        "service_runs_s": [run.seconds for run in service],
        "speedup": direct_s / service_s,
        "speedup_runs": [d.seconds / s.seconds for d, s in zip(direct, service, strict=True)],
        "direct_write_files_s": _median(direct, "write files"),
        "service_write_files_s": _median(service, "write files"),
        "direct_commit_s": _median(direct, "commit"),
        "service_commit_s": _median(service, "commit"),
        "direct_marker_objects": direct[-1].marker_writes,
        "service_marker_writes": service[-1].marker_writes,
    }


def _median(runs: Sequence[TimedWrite], stage: str | None = None) -> float:
    """Median of the runs' wall times, or of one stage's seconds."""
    if stage is None:
        return statistics.median(run.seconds for run in runs)
    return statistics.median(run.result.stage_seconds[stage] for run in runs)


def run(args: argparse.Namespace) -> int:
    require_non_negative("latency_ms", args.latency_ms)
    configure_logging(json=False, level="warning")
    with table_root(args.storage, args.latency_ms) as root:
        spark = build_session(
            args.master or f"local[{args.tasks}]",
            app_name="tidemark-bench-small-files",
            shuffle_partitions=args.tasks,
        )
        report = {
            **measure(spark, root, args.files, args.repeats),
            "storage": args.storage,
            "tasks": args.tasks,
            "master": spark.sparkContext.master,
            "references": list(REFERENCES),
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
        f"{report['storage']} storage{latency}, {report['tasks']} concurrent tasks; "
        f"times: median of {report['repeats']} rounds",
        f"{'':32} {'direct':>12} {'service':>12} {'direct/service':>15}",
    ]
    for label, direct, service in rows:
        ratio = f"{direct / service:,.2f}x" if service else "-"
        lines.append(f"{label:32} {_cell(direct):>12} {_cell(service):>12} {ratio:>15}")
    lines.append(
        f"end-to-end speedup of service markers: {report['speedup']:.2f}x "
        f"(rounds: {_spread(report['speedup_runs'], 'x')}; "
        f"direct {_spread(report['direct_runs_s'], ' s')}, "
        f"service {_spread(report['service_runs_s'], ' s')})"
    )
    return "\n".join(lines)


def _spread(values: Sequence[float], unit: str) -> str:
    return f"{min(values):,.2f}-{max(values):,.2f}{unit}"


def readme_rows(report: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """The README's row (benchmark, Tidemark, baseline, ratio) from one ``--json``
    result; both sides measured in that run, the blog's figure kept in references."""
    latency = f" --latency-ms {report['latency_ms']:g}" if report["latency_ms"] else ""
    return [
        (
            f"`bench small-files --files {report['requested_files']} --storage "
            f"{report['storage']}{latency} --tasks {report['tasks']} --repeats "
            f"{report['repeats']}`: end to end, median of the rounds (direct and service "
            "taking turns first)",
            f"{report['service_s']:.1f} s ({_spread(report['service_runs_s'], ' s')}; "
            f"{report['service_marker_writes']:,} marker writes)",
            f"direct markers {report['direct_s']:.1f} s "
            f"({_spread(report['direct_runs_s'], ' s')}; "
            f"{report['direct_marker_objects']:,} marker objects)",
            f"{report['speedup']:.2f}x (rounds {_spread(report['speedup_runs'], 'x')}); "
            f"commit {report['direct_commit_s'] / report['service_commit_s']:.2f}x, "
            f"write-files stage "
            f"{report['direct_write_files_s'] / report['service_write_files_s']:.2f}x",
        )
    ]


def _cell(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,.3f}"
