"""``tidemark demo``: the README's main job, showing all three services at work.

It starts the marker, index and planner services as their own ``tidemark serve``
processes on loopback (the architecture a deployment runs), generates web-session events,
then: bulk-inserts them with service markers, builds the record index, upserts a batch
and deletes every event of a few users (both tagged through the index service), schedules
clustering by session through the planner service and runs it, and answers a point query
by key and a session query. The report shows each service's effect measured in this run
against what the table would have cost without it.
"""

from __future__ import annotations

import argparse
import json
import math
import socket
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from rich.console import Console

from tidemark.clients.index import IndexClient
from tidemark.clients.planner import PlannerClient, plan_options
from tidemark.commands.args import positive_int
from tidemark.commands.write import StageProgress
from tidemark.errors import FailedPreconditionError, InvalidArgumentError
from tidemark.jobs.cluster import run_clustering
from tidemark.jobs.index_build import build_index
from tidemark.jobs.index_writes import tag_with_index
from tidemark.jobs.session import DEFAULT_MASTER, build_session
from tidemark.jobs.stages import StageListener
from tidemark.jobs.tagging import OLD_FILE_ID, existing_keys, tag
from tidemark.jobs.write import WriteResult, write
from tidemark.jobs.write_options import WriteOptions
from tidemark.logs import configure_logging
from tidemark.rpc.process import ServeProcess
from tidemark.storage import open_storage
from tidemark.storage.uri import canonical_uri
from tidemark.table.keys import RECORD_KEY
from tidemark.table.reader import files_holding, read_snapshot
from tidemark.table.scan import ScanResult, scan_equal
from tidemark.table.table import HoodieTable

DEFAULT_TABLE = "tidemark-demo/sessions"
DEFAULT_ROWS = 1_000_000
EVENT_DAYS = 7
EVENTS_PER_SESSION = 20
USERS = 250_000
EVENT_TYPES = ("view", "click", "search", "add_to_cart", "purchase")
INPUT_SLICES = 8
"""Spark partitions of the generated events: each writes its own file per day, so the
bulk insert leaves the small files clustering is for."""
ERASED_USERS = 5
ROW_GROUPS_PER_DAY = 32
"""Row groups of each clustered file (one per day): a session's rows sit in one of many."""
MIN_ROW_GROUP_BYTES = 4096
DIRECT_MARKER_PAGE = 1000
"""Keys per LIST page and per DeleteObjects call when direct markers are listed and deleted."""
DEMO_MARKER = ".tidemark-demo"
"""Written next to the demo table so a rerun only ever wipes a table the demo created."""
KEY = "event_id"
SESSION = "session_id"

T = TypeVar("T")


@dataclass
class DemoReport:
    """What the demo did and measured; printed as text, or as one JSON line with ``--json``."""

    table: str
    services: dict[str, str]
    rows: int
    rows_in_table: int
    markers: dict[str, int]
    index: dict[str, Any]
    clustering: dict[str, Any]
    point_query: dict[str, Any]
    stage_seconds: dict[str, float] = field(default_factory=dict)


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        help="run the marker, index and planner services on a generated table and report",
        description=__doc__,
    )
    parser.add_argument(
        "--rows", type=positive_int, default=DEFAULT_ROWS, help="events to generate"
    )
    parser.add_argument("--upsert-fraction", type=float, default=0.01)
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--table", help=f"the demo table's path or s3:// URI (default {DEFAULT_TABLE})"
    )
    where.add_argument(
        "--storage",
        metavar="ROOT",
        help="a folder or s3://bucket/prefix to put the demo table in (ROOT/sessions); S3 "
        "through the standard AWS settings (AWS_ENDPOINT_URL for an S3-compatible endpoint)",
    )
    parser.add_argument("--master", default=DEFAULT_MASTER, help="Spark master")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON line")
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    if not 0 < args.upsert_fraction <= 1:
        raise InvalidArgumentError(
            f"must be in (0, 1], got {args.upsert_fraction}", field="upsert_fraction"
        )
    configure_logging(json=False, level="warning")
    location = args.table or (f"{args.storage.rstrip('/')}/sessions" if args.storage else None)
    table_uri = _fresh_table(location or DEFAULT_TABLE)
    console = Console(stderr=True)
    with StageProgress(console) as progress:
        report = run_demo(args.rows, args.upsert_fraction, table_uri, args.master, progress)
    if args.json:
        print(json.dumps(asdict(report)))
    else:
        _print_report(report)
    return 0


