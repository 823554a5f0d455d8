"""``python -m benchmarks markers``: direct markers vs the marker service, and the gRPC ceiling.

W concurrent writers create M markers on S3 (a local S3 server started here unless
``AWS_ENDPOINT_URL`` is set, behind a latency proxy with ``--latency-ms``) or a local
directory: once as direct marker objects, once through a ``tidemark serve marker``
subprocess (one CreateMarker per marker, then CreateMarkers in batches); then lists
them as reconcile does and deletes them. The same load generator (spawned processes,
each a grpc.aio client running W/P tasks; threads for direct markers) also drives a
bare echo server (grpc.aio with only the standard health service, no interceptors, in
its own process like the marker service), before and after the creates: the ceiling of
Python gRPC on this machine.

Wall times on S3 are the local S3 server's (moto, an emulator: it rescans and sorts the
bucket for every 1,000-key listing page, so listing and deleting many direct markers
grows quadratically there) and are labelled so. What listing and deleting would cost on
S3 comes from the requests counted here (LIST pages of 1,000 keys, DeleteObjects of
1,000 keys) times the per-request latency, issued one after another as the code does.
Figures quoted from Hudi go into ``references``, never into a baseline or a ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import statistics
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.synchronize import Barrier
from typing import Any, Literal, TypeVar

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio  # type: ignore[attr-defined]  # stubs predate it
from prometheus_client.parser import text_string_to_metric_families

from tidemark.clients.marker import ServiceMarkerReader
from tidemark.commands.args import positive_int
from tidemark.config import ClientConfig
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.marker.v1 import marker_service_pb2 as pb
from tidemark.proto.marker.v1.marker_service_pb2_grpc import MarkerServiceStub
from tidemark.rpc.client import channel_for
from tidemark.rpc.options import client_options
from tidemark.rpc.process import ServeProcess
from tidemark.services.marker.config import MarkerConfig
from tidemark.services.marker.metrics import STORAGE_REQUESTS, STORAGE_RETRIES
from tidemark.storage import open_storage
from tidemark.storage.base import Storage
from tidemark.storage.s3 import s3_client
from tidemark.table.properties.config import PROPERTIES_PATH, format_properties
from tidemark.table.timeline.instant import new_instant_time
from tidemark.table.writes.markers import (
    MARKERS_TYPE_FILE,
    DirectMarkerWriter,
    IOType,
    StorageMarkerReader,
    delete_marker_dir,
    marker_dir,
    marker_lease_dir,
)
from tidemark.testing.s3local import FaultProxy, LocalS3Server, free_port

LoadKind = Literal["echo", "create", "create_many", "direct"]
CREATE_MARKERS = f"/{pb.DESCRIPTOR.services_by_name['MarkerService'].full_name}/CreateMarkers"
"""Served on the marker service's bulk port, which the asyncio load dials itself."""
T = TypeVar("T")
SERVER_START_TIMEOUT_S = 60.0
RPC_TIMEOUT_S = 120.0
PARTITIONS = 100
DEFAULT_MODEL_LATENCY_MS = 20.0
"""Per-request latency of the S3 cost model when ``--latency-ms`` is 0 (the latency the
README's other S3 runs add), so every S3 run reports the model. Local runs have none:
local storage counts one request per listing, not per 1,000 keys."""
FLUSHES = "tidemark_marker_flush_seconds"
HUDI_MARKERS_BLOG = (
    "Apache Hudi blog, 'Improving Marker Mechanism in Apache Hudi' (2021), "
    "https://hudi.apache.org/blog/2021/08/18/improving-marker-mechanism/"
)
HUDI_MARKERS_DOC = "Apache Hudi docs, 'Marker Mechanism', https://hudi.apache.org/docs/markers"
REFERENCES: tuple[dict[str, str], ...] = (
    {
        "what": "Hudi's benchmark (EMR, Spark, S3, parallelism 240): data files written and "
        "marker objects created with direct markers",
        "figure": "165,000 data files, 165,000 marker objects",
        "source": HUDI_MARKERS_BLOG,
    },
    {
        "what": "same write, timeline-server-based markers: files created for markers",
        "figure": "20",
        "source": HUDI_MARKERS_BLOG,
    },
    {
        "what": "same: marker deletion time, direct vs timeline-server-based",
        "figure": "15 min vs ~3 s",
        "source": HUDI_MARKERS_BLOG,
    },
    {
        "what": "same: bulk insert time, direct vs timeline-server-based markers",
        "figure": "55 min vs 38 min (31% lower)",
        "source": HUDI_MARKERS_BLOG,
    },
    {
        "what": "Hudi timeline server defaults: batch interval, MARKERS files (batch threads)",
        "figure": "50 ms, 20",
        "source": HUDI_MARKERS_DOC,
    },
)
"""Figures quoted from Hudi: context for the README, never a baseline or a ratio."""


