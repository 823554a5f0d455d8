"""``tidemark demo``: the README's main job, showing all three services at work.

It starts the marker, index and planner services as their own ``tidemark serve``
processes on loopback (the architecture a deployment runs), generates web-session events,
then: bulk-inserts them with service markers, builds the record index, upserts a batch
and deletes every event of a few users (both tagged through the index service), schedules
clustering by session through the planner service and runs it, and answers a point query
by key and a session query through the native read (``tidemark.spark.read``'s: files
pruned in the driver, Spark's Parquet reader). The report is one table, a row per
figure: the service's figure, the same step's without it (measured in this run: direct
markers, Spark's join, Spark's scan of every file with row-group pushdown, the files
before clustering) and their ratio; a figure with no saving at this size says when the
saving appears. Then the stage times in run order and the total. Progress goes to stderr
as each stage ends.
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
from dataclasses import asdict, dataclass, field, replace
from typing import Any, TypeVar

from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from rich.console import Console

from tidemark.clients.index import IndexClient
from tidemark.clients.planner import PlannerClient, plan_options
from tidemark.commands.args import positive_int
from tidemark.commands.progress import StageProgress
from tidemark.errors import FailedPreconditionError, InvalidArgumentError
from tidemark.index.pruning import SnapshotPlan, plan_snapshot
from tidemark.jobs.cluster import run_clustering
from tidemark.jobs.cluster_options import ClusterOptions
from tidemark.jobs.index_build import build_index
from tidemark.jobs.index_writes import tag_with_index
from tidemark.jobs.read import apply_filters, scan
from tidemark.jobs.session import DEFAULT_MASTER, build_session
from tidemark.jobs.stages import StageListener
from tidemark.jobs.tagging import OLD_FILE_ID, existing_keys, tag
from tidemark.jobs.write import WriteResult, write
from tidemark.jobs.write_options import WriteOptions
from tidemark.logs import configure_logging
from tidemark.rpc.process import ServeProcess
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.files.reader import read_snapshot
from tidemark.table.files.scan import ScanResult
from tidemark.table.records.keys import RECORD_KEY
from tidemark.table.timeline.versions import DEFAULT_TABLE_VERSION, add_table_version_argument

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
INDEX_KEYS_METRIC = "tidemark_index_keys_total"
"""Keys the index service looked up, from its Prometheus endpoint."""
SMALL_GAIN = 1.2
"""A ratio below this shows no real saving: the report says when the saving appears."""
KEY = "event_id"
SESSION = "session_id"

T = TypeVar("T")


@dataclass
class DemoReport:
    """What the demo did and measured; printed as text, or as one JSON line with ``--json``.
    ``stage_seconds`` in the order the stages ran; ``total_seconds`` the whole run's."""

    table: str
    table_version: int
    services: dict[str, str]
    rows: int
    rows_in_table: int
    markers: dict[str, int]
    index: dict[str, Any]
    erasure: dict[str, int]
    clustering: dict[str, Any]
    point_query: dict[str, Any]
    stage_seconds: dict[str, float] = field(default_factory=dict)
    total_seconds: float = 0.0


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
    add_table_version_argument(parser, default=DEFAULT_TABLE_VERSION)
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
    with StageProgress(console, transient=True) as progress:
        report = run_demo(
            args.rows, args.upsert_fraction, table_uri, args.master, progress, args.table_version
        )
    if args.json:
        print(json.dumps(asdict(report)))
    else:
        print_report(report)
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
    args = ["--metrics-port", str(metrics_port), "--allowed-root", table_root]
    with ServeProcess(service, args=args) as process:
        yield _Service(process.address, metrics_port)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def run_demo(
    rows: int,
    upsert_fraction: float,
    table_uri: str,
    master: str,
    progress: StageListener,
    table_version: int = DEFAULT_TABLE_VERSION,
) -> DemoReport:
    """Every stage against the three services, on a table created at ``table_version``;
    each measurement is taken in this run."""
    started = time.perf_counter()
    timed = _Stages(progress)
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
        bulk = _write(spark, events, table_uri, "bulk_insert", services, timed, table_version)
        markers = _marker_effect(services["marker"], bulk)
        table = HoodieTable.open(table_uri)
        timed("build record index", lambda: build_index(spark, table))
        index_service = services["index"]
        changed = _changed_events(events, upsert_fraction).cache()
        tagging = timed(
            "compare tagging", lambda: _compare_tagging(spark, table, changed, index_service)
        )
        lookups_before_writes = index_service.metric(INDEX_KEYS_METRIC)
        upsert = _write(spark, changed, table_uri, "upsert", services, timed)
        changed.unpersist()
        erased = _erased_events(events)
        delete = _write(spark, erased.select(KEY), table_uri, "delete", services, timed)
        index = {
            "write_keys_looked_up": int(
                index_service.metric(INDEX_KEYS_METRIC) - lookups_before_writes
            ),
            "upserted_rows": upsert.rows_updated + upsert.rows_inserted,
            "upsert_tagging": upsert.tagging,
            "delete_tagging": delete.tagging,
            **tagging,
        }
        erasure = {
            "users_requested": ERASED_USERS,
            "users_with_events": erased.select("user_id").distinct().count(),
            "rows_deleted": delete.rows_deleted,
        }
        table.timeline.reload()
        session = _sample_session(table)
        before = timed("session query before", lambda: _session_query(spark, table, session))
        plan = timed("schedule clustering", lambda: _schedule(services["planner"], table_uri))
        options = ClusterOptions(
            markers="service",
            marker_service_address=services["marker"].address,
            row_group_bytes=_clustered_row_group_bytes(table),
            index_service_address=index_service.address,
        )
        timed("run clustering", lambda: run_clustering(spark, table, plan, options))
        table.timeline.reload()
        after = timed("session query after", lambda: _session_query(spark, table, session))
        point = timed("point query", lambda: _point_query(spark, table))
        addresses = {name: service.address for name, service in services.items()}
    return DemoReport(
        table=table_uri,
        table_version=table.config.table_version,
        services=addresses,
        rows=rows,
        rows_in_table=read_snapshot(table, columns=[KEY]).num_rows,
        markers=markers,
        index=index,
        erasure=erasure,
        clustering={
            "plan": plan,
            "session_id": session,
            "before": asdict(before),
            "after": asdict(after),
        },
        point_query=point,
        stage_seconds=timed.seconds,
        total_seconds=time.perf_counter() - started,
    )