@dataclass(frozen=True)
class _Service:
    """A ``tidemark serve`` child process and the port of its Prometheus endpoint."""

    address: str
    metrics_port: int

    def metric(self, name: str, **labels: str) -> float:
        """The sum of ``name``'s samples whose labels include ``labels``."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics") as page:
            text = page.read().decode()
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name and labels.items() <= sample.labels.items()
        )


@contextmanager
def _serve(service: str, table_root: str) -> Iterator[_Service]:
    metrics_port = _free_port()
    process = ServeProcess(
        service,
        args=["--metrics-port", str(metrics_port), "--allowed-root", table_root],
    )
    try:
        yield _Service(process.address, metrics_port)
    finally:
        process.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def run_demo(
    rows: int, upsert_fraction: float, table_uri: str, master: str, progress: StageProgress
) -> DemoReport:
    """Every stage against the three services; each measurement is taken in this run."""
    stages: dict[str, float] = {}
    timed = _Stages(stages, progress)
    spark = timed("start spark", lambda: build_session(master, app_name="tidemark-demo"))
    with ExitStack() as stack:
        services = timed(
            "start services",
            lambda: {
                name: stack.enter_context(_serve(name, table_uri))
                for name in ("marker", "index", "planner")
            },
        )
        events = session_events(spark, rows)
        bulk = _write(spark, events, table_uri, "bulk_insert", services, progress)
        markers = _marker_effect(services["marker"], bulk)
        timed("build record index", lambda: build_index(spark, table_uri))
        index_service = services["index"]
        lookups_before = index_service.metric("tidemark_index_keys_total")
        changed = _changed_events(events, upsert_fraction).cache()
        tagging = timed(
            "compare tagging", lambda: _compare_tagging(spark, table_uri, changed, index_service)
        )
        upsert = _write(spark, changed, table_uri, "upsert", services, progress)
        changed.unpersist()
        erased = _erased_keys(events)
        delete = _write(spark, erased, table_uri, "delete", services, progress)
        index = {
            "keys_looked_up": int(
                index_service.metric("tidemark_index_keys_total") - lookups_before
            ),
            "upserted_rows": upsert.rows_updated + upsert.rows_inserted,
            "upsert_tagging": upsert.tagging,
            "deleted_rows": delete.rows_deleted,
            "delete_tagging": delete.tagging,
            **tagging,
        }
        session = _sample_session(table_uri)
        before = timed("session query before", lambda: _session_query(table_uri, session))
        plan = timed("schedule clustering", lambda: _schedule(services["planner"], table_uri))
        timed(
            "run clustering",
            lambda: run_clustering(
                spark,
                table_uri,
                plan,
                markers="service",
                marker_service_address=services["marker"].address,
                row_group_bytes=_clustered_row_group_bytes(table_uri),
                index_service_address=index_service.address,
            ),
        )
        after = timed("session query after", lambda: _session_query(table_uri, session))
        point = timed("point query", lambda: _point_query(table_uri, index_service))
        addresses = {name: service.address for name, service in services.items()}
    for result in (bulk, upsert, delete):
        for name, seconds in result.stage_seconds.items():
            stages[f"{result.operation}: {name}"] = seconds
    return DemoReport(
        table=table_uri,
        services=addresses,
        rows=rows,
        rows_in_table=read_snapshot(table_uri, columns=[KEY]).num_rows,
        markers=markers,
        index=index,
        clustering={
            "plan": plan,
            "session_id": session,
            "before": asdict(before),
            "after": asdict(after),
        },
        point_query=point,
        stage_seconds=stages,
    )


class _Stages:
    """Times a demo stage of its own and shows it in the progress display."""

    def __init__(self, stages: dict[str, float], progress: StageProgress) -> None:
        self._stages = stages
        self._progress = progress

    def __call__(self, name: str, work: Callable[[], T]) -> T:
        self._progress.stage_started(name)
        start = time.perf_counter()
        result = work()
        self._stages[name] = time.perf_counter() - start
        self._progress.stage_finished(name, self._stages[name])
        return result


def session_events(spark: SparkSession, rows: int) -> DataFrame:
    """Deterministic web-session events in arrival order: sessions of about 20 events,
    interleaved, each within one day's ``event_date`` partition (session ids grow with the
    day, as ids issued over time do)."""
    sessions = max(1, rows // EVENTS_PER_SESSION)
    event_types = sf.array(*(sf.lit(kind) for kind in EVENT_TYPES))
    session_number = sf.col("id") * 7919 % sessions
    day_number = (session_number * EVENT_DAYS / sessions).cast("int")
    day = sf.date_add(sf.lit("2026-11-01").cast("date"), day_number)
    return spark.range(0, rows, 1, INPUT_SLICES).select(
        sf.format_string("e-%012d", sf.col("id")).alias(KEY),
        sf.format_string("s-%09d", session_number).alias(SESSION),
        (session_number * 104_729 % USERS).alias("user_id"),
        sf.date_format(day, "yyyy-MM-dd").alias("event_date"),
        sf.element_at(event_types, (sf.col("id") % len(EVENT_TYPES) + 1).cast("int")).alias(
            "event_type"
        ),
        (sf.col("id") * 104_729 % 600_000).alias("duration_ms"),
        (sf.lit(1_793_000_000_000) + sf.col("id")).alias("ts"),
    )


def _changed_events(events: DataFrame, fraction: float) -> DataFrame:
    """Every 1/fraction-th event gets a longer duration and a newer ``ts``."""
    step = max(1, round(1 / fraction))
    return events.where(sf.col("ts") % step == 0).select(
        *(name for name in events.columns if name not in ("duration_ms", "ts")),
        (sf.col("duration_ms") + 1000).alias("duration_ms"),
        (sf.col("ts") + 1).alias("ts"),
    )


def _erased_keys(events: DataFrame) -> DataFrame:
    """The keys of every event of a few users: a GDPR erasure request, as a list of ids."""
    users = [user * 7 for user in range(ERASED_USERS)]
    return events.where(sf.col("user_id").isin(users)).select(KEY)


def _write(
    spark: SparkSession,
    df: DataFrame,
    table_uri: str,
    operation: str,
    services: dict[str, _Service],
    progress: StageProgress,
) -> WriteResult:
    return write(
        spark,
        df,
        table_uri,
        operation,
        WriteOptions(
            record_key_fields=[KEY],
            partition_fields=["event_date"],
            precombine_field="ts",
            markers="service",
            marker_service_address=services["marker"].address,
            index_service_address=services["index"].address,
        ),
        listener=_Prefixed(operation, progress),
    )


def _marker_effect(service: _Service, bulk: WriteResult) -> dict[str, int]:
    """The bulk insert's markers: what the marker service wrote against what direct markers
    make (one object per data file, then LIST pages and DeleteObjects calls of 1,000)."""
    pages = math.ceil(bulk.files_written / DIRECT_MARKER_PAGE)
    return {
        "data_files": bulk.files_written,
        "service_marker_file_writes": int(
            service.metric("tidemark_marker_storage_requests_total", operation="put")
        ),
        "service_storage_requests": int(service.metric("tidemark_marker_storage_requests_total")),
        "direct_marker_objects": bulk.files_written,
        "direct_storage_requests": bulk.files_written + 2 * pages,
    }


def _compare_tagging(
    spark: SparkSession, table_uri: str, keyed: DataFrame, index: _Service
) -> dict[str, Any]:
    """Tag the upsert batch's keys both ways the write path can: the index service, and
    Spark's join with every base file's keys (Hudi's simple index); each is run once before
    it is timed. Both must agree."""
    table = HoodieTable.open(table_uri)
    keys = keyed.select(sf.col(KEY).alias(RECORD_KEY))
    client = IndexClient(index.address, table_uri)
    base_files = table.view().latest_base_files()

    def by_index() -> int:
        return _found(tag_with_index(keys, client, None))

    def by_join() -> int:
        return _found(tag(keys, existing_keys(spark, table_uri, table.config, base_files)))

    for warm_up in (by_join, by_index):  # the first jobs start Spark's Python workers
        warm_up()
    join_s, joined = _timed(by_join)
    index_s, indexed = _timed(by_index)
    if indexed != joined:
        raise FailedPreconditionError(
            f"the index tagged {indexed} keys, the join {joined}", field="index"
        )
    return {
        "tagged_keys": indexed,
        "tagging_index_s": index_s,
        "tagging_join_s": join_s,
        "base_files_joined": len(base_files),
    }


def _found(tagged: DataFrame) -> int:
    (row,) = tagged.agg(sf.count(OLD_FILE_ID)).collect()
    return int(row[0])


def _timed(work: Callable[[], T]) -> tuple[float, T]:
    start = time.perf_counter()
    result = work()
    return time.perf_counter() - start, result


def _sample_session(table_uri: str) -> str:
    """A session that is in the table (the middle one of the first file)."""
    sessions = read_snapshot(table_uri, columns=[SESSION]).column(SESSION)
    return str(sessions[len(sessions) // 2])


def _clustered_row_group_bytes(table_uri: str) -> int:
    table_bytes = sum(base.size for base in HoodieTable.open(table_uri).view().latest_base_files())
    return max(MIN_ROW_GROUP_BYTES, table_bytes // (EVENT_DAYS * ROW_GROUPS_PER_DAY))


def _schedule(planner: _Service, table_uri: str) -> str:
    """A plan clustering every partition's small files by session; its instant."""
    scheduled = PlannerClient(planner.address).schedule(
        table_uri, plan_options(sort_columns=[SESSION], layout="linear")
    )
    if not scheduled.HasField("plan"):
        raise FailedPreconditionError(
            f"the planner found nothing to cluster: {scheduled.reason}", field="table"
        )
    return scheduled.plan.instant_time


def _session_query(table_uri: str, session: str) -> ScanResult:
    """``session_id = X`` over the latest files with file and row-group min/max pruning."""
    table = HoodieTable.open(table_uri)
    paths = [base.path for base in table.view().latest_base_files()]
    return scan_equal(table.storage, paths, SESSION, session)


def _point_query(table_uri: str, index: _Service) -> dict[str, Any]:
    """One event by key: the files the index service names against every base file."""
    table = HoodieTable.open(table_uri)
    key = str(read_snapshot(table_uri, columns=[KEY]).column(KEY)[0])
    client = IndexClient(index.address, table_uri)
    last = table.timeline.last_completed()
    as_of = last.timestamp if last else None

    def locate(keys: set[str]) -> set[str]:
        located = client.lookup(sorted(keys), as_of=as_of)
        return set(located.column("file_id").drop_null().to_pylist())

    base_files = table.view().latest_base_files()
    files = files_holding(table.uri, base_files, {key}, locate)
    seconds, rows = _timed(
        lambda: read_snapshot(table.storage, filters=[(KEY, "=", key)], locate=locate)
    )
    return {
        "key": key,
        "rows": rows.num_rows,
        "files_opened": len(files),
        "files_in_table": len(base_files),
        "seconds": seconds,
    }


class _Prefixed:
    """Shows the write job's stages as '<operation>: <stage>' in the demo's progress."""

    def __init__(self, prefix: str, listener: StageListener) -> None:
        self._prefix = prefix
        self._listener = listener

    def stage_started(self, name: str) -> None:
        self._listener.stage_started(f"{self._prefix}: {name}")

    def stage_finished(self, name: str, seconds: float) -> None:
        self._listener.stage_finished(f"{self._prefix}: {name}", seconds)


def _fresh_table(location: str) -> str:
    """The demo table's URI at ``location`` (a path or s3://bucket/prefix), emptied first;
    anything the demo did not create (no demo marker file) is refused, never wiped."""
    table_uri = canonical_uri(location)
    storage = open_storage(table_uri)
    if next(iter(storage.list("")), None) is not None:
        if not storage.exists(DEMO_MARKER):
            raise FailedPreconditionError(
                f"{location} exists and was not created by `tidemark demo`; "
                "choose another --table or --storage",
                field="table",
            )
        storage.delete_prefix("")
    storage.write(DEMO_MARKER, b"created by tidemark demo; rerunning the demo wipes it\n")
    return table_uri


def _ratio(baseline: float, measured: float) -> str:
    return f"{baseline / measured:,.1f}x" if measured else "n/a"


def _print_report(report: DemoReport) -> None:
    markers, index, clustering = report.markers, report.index, report.clustering
    before, after, point = clustering["before"], clustering["after"], report.point_query
    print(f"table     {report.table} (a Hudi COW v6 table: any Hudi reader reads it)")
    print(f"services  {', '.join(f'{n} {a}' for n, a in report.services.items())}")
    print(f"rows      {report.rows:,} generated, {report.rows_in_table:,} in the table now")
    print(
        f"markers   bulk insert of {markers['data_files']:,} files: "
        f"{markers['service_marker_file_writes']:,} MARKERS writes, "
        f"{markers['service_storage_requests']:,} storage requests by the marker service; "
        f"direct markers: {markers['direct_marker_objects']:,} objects, "
        f"{markers['direct_storage_requests']:,} requests "
        f"({_ratio(markers['direct_storage_requests'], markers['service_storage_requests'])} "
        "more)"
    )
    print(
        f"index     {index['keys_looked_up']:,} keys looked up; tagging "
        f"{index['tagged_keys']:,} upserted keys: {index['tagging_index_s']:.2f} s by the "
        f"index service vs {index['tagging_join_s']:.2f} s joining "
        f"{index['base_files_joined']:,} files "
        f"({_ratio(index['tagging_join_s'], index['tagging_index_s'])}); "
        f"{index['upserted_rows']:,} upserted, {index['deleted_rows']:,} deleted (GDPR erasure)"
    )
    print(
        f"cluster   plan {clustering['plan']} by {SESSION}; query {SESSION} = "
        f"{clustering['session_id']}: {before['rows_read']:,} rows in "
        f"{before['files_read']:,} files before, {after['rows_read']:,} rows in "
        f"{after['files_read']:,} files after "
        f"({_ratio(before['rows_read'], after['rows_read'])} fewer rows)"
    )
    print(
        f"point     {KEY} = {point['key']}: {point['rows']} row, {point['files_opened']} of "
        f"{point['files_in_table']} files opened through the index"
    )
    width = max(len(name) for name in report.stage_seconds)
    print("stage times")
    for name, seconds in report.stage_seconds.items():
        print(f"  {name:<{width}}  {seconds:8.2f} s")