def register(bench_subparsers: Any) -> None:
    parser: argparse.ArgumentParser = bench_subparsers.add_parser(
        "markers", help="direct markers vs the marker service", description=__doc__
    )
    parser.add_argument("--markers", type=positive_int, default=165_000, help="markers per run")
    parser.add_argument("--writers", type=positive_int, default=240, help="concurrent writers")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="added per S3 request")
    parser.add_argument("--storage", choices=("s3", "local"), default="s3")
    parser.add_argument(
        "--batch-size", type=positive_int, default=1000, help="markers per CreateMarkers"
    )
    parser.add_argument(
        "--processes", type=positive_int, default=1, help="load generator processes"
    )
    parser.add_argument(
        "--echo-calls", type=positive_int, default=50_000, help="calls to the bare echo server"
    )
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    parser.set_defaults(handler=run)


@dataclass(frozen=True)
class LoadSpec:
    """One load generator process: which calls, on which marker indexes, how concurrent."""

    kind: LoadKind
    address: str
    table_uri: str
    instant: str
    indexes: range
    concurrency: int
    batch_size: int = 1


@dataclass
class LoadResult:
    started: float
    finished: float
    latencies: list[float]
    storage_requests: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Phase:
    """A finished load: wall time, per-call latencies and storage requests of the clients."""

    calls: int
    items: int
    wall_s: float
    p50_ms: float
    p99_ms: float
    storage_requests: dict[str, int]
    """Requests of the load generators themselves (direct markers), by operation."""

    @property
    def items_per_s(self) -> float:
        return self.items / self.wall_s

    @property
    def calls_per_s(self) -> float:
        return self.calls / self.wall_s


def marker_of(index: int, instant: str) -> tuple[str, str, IOType]:
    """Deterministic (partition, data file, IO type) of marker ``index``."""
    return (
        f"p={index % PARTITIONS}",
        f"{index:012d}-0_{index % 997}-1-0_{instant}.parquet",
        IOType.CREATE,
    )


def proto_marker(index: int, instant: str) -> pb.Marker:
    partition, name, _ = marker_of(index, instant)
    return pb.Marker(partition_path=partition, data_file_name=name, io_type=pb.IO_TYPE_CREATE)


def _grpc_calls(spec: LoadSpec, channel: grpc.aio.Channel) -> tuple[Callable[..., Any], list[Any]]:
    """The method this process calls and every request, built in advance."""
    table = TableRef(base_path=spec.table_uri)
    if spec.kind == "echo":
        check = health_pb2.HealthCheckRequest()
        return health_pb2_grpc.HealthStub(channel).Check, [check] * len(spec.indexes)
    stub = MarkerServiceStub(channel)
    if spec.kind == "create":
        return stub.CreateMarker, [
            pb.CreateMarkerRequest(
                table=table, instant_time=spec.instant, marker=proto_marker(i, spec.instant)
            )
            for i in spec.indexes
        ]
    return stub.CreateMarkers, [
        pb.CreateMarkersRequest(
            table=table,
            instant_time=spec.instant,
            markers=[
                proto_marker(i, spec.instant) for i in spec.indexes[start : start + spec.batch_size]
            ],
        )
        for start in range(0, len(spec.indexes), spec.batch_size)
    ]