class _Stages:
    """Times the demo's stages, its own and its writes' (as ``StageListener``), in the
    order they end, and shows each in the progress display."""

    def __init__(self, progress: StageListener) -> None:
        self.seconds: dict[str, float] = {}
        self._progress = progress

    def __call__(self, name: str, work: Callable[[], T]) -> T:
        self.stage_started(name)
        start = time.perf_counter()
        result = work()
        self.stage_finished(name, time.perf_counter() - start)
        return result

    def stage_started(self, name: str) -> None:
        self._progress.stage_started(name)

    def stage_finished(self, name: str, seconds: float) -> None:
        self.seconds[name] = seconds
        self._progress.stage_finished(name, seconds)


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


def _erased_events(events: DataFrame) -> DataFrame:
    """Every event of a few users: a GDPR erasure request (a user may have none)."""
    users = [user * 7 for user in range(ERASED_USERS)]
    return events.where(sf.col("user_id").isin(users))


def _write(
    spark: SparkSession,
    df: DataFrame,
    table_uri: str,
    operation: str,
    services: dict[str, _Service],
    stages: StageListener,
    table_version: int | None = None,
) -> WriteResult:
    """A write through the marker and index services; ``table_version`` is the version of
    the table the first write creates."""
    return write(
        spark,
        df,
        table_uri,
        operation,
        WriteOptions(
            record_key_fields=[KEY],
            partition_fields=["event_date"],
            precombine_field="ts",
            table_version=table_version,
            markers="service",
            marker_service_address=services["marker"].address,
            index_service_address=services["index"].address,
        ),
        listener=_Prefixed(operation, stages),
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
    spark: SparkSession, table: HoodieTable, keyed: DataFrame, index: _Service
) -> dict[str, Any]:
    """Tag the upsert batch's keys both ways the write path can: the index service, and
    Spark's join with every base file's keys (Hudi's simple index); each is run once before
    it is timed. Both must agree. The keys the comparison looks up (twice) are counted
    apart from the writes'."""
    keys = keyed.select(sf.col(KEY).alias(RECORD_KEY))
    client = IndexClient(index.address, table.uri)
    base_files = table.view().latest_base_files()
    lookups_before = index.metric(INDEX_KEYS_METRIC)

    def by_index() -> int:
        return _found(tag_with_index(keys, client, None))

    def by_join() -> int:
        return _found(tag(keys, existing_keys(spark, table.uri, table.config, base_files)))

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
        "comparison_keys_looked_up": int(index.metric(INDEX_KEYS_METRIC) - lookups_before),
    }


