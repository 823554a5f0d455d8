"""``tidemark demo``: the README's main job on embedded defaults.

Generates session events, bulk-inserts them into a local table with service markers
(an embedded marker service, like Hudi's embedded timeline server), upserts a slice,
reads the table back and reports what each stage cost.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from rich.console import Console

from services.marker.embedded import EmbeddedMarkerService, start_embedded_marker_service
from spark_jobs.session import DEFAULT_MASTER, build_session
from spark_jobs.stages import StageListener
from spark_jobs.write import WriteResult, write
from tidemark.commands.args import positive_int
from tidemark.commands.write import StageProgress
from tidemark.errors import FailedPreconditionError, InvalidArgumentError
from tidemark.logs import configure_logging
from tidemark.table.reader import read_snapshot
from tidemark.table.table import HoodieTable

DEFAULT_TABLE = "tidemark-demo/sessions"
DEFAULT_ROWS = 1_000_000
EVENT_DAYS = 7
EVENT_TYPES = ("view", "click", "search", "add_to_cart", "purchase")
DEMO_MARKER = ".tidemark-demo"
"""Written next to the demo table so a rerun only ever wipes a table the demo created."""


@dataclass
class DemoReport:
    """What the demo did; printed as text, or as one JSON line with ``--json``."""

    table: str
    rows: int
    upserted_rows: int
    rows_read: int
    data_files: int
    marker_objects_written: int
    marker_storage_requests: int
    direct_marker_objects: int
    stage_seconds: dict[str, float] = field(default_factory=dict)


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        help="generate events, bulk insert, upsert 1%% and read back a local table",
        description=__doc__,
    )
    parser.add_argument(
        "--rows", type=positive_int, default=DEFAULT_ROWS, help="events to generate"
    )
    parser.add_argument("--upsert-fraction", type=float, default=0.01)
    parser.add_argument("--table", default=DEFAULT_TABLE, help="where to write the table")
    parser.add_argument("--master", default=DEFAULT_MASTER, help="Spark master")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON line")
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    if not 0 < args.upsert_fraction <= 1:
        raise InvalidArgumentError(
            f"must be in (0, 1], got {args.upsert_fraction}", field="upsert_fraction"
        )
    configure_logging(json=False, level="warning")
    table_dir = _fresh_table_dir(Path(args.table))
    console = Console(stderr=True)
    with StageProgress(console) as progress:
        report = run_demo(args.rows, args.upsert_fraction, table_dir, args.master, progress)
    if args.json:
        print(json.dumps(asdict(report)))
    else:
        _print_report(report)
    return 0


def run_demo(
    rows: int, upsert_fraction: float, table_dir: Path, master: str, progress: StageProgress
) -> DemoReport:
    """Bulk insert, upsert and read back through one embedded marker service."""
    stages: dict[str, float] = {}
    with _stage(stages, "start spark", progress):
        spark = build_session(master, app_name="tidemark-demo")
    table_uri = str(table_dir.resolve())
    with start_embedded_marker_service(allowed_roots=[table_uri]) as markers:
        events = session_events(spark, rows)
        bulk = _write(spark, events, table_uri, "bulk_insert", markers, progress)
        changed = _changed_events(events, upsert_fraction)
        upsert = _write(spark, changed, table_uri, "upsert", markers, progress)
        marker_requests = markers.storage_requests()
    for result in (bulk, upsert):
        for name, seconds in result.stage_seconds.items():
            stages[f"{result.operation}: {name}"] = seconds
    with _stage(stages, "read back", progress):
        table = HoodieTable.open(table_uri)
        rows_read = read_snapshot(table.storage, columns=["session_id"]).num_rows
        data_files = len(table.view().latest_base_files())
    return DemoReport(
        table=table_uri,
        rows=rows,
        upserted_rows=upsert.rows_updated + upsert.rows_inserted,
        rows_read=rows_read,
        data_files=data_files,
        marker_objects_written=marker_requests.get("put", 0),
        marker_storage_requests=sum(marker_requests.values()),
        direct_marker_objects=bulk.files_written + upsert.files_written,
        stage_seconds=stages,
    )


def session_events(spark: SparkSession, rows: int) -> DataFrame:
    """Deterministic web-session events spread over a week of ``event_date`` partitions."""
    event_types = sf.array(*(sf.lit(kind) for kind in EVENT_TYPES))
    return spark.range(rows).select(
        sf.format_string("s-%012d", sf.col("id")).alias("session_id"),
        (sf.col("id") * 7919 % 250_000).alias("user_id"),
        sf.date_format(
            sf.date_add(sf.lit("2026-11-01").cast("date"), (sf.col("id") % EVENT_DAYS).cast("int")),
            "yyyy-MM-dd",
        ).alias("event_date"),
        sf.element_at(event_types, (sf.col("id") % len(EVENT_TYPES) + 1).cast("int")).alias(
            "event_type"
        ),
        (sf.col("id") * 104_729 % 600_000).alias("duration_ms"),
        (sf.lit(1_793_000_000_000) + sf.col("id")).alias("ts"),
    )


def _changed_events(events: DataFrame, fraction: float) -> DataFrame:
    """Every 1/fraction-th session gets a longer duration and a newer ``ts``."""
    step = max(1, round(1 / fraction))
    return events.where(sf.col("ts") % step == 0).select(
        "session_id",
        "user_id",
        "event_date",
        "event_type",
        (sf.col("duration_ms") + 1000).alias("duration_ms"),
        (sf.col("ts") + 1).alias("ts"),
    )


def _write(
    spark: SparkSession,
    df: DataFrame,
    table_uri: str,
    operation: str,
    markers: EmbeddedMarkerService,
    progress: StageProgress,
) -> WriteResult:
    return write(
        spark,
        df,
        table_uri,
        operation,
        record_key_fields=["session_id"],
        partition_fields=["event_date"],
        precombine_field="ts",
        markers="service",
        marker_service_address=markers.address,
        listener=_Prefixed(operation, progress),
    )


class _Prefixed:
    """Shows the write job's stages as '<operation>: <stage>' in the demo's progress."""

    def __init__(self, prefix: str, listener: StageListener) -> None:
        self._prefix = prefix
        self._listener = listener

    def stage_started(self, name: str) -> None:
        self._listener.stage_started(f"{self._prefix}: {name}")

    def stage_finished(self, name: str, seconds: float) -> None:
        self._listener.stage_finished(f"{self._prefix}: {name}", seconds)


@contextmanager
def _stage(stages: dict[str, float], name: str, progress: StageProgress) -> Iterator[None]:
    """Time a demo stage of its own and show it in the progress display."""
    progress.stage_started(name)
    start = time.perf_counter()
    yield
    stages[name] = time.perf_counter() - start
    progress.stage_finished(name, stages[name])


def _fresh_table_dir(table_dir: Path) -> Path:
    """Reuse the demo's own folder; refuse to wipe anything the demo did not create."""
    if table_dir.exists():
        if not (table_dir / DEMO_MARKER).exists():
            raise FailedPreconditionError(
                f"{table_dir} exists and was not created by `tidemark demo`; "
                "choose another --table",
                field="table",
            )
        shutil.rmtree(table_dir)
    table_dir.mkdir(parents=True)
    (table_dir / DEMO_MARKER).write_text("created by tidemark demo; rerunning the demo wipes it\n")
    return table_dir


def _print_report(report: DemoReport) -> None:
    width = max(len(name) for name in report.stage_seconds)
    print(f"table            {report.table}")
    print(f"rows             {report.rows:,} bulk-inserted, {report.upserted_rows:,} upserted")
    print(f"rows read back   {report.rows_read:,}")
    print(f"data files       {report.data_files:,} live")
    print(
        f"marker writes    {report.marker_objects_written:,} MARKERS-file writes by the marker "
        f"service ({report.marker_storage_requests:,} storage requests in all); direct markers "
        f"would have created {report.direct_marker_objects:,} objects"
    )
    print("stage times")
    for name, seconds in report.stage_seconds.items():
        print(f"  {name:<{width}}  {seconds:8.2f} s")