async def _run_grpc(spec: LoadSpec, barrier: Barrier) -> LoadResult:
    options = client_options(
        target=spec.address,
        max_message_bytes=ClientConfig().max_message_bytes,
        keepalive_time_ms=ClientConfig().keepalive_time_ms,
        keepalive_timeout_ms=ClientConfig().keepalive_timeout_ms,
    )
    async with grpc.aio.insecure_channel(spec.address, options=options) as channel:
        await channel.channel_ready()
        method, all_requests = _grpc_calls(spec, channel)
        requests = iter(all_requests)
        latencies: list[float] = []

        async def writer() -> None:
            for request in requests:
                began = time.perf_counter()
                await method(request, timeout=RPC_TIMEOUT_S)
                latencies.append(time.perf_counter() - began)

        barrier.wait()
        started = time.time()
        await asyncio.gather(*(writer() for _ in range(spec.concurrency)))
        return LoadResult(started, time.time(), latencies)


def _run_direct(spec: LoadSpec, barrier: Barrier) -> LoadResult:
    storage = open_storage(spec.table_uri)
    writer = DirectMarkerWriter(storage, spec.instant)
    markers = iter([marker_of(i, spec.instant) for i in spec.indexes])
    take = threading.Lock()
    latencies: list[float] = []

    def work() -> None:
        while True:
            with take:
                marker = next(markers, None)
            if marker is None:
                return
            began = time.perf_counter()
            writer.create(*marker)
            latencies.append(time.perf_counter() - began)

    with ThreadPoolExecutor(spec.concurrency) as pool:
        barrier.wait()
        started = time.time()
        for future in [pool.submit(work) for _ in range(spec.concurrency)]:
            future.result()
    return LoadResult(started, time.time(), latencies, storage.requests.snapshot())


def _load_process(spec: LoadSpec, barrier: Barrier, results: Any) -> None:
    """Entry point of a spawned load generator process."""
    if spec.kind == "direct":
        results.put(_run_direct(spec, barrier))
    else:
        results.put(asyncio.run(_run_grpc(spec, barrier)))