def _found(tagged: DataFrame) -> int:
    (row,) = tagged.agg(sf.count(OLD_FILE_ID)).collect()
    return int(row[0])


def _timed(work: Callable[[], T]) -> tuple[float, T]:
    start = time.perf_counter()
    result = work()
    return time.perf_counter() - start, result


def _sample_session(table: HoodieTable) -> str:
    """A session that is in the table (the middle one of the first file)."""
    sessions = read_snapshot(table, columns=[SESSION]).column(SESSION)
    return str(sessions[len(sessions) // 2])


def _clustered_row_group_bytes(table: HoodieTable) -> int:
    table_bytes = sum(base.size for base in table.view().latest_base_files())
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


def _session_query(spark: SparkSession, table: HoodieTable, session: str) -> ScanResult:
    """``session_id = X`` through the native read: files pruned by column statistics,
    then Spark's Parquet reader with row-group pushdown."""
    return _native_query(spark, plan_snapshot(table, [(SESSION, "=", session)]))


def _point_query(spark: SparkSession, table: HoodieTable) -> dict[str, Any]:
    """One event by key through the native read: the files the record index names; as
    the baseline, Spark's Parquet reader scans every base file (row-group pushdown on the
    key)."""
    key = str(read_snapshot(table, columns=[KEY]).column(KEY)[0])
    every = plan_snapshot(table)
    by_key = plan_snapshot(table, [(KEY, "=", key)])
    indexed = _native_query(spark, by_key)
    scanned = _native_query(spark, replace(every, filters=by_key.filters))
    if indexed.rows_matched != scanned.rows_matched:
        raise FailedPreconditionError(
            f"the index found {indexed.rows_matched} rows of {key}, the scan "
            f"{scanned.rows_matched}",
            field="index",
        )
    return {
        "key": key,
        "rows_matched": indexed.rows_matched,
        "files_in_table": len(every.files),
        "with_index": asdict(indexed),
        "without_index": asdict(scanned),
    }


def _native_query(spark: SparkSession, plan: SnapshotPlan) -> ScanResult:
    """Runs the plan's scan and filters: its files, the rows its scan handed on (Spark's
    SQL metrics: Spark's Parquet reader counts those of the row groups pushdown left, the
    pyarrow reader of S3 tables without S3A every row of the files) and the rows
    matched."""
    started = time.perf_counter()
    frame = apply_filters(scan(spark, plan), plan)
    matched = len(frame.collect())
    seconds = time.perf_counter() - started
    rows = 0
    pending = [frame._jdf.queryExecution().executedPlan()]
    while pending:
        node = pending.pop()
        metrics = node.metrics()
        if metrics.contains("numFiles"):
            rows += int(metrics.apply("numOutputRows").value())
        elif metrics.contains("pythonNumRowsReceived"):
            rows += int(metrics.apply("pythonNumRowsReceived").value())
        elif node.nodeName() == "AdaptiveSparkPlan":
            pending.append(node.executedPlan())
        else:
            children = node.children()
            pending.extend(children.apply(i) for i in range(children.size()))
    return ScanResult(len(plan.files), rows, matched, seconds)


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
    storage = open_storage(location)
    if next(iter(storage.list("")), None) is not None:
        if not storage.exists(DEMO_MARKER):
            raise FailedPreconditionError(
                f"{location} exists and was not created by `tidemark demo`; "
                "choose another --table or --storage",
                field="table",
            )
        storage.delete_prefix("")
    storage.write(DEMO_MARKER, b"created by tidemark demo; rerunning the demo wipes it\n")
    return storage.uri


@dataclass(frozen=True)
class _Row:
    """One figure measured with the service and without it; ``gains_when`` says when a
    figure that shows no saving here gains."""

    service: str
    figure: str
    with_service: float
    without: float
    unit: str = ""
    gains_when: str = ""

    def cells(self) -> list[str]:
        return [
            self.service,
            self.figure,
            _amount(self.with_service, self.unit),
            _amount(self.without, self.unit),
            _ratio(self.without, self.with_service),
        ]

    @property
    def gains(self) -> bool:
        return self.with_service > 0 and self.without / self.with_service >= SMALL_GAIN


def _amount(value: float, unit: str) -> str:
    return f"{value:,.2f} {unit}" if unit else f"{value:,.0f}"


def _ratio(baseline: float, measured: float) -> str:
    return f"{baseline / measured:,.1f}x" if measured else "n/a"


def _plural(count: int, noun: str) -> str:
    """``1 file``, ``2 files``."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def _rows(report: DemoReport) -> list[_Row]:
    markers, index, clustering = report.markers, report.index, report.clustering
    before, after, point = clustering["before"], clustering["after"], report.point_query
    files = _plural(markers["data_files"], "file")
    where = f"{SESSION} = {clustering['session_id']}"
    found = _plural(before["rows_matched"], "row")
    return [
        _Row(
            "marker",
            f"storage requests for the markers of the bulk insert's {files}",
            markers["service_storage_requests"],
            markers["direct_storage_requests"],
            gains_when="direct markers cost one object per data file plus a LIST page and a "
            "delete call per 1,000, the marker service one MARKERS file per batch: the saving "
            "appears with many files per write (thousands) or on S3, where every request is a "
            "round trip",
        ),
        _Row(
            "index",
            f"seconds to tag the {_plural(index['tagged_keys'], 'upserted key')}",
            index["tagging_index_s"],
            index["tagging_join_s"],
            "s",
            gains_when=f"the join reads the keys of all "
            f"{_plural(index['base_files_joined'], 'base file')}, the index only the shards "
            "of the keys asked for: the saving grows with the table (many files, millions "
            "of rows) and on S3",
        ),
        _Row(
            "index",
            f"point query {KEY} = {point['key']}: files read",
            point["with_index"]["files_read"],
            point["without_index"]["files_read"],
        ),
        _Row(
            "index",
            f"point query {KEY} = {point['key']}: rows read "
            f"({_plural(point['rows_matched'], 'row')} matched)",
            point["with_index"]["rows_read"],
            point["without_index"]["rows_read"],
        ),
        _Row(
            "planner",
            f"session query {where}: files read",
            after["files_read"],
            before["files_read"],
        ),
        _Row(
            "planner",
            f"session query {where}: rows read ({found} matched)",
            after["rows_read"],
            before["rows_read"],
            gains_when="a row group holds many sessions: at the demo's size Spark's row-group "
            "pushdown already skips most of the unclustered small files' rows; clustered, "
            "a session's rows sit in one file of few row groups",
        ),
    ]


READERS = {
    6: "any Hudi reader reads it",
    8: "Hudi 1.x and hudi-rs read it",
    9: "Hudi 1.1 and later and hudi-rs read it",
}
"""Who reads a table of each version (docs/hudi-versions.md)."""


def print_report(report: DemoReport) -> None:
    index, erasure = report.index, report.erasure
    version = report.table_version
    print(f"table     {report.table} (a Hudi COW v{version} table: {READERS[version]})")
    print(f"services  {', '.join(f'{n} {a}' for n, a in report.services.items())}")
    print(
        f"rows      {report.rows:,} generated; {index['upserted_rows']:,} upserted; "
        f"erasure of {_plural(erasure['users_requested'], 'user')}, "
        f"{erasure['users_with_events']:,} of whom had events: "
        f"{_plural(erasure['rows_deleted'], 'row')} deleted; "
        f"{report.rows_in_table:,} in the table now"
    )
    print(
        f"lookups   the upsert and the delete (tagged by the {index['upsert_tagging']} index) "
        f"looked up {_plural(index['write_keys_looked_up'], 'key')} in the index service; "
        f"the tagging comparison below looked up {index['comparison_keys_looked_up']:,} more "
        "(a warm-up run and a timed one)"
    )
    rows = _rows(report)
    print()
    _print_columns(
        [["service", "figure", "with", "without", "ratio"], *(r.cells() for r in rows)], 2
    )
    print(
        "with: through the service; without: the same step without it, measured in this "
        "run (direct markers, Spark's join with every base file's keys, a row-group "
        "statistics scan of every file, the files before clustering)"
    )
    for row in rows:
        if row.gains_when and not row.gains:
            print(f"{row.service}: no saving in {row.figure} at this size; {row.gains_when}.")
    print()
    print("stage times, in run order")
    stages = [[name, f"{seconds:.2f} s"] for name, seconds in report.stage_seconds.items()]
    _print_columns([*stages, ["total (wall clock)", f"{report.total_seconds:.2f} s"]], 1, indent=2)


def _print_columns(lines: list[list[str]], figures_from: int, indent: int = 0) -> None:
    """Columns padded to their widest cell: text left-aligned, the figures (columns from
    ``figures_from`` on) right-aligned."""
    widths = [max(len(line[column]) for line in lines) for column in range(len(lines[0]))]
    for line in lines:
        cells = [
            cell.rjust(width) if column >= figures_from else cell.ljust(width)
            for column, (cell, width) in enumerate(zip(line, widths, strict=True))
        ]
        print(" " * indent + "  ".join(cells).rstrip())