def run_load(
    kind: LoadKind,
    *,
    address: str,
    table_uri: str,
    instant: str,
    count: int,
    writers: int,
    processes: int,
    batch_size: int = 1,
) -> Phase:
    """Spread ``count`` items over ``processes`` spawned generators, all starting together."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes + 1)
    results = context.Queue()
    workers = [
        context.Process(
            target=_load_process,
            args=(
                LoadSpec(
                    kind,
                    address,
                    table_uri,
                    instant,
                    range(p, count, processes),
                    max(1, writers // processes),
                    batch_size,
                ),
                barrier,
                results,
            ),
        )
        for p in range(processes)
    ]
    for worker in workers:
        worker.start()
    barrier.wait()
    outcomes: list[LoadResult] = [results.get() for _ in workers]
    for worker in workers:
        worker.join()
        if worker.exitcode != 0:
            raise RuntimeError(f"load generator exited with {worker.exitcode}")
    latencies = np.array([latency for outcome in outcomes for latency in outcome.latencies])
    return Phase(
        calls=len(latencies),
        items=count,
        wall_s=max(o.finished for o in outcomes) - min(o.started for o in outcomes),
        p50_ms=float(np.percentile(latencies, 50) * 1000),
        p99_ms=float(np.percentile(latencies, 99) * 1000),
        storage_requests=dict(sum((Counter(o.storage_requests) for o in outcomes), Counter())),
    )


def echo_load(address: str, calls: int, load: dict[str, Any]) -> Phase:
    """One run of the echo ceiling (measured before and after the creates, averaged, so
    a drift of the machine's speed shows in both sides of the ratio)."""
    return run_load("echo", address=address, instant="", count=calls, **load)


def _serve_bare_echo(ready: Any) -> None:
    """Entry point of the bare echo server process: the health service and nothing else."""

    async def serve() -> None:
        server = grpc.aio.server()
        health_pb2_grpc.add_HealthServicer_to_server(health_aio.HealthServicer(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        ready.put(port)
        await server.wait_for_termination()

    asyncio.run(serve())


@dataclass(frozen=True)
class EchoServer:
    address: str
    pid: int


@contextlib.contextmanager
def bare_echo_server() -> Iterator[EchoServer]:
    """A bare echo server running in a spawned process: its address and process id."""
    context = multiprocessing.get_context("spawn")
    ready = context.Queue()
    process = context.Process(target=_serve_bare_echo, args=(ready,), daemon=True)
    process.start()
    try:
        port = ready.get(timeout=SERVER_START_TIMEOUT_S)
        assert process.pid is not None
        yield EchoServer(f"127.0.0.1:{port}", process.pid)
    finally:
        process.terminate()
        process.join()


@dataclass(frozen=True)
class ServiceCounters:
    """The service's storage requests by operation (every attempt), the retries among
    them, and its successful MARKERS file flushes, as its metrics endpoint reports them at
    one moment."""

    requests: Counter[str]
    retries: Counter[str]
    flushes: int

    def since(self, earlier: ServiceCounters) -> ServiceCounters:
        return ServiceCounters(
            self.requests - earlier.requests,
            self.retries - earlier.retries,
            self.flushes - earlier.flushes,
        )


class MarkerServerProcess:
    """``tidemark serve marker`` as a child process."""

    def __init__(self) -> None:
        self.metrics_port = free_port()
        self.server = ServeProcess(
            "marker",
            args=("--metrics-port", str(self.metrics_port), "--log-level", "warning"),
        )
        self.address = self.server.address

    def counters(self) -> ServiceCounters:
        """The service's counters so far, from its metrics endpoint."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        requests: Counter[str] = Counter()
        retries: Counter[str] = Counter()
        flushes = 0
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == f"{STORAGE_REQUESTS}_total":
                    requests[sample.labels["operation"]] += int(sample.value)
                elif sample.name == f"{STORAGE_RETRIES}_total":
                    retries[sample.labels["operation"]] += int(sample.value)
                elif sample.name == f"{FLUSHES}_count" and sample.labels["outcome"] == "ok":
                    flushes += int(sample.value)
        return ServiceCounters(requests, retries, flushes)

    def close(self) -> None:
        self.server.close()


@contextlib.contextmanager
def table_root(storage_kind: str, latency_ms: float) -> Iterator[str]:
    """A fresh table (its ``hoodie.properties`` only: the marker service serves tables
    only); for S3 the endpoint (and latency proxy) is exported to children."""
    with empty_root(storage_kind, latency_ms) as root:
        open_storage(root).write(
            PROPERTIES_PATH, format_properties({"hoodie.table.name": "bench_markers"})
        )
        yield root


@contextlib.contextmanager
def empty_root(storage_kind: str, latency_ms: float) -> Iterator[str]:
    if storage_kind == "local":
        with tempfile.TemporaryDirectory(prefix="tidemark-bench-") as root:
            yield root
        return
    with contextlib.ExitStack() as stack:
        endpoint = os.environ.get("AWS_ENDPOINT_URL")
        if endpoint is None:
            endpoint = stack.enter_context(LocalS3Server()).endpoint
            os.environ.setdefault("AWS_ACCESS_KEY_ID", "tidemark-bench")
            os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "tidemark-bench")
            os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
        if latency_ms > 0:
            endpoint = stack.enter_context(FaultProxy(endpoint, latency_ms=latency_ms)).endpoint
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        bucket = f"tidemark-bench-{uuid.uuid4().hex[:12]}"
        s3_client().create_bucket(Bucket=bucket)
        yield f"s3://{bucket}/table"


def count_objects(storage: Storage, instant: str) -> int:
    """Objects created for the markers of ``instant``: its marker dir and its lease."""
    prefixes = (marker_dir(instant) + "/", marker_lease_dir(instant) + "/")
    return sum(1 for prefix in prefixes for _ in storage.list(prefix))


def process_cpu_s(pid: int) -> float:
    """User and system CPU seconds process ``pid`` has used so far (Linux ``/proc``): what
    the server itself computed, which other jobs on the machine slow down but do not add to."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    began = time.perf_counter()
    value = fn()
    return time.perf_counter() - began, value


def timed_cpu(pid: int, fn: Callable[[], T]) -> tuple[float, T]:
    """CPU seconds process ``pid`` used while ``fn`` ran, and what ``fn`` returned."""
    began = process_cpu_s(pid)
    value = fn()
    return process_cpu_s(pid) - began, value


def storage_server(storage_kind: str) -> str:
    """What stands in for S3 in this run (read before ``table_root`` sets the endpoint)."""
    if storage_kind == "local":
        return "local disk"
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    return "moto" if endpoint is None else endpoint


def run(args: argparse.Namespace) -> int:
    server = storage_server(args.storage)
    with table_root(args.storage, args.latency_ms) as root:
        report = {**measure(root, args), "storage_server": server}
    print(format_report(report))
    if args.json:
        print(json.dumps(report))
    return 0


def s3_seconds(requests: Mapping[str, int], latency_ms: float | None) -> float | None:
    """Requests issued one after another, each costing ``latency_ms`` (None: no model)."""
    return None if latency_ms is None else sum(requests.values()) * latency_ms / 1000


def batch_bound_calls_per_s(writers: int, batch_interval_ms: float) -> float:
    """The most single creates ``writers`` callers can complete per second: a create is
    answered only after the tick that flushes it, so each caller, waiting for its answer
    before its next create, completes at most one per batch interval."""
    return writers * 1000 / batch_interval_ms


def measure(root: str, args: argparse.Namespace) -> dict[str, Any]:
    storage = open_storage(root)
    markers, writers = args.markers, args.writers
    load = {"table_uri": root, "writers": writers, "processes": args.processes}
    server = MarkerServerProcess()
    try:
        with bare_echo_server() as echo:
            echo_cpu_s, first_echo = timed_cpu(
                echo.pid, lambda: echo_load(echo.address, args.echo_calls, load)
            )
            single_instant = new_instant_time()
            before = server.counters()
            service_cpu_s, single = timed_cpu(
                server.server.pid,
                lambda: run_load(
                    "create", address=server.address, instant=single_instant, count=markers, **load
                ),
            )
            created = server.counters()
            second_cpu_s, second_echo = timed_cpu(
                echo.pid, lambda: echo_load(echo.address, args.echo_calls, load)
            )
            echo_runs = [first_echo, second_echo]
            echo_cpu_s += second_cpu_s
        service_objects = count_objects(storage, single_instant)
        service_files = sum(
            1
            for info in storage.list(marker_dir(single_instant) + "/MARKERS")
            if info.path.rpartition("/")[2] != MARKERS_TYPE_FILE
        )
        reader = ServiceMarkerReader(server.address, root)
        listing_began = server.counters()
        service_list_s, listed = timed(lambda: reader.create_and_merge_markers(single_instant))
        listed_counters = server.counters()
        service_delete_s, _ = timed(lambda: reader.delete_dir(single_instant))
        deleted_counters = server.counters()
        many_instant = new_instant_time()
        with channel_for(server.address) as routed:
            bulk_address = routed.target_of(CREATE_MARKERS)
        many = run_load(
            "create_many",
            address=bulk_address,
            instant=many_instant,
            count=markers,
            batch_size=args.batch_size,
            **load,
        )
        reader.delete_dir(many_instant)
    finally:
        server.close()
    creating = created.since(before)
    service_list_requests = dict(listed_counters.since(listing_began).requests)
    service_delete_requests = dict(deleted_counters.since(listed_counters).requests)
    echo_calls_per_s = statistics.fmean(run.calls_per_s for run in echo_runs)
    batch_interval_ms = MarkerConfig.load().batch_interval_ms  # the child's: same environment
    batch_bound = batch_bound_calls_per_s(writers, batch_interval_ms)
    if len(listed) != markers:
        raise RuntimeError(f"the service listed {len(listed)} markers, expected {markers}")
    direct_instant = new_instant_time()
    direct = run_load("direct", address="", instant=direct_instant, count=markers, **load)
    direct_objects = count_objects(storage, direct_instant)
    storage.requests.reset()
    direct_list_s, direct_listed = timed(
        lambda: StorageMarkerReader(storage).create_and_merge_markers(direct_instant)
    )
    direct_list_requests = storage.requests.snapshot()
    storage.requests.reset()
    direct_delete_s, _ = timed(lambda: delete_marker_dir(storage, direct_instant))
    direct_delete_requests = storage.requests.snapshot()
    if len(direct_listed) != markers:
        raise RuntimeError(f"listed {len(direct_listed)} direct markers, expected {markers}")
    model_latency_ms = (
        (args.latency_ms or DEFAULT_MODEL_LATENCY_MS) if args.storage == "s3" else None
    )
    return {
        "markers": markers,
        "writers": writers,
        "storage": args.storage,
        "latency_ms": args.latency_ms,
        "direct_objects": direct_objects,
        "service_objects": service_objects,
        "service_markers_files": service_files,
        "direct_requests": sum(direct.storage_requests.values())
        + sum(direct_list_requests.values())
        + sum(direct_delete_requests.values()),
        "service_requests": sum(creating.requests.values()),
        "direct_create_requests": direct.storage_requests,
        "direct_list_requests": direct_list_requests,
        "direct_delete_requests": direct_delete_requests,
        "service_create_requests": dict(creating.requests),
        "service_create_retries": dict(creating.retries),
        "service_list_requests": service_list_requests,
        "service_delete_requests": service_delete_requests,
        "service_flushes": creating.flushes,
        "service_requests_per_flush": {
            operation: count / max(creating.flushes, 1)
            for operation, count in sorted(creating.requests.items())
        },
        "model_latency_ms": model_latency_ms,
        "direct_list_model_s": s3_seconds(direct_list_requests, model_latency_ms),
        "service_list_model_s": s3_seconds(service_list_requests, model_latency_ms),
        "direct_delete_model_s": s3_seconds(direct_delete_requests, model_latency_ms),
        "service_delete_model_s": s3_seconds(service_delete_requests, model_latency_ms),
        "direct_create_s": direct.wall_s,
        "service_create_s": single.wall_s,
        "direct_p50_ms": direct.p50_ms,
        "direct_p99_ms": direct.p99_ms,
        "service_p50_ms": single.p50_ms,
        "service_p99_ms": single.p99_ms,
        "direct_markers_per_s": direct.items_per_s,
        "service_markers_per_s": single.items_per_s,
        "service_many_markers_per_s": many.items_per_s,
        "service_many_batch_size": args.batch_size,
        "direct_list_s": direct_list_s,
        "service_list_s": service_list_s,
        "direct_delete_s": direct_delete_s,
        "service_delete_s": service_delete_s,
        "echo_calls_per_s": echo_calls_per_s,
        "echo_p99_ms": max(run.p99_ms for run in echo_runs),
        "service_vs_echo": single.calls_per_s / echo_calls_per_s,
        "batch_interval_ms": batch_interval_ms,
        "batch_bound_calls_per_s": batch_bound,
        "service_vs_ceiling": single.calls_per_s / min(echo_calls_per_s, batch_bound),
        "service_cpu_ms_per_create": service_cpu_s * 1000 / single.calls,
        "echo_cpu_ms_per_call": echo_cpu_s * 1000 / sum(run.calls for run in echo_runs),
        "references": list(REFERENCES),
    }


def _requests(requests: Mapping[str, int]) -> str:
    """``{'list': 40, 'delete': 40}`` as '40 list + 40 delete'."""
    return " + ".join(f"{count:,} {operation}" for operation, count in sorted(requests.items()))


def _ratio(direct: float, service: float) -> str:
    return f"{direct / service:,.1f}x" if service else "-"


def _per_flush(report: dict[str, Any]) -> str:
    """Service requests per flush while creating, e.g. '1.005 put + 0.008 list'."""
    per_flush = report["service_requests_per_flush"]
    return " + ".join(
        f"{per_flush[operation]:.3f} {operation}"
        for operation in sorted(per_flush, key=per_flush.__getitem__, reverse=True)
    )


def format_report(report: dict[str, Any]) -> str:
    wall = report["storage_server"]
    rows = [
        ("objects created", report["direct_objects"], report["service_objects"]),
        (
            "storage requests (create+list+delete / create)",
            report["direct_requests"],
            report["service_requests"],
        ),
        (f"create wall time (s, {wall})", report["direct_create_s"], report["service_create_s"]),
        ("create p50 (ms)", report["direct_p50_ms"], report["service_p50_ms"]),
        ("create p99 (ms)", report["direct_p99_ms"], report["service_p99_ms"]),
        (
            "markers/s (one per call)",
            report["direct_markers_per_s"],
            report["service_markers_per_s"],
        ),
        (f"listing (s, {wall})", report["direct_list_s"], report["service_list_s"]),
        (f"deletion (s, {wall})", report["direct_delete_s"], report["service_delete_s"]),
    ]
    modelled = report["model_latency_ms"] is not None
    if modelled:
        rows += [
            (
                "listing on S3 (s, model)",
                report["direct_list_model_s"],
                report["service_list_model_s"],
            ),
            (
                "deletion on S3 (s, model)",
                report["direct_delete_model_s"],
                report["service_delete_model_s"],
            ),
        ]
    lines = [
        f"{report['markers']:,} markers, {report['writers']} writers, {report['storage']} storage "
        f"({wall}), +{report['latency_ms']:g} ms per request",
        f"{'':48} {'direct':>14} {'service':>14} {'direct/service':>15}",
    ]
    for label, direct, service in rows:
        lines.append(f"{label:48} {direct:>14,.3f} {service:>14,.3f} {_ratio(direct, service):>15}")
    if modelled:
        lines.append(
            f"S3 model: requests x {report['model_latency_ms']:g} ms, one after another; "
            f"listing {_requests(report['direct_list_requests'])} direct vs "
            f"{_requests(report['service_list_requests'])} service; deletion "
            f"{_requests(report['direct_delete_requests'])} vs "
            f"{_requests(report['service_delete_requests'])}"
        )
    lines += [
        f"service storage requests while creating: {_requests(report['service_create_requests'])} "
        f"over {report['service_flushes']:,} flushes ({_per_flush(report)} per flush)",
        f"service MARKERS files: {report['service_markers_files']} "
        "(plus MARKERS.type and the lease)",
        f"bare gRPC echo ceiling: {report['echo_calls_per_s']:,.0f} calls/s, "
        f"p99 {report['echo_p99_ms']:.1f} ms; "
        f"CreateMarker reaches {report['service_vs_echo']:.0%} of it",
        f"batching bound: {report['writers']} writers, one create each per "
        f"{report['batch_interval_ms']:g} ms tick = {report['batch_bound_calls_per_s']:,.0f}/s; "
        f"CreateMarker reaches {report['service_vs_ceiling']:.0%} of the lower ceiling",
        f"server CPU: {report['service_cpu_ms_per_create']:.3f} ms per CreateMarker, "
        f"{report['echo_cpu_ms_per_call']:.3f} ms per echo call",
        f"CreateMarkers x{report['service_many_batch_size']}: "
        f"{report['service_many_markers_per_s']:,.0f} markers/s",
        "references (quoted, not measured here):",
        *(
            f"  {reference['what']}: {reference['figure']} ({reference['source']})"
            for reference in report["references"]
        ),
    ]
    return "\n".join(lines)


def readme_rows(result: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(benchmark, Tidemark, baseline, ratio) rows of the README's table from one
    ``--json`` result. Both columns of a row were measured in that run (the S3 model rows
    from its counted requests); wall times say what stood in for S3 (moto: an emulator)."""
    wall = result["storage_server"]
    title = (
        f"`bench markers --markers {result['markers']} --writers {result['writers']} "
        f"--storage {result['storage']} --latency-ms {result['latency_ms']:g}`"
    )
    direct_create = sum(result["direct_create_requests"].values())
    return [
        (
            f"{title}: objects created",
            f"{result['service_objects']:,}: {result['service_markers_files']} `MARKERS` files "
            "+ `MARKERS.type` + the dir's lease",
            f"{result['direct_objects']:,} direct marker objects",
            f"{result['direct_objects'] / result['service_objects']:,.0f}x fewer",
        ),
        (
            "same: storage requests to create the markers",
            f"{result['service_requests']:,} ({result['service_flushes']:,} flushes; "
            f"per flush {_per_flush(result)})",
            f"{direct_create:,} direct",
            f"{direct_create / result['service_requests']:,.0f}x fewer",
        ),
        *_model_rows(result),
        (
            f"same: listing / deletion wall time ({wall})",
            f"{result['service_list_s']:.3f} s / {result['service_delete_s']:.3f} s",
            f"{result['direct_list_s']:.3f} s / {result['direct_delete_s']:.3f} s",
            f"{_ratio(result['direct_list_s'], result['service_list_s'])} / "
            f"{_ratio(result['direct_delete_s'], result['service_delete_s'])} ({wall})",
        ),
        (
            f"same: creation wall time ({wall})",
            f"{result['service_create_s']:.1f} s",
            f"{result['direct_create_s']:.1f} s direct",
            f"{_ratio(result['direct_create_s'], result['service_create_s'])} ({wall})",
        ),
        (
            "same: single creates vs bare grpc.aio echo and the batching bound (writers per "
            f"{result['batch_interval_ms']:g} ms tick)",
            f"{result['service_markers_per_s']:,.0f}/s",
            f"echo {result['echo_calls_per_s']:,.0f}/s; bound "
            f"{result['batch_bound_calls_per_s']:,.0f}/s",
            f"{result['service_vs_echo']:.0%} of echo; {result['service_vs_ceiling']:.0%} of "
            "the lower",
        ),
        (
            "same: server CPU per single create vs per echo call (user + system, load-robust)",
            f"{result['service_cpu_ms_per_create']:.3f} ms",
            f"{result['echo_cpu_ms_per_call']:.3f} ms",
            f"{result['service_cpu_ms_per_create'] / result['echo_cpu_ms_per_call']:.2f}x echo's",
        ),
        (
            "same: create p99 (p50)",
            f"{result['service_p99_ms']:.1f} ms ({result['service_p50_ms']:.1f} ms)",
            f"echo p99 {result['echo_p99_ms']:.1f} ms",
            f"{result['service_p99_ms'] / result['echo_p99_ms']:.2f}x echo's",
        ),
        (
            f"same: CreateMarkers ({result['service_many_batch_size']:,} per call)",
            f"{result['service_many_markers_per_s']:,.0f} markers/s",
            f"single creates {result['service_markers_per_s']:,.0f}/s",
            f"{result['service_many_markers_per_s'] / result['service_markers_per_s']:,.0f}x",
        ),
    ]


def _model_rows(result: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """The S3 model's row of ``readme_rows``: none for a local run."""
    model_ms = result["model_latency_ms"]
    if model_ms is None:
        return []
    service_list, service_delete = result["service_list_model_s"], result["service_delete_model_s"]
    direct_list, direct_delete = result["direct_list_model_s"], result["direct_delete_model_s"]
    return [
        (
            f"same: listing / deletion on S3, modelled (counted requests x {model_ms:g} ms, "
            "one after another)",
            f"{service_list:.2f} s / {service_delete:.2f} s "
            f"({_requests(result['service_list_requests'])} / "
            f"{_requests(result['service_delete_requests'])})",
            f"{direct_list:.2f} s / {direct_delete:.2f} s "
            f"({_requests(result['direct_list_requests'])} / "
            f"{_requests(result['direct_delete_requests'])})",
            f"{_ratio(direct_list, service_list)} / {_ratio(direct_delete, service_delete)}",
        )
    ]
