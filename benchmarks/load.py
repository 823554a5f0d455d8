"""``python -m benchmarks load``: the three services under sustained load, with their memory.

For ``--duration-s`` (default 10 minutes) at once, each service a ``tidemark serve``
process on loopback over local-disk tables: ``--marker-writers`` concurrent CreateMarker
callers (one marker dir per round of ``--markers-per-instant`` markers, listed back and
checked, then deleted, as a write's reconcile does); ``--lookup-streams`` concurrent
callers each looking up ``--lookup-keys`` keys per call (a tenth of them absent) in an
index of ``--index-entries`` keys, every answer checked; and one client per table
scheduling and cancelling clustering plans on ``--planner-tables`` tables, each with a
trigger policy that plans it every second as well. Load comes from spawned processes
(Python clients are CPU-bound; one process cannot load a server on two cores).

Each load reports throughput, p50/p99 latency, errors (failed calls and wrong answers:
must be 0) and its server's RSS sampled every ``--rss-interval-s``; the RSS is flat when
its peak over the second half of the run is within ``RSS_FLAT_GROWTH`` of the peak over
the first half (warm-up included there). Each server's health is checked as a kubelet's
gRPC probe does (``grpc.health.v1`` Check of the overall service on a new connection,
``HEALTH_TIMEOUT_S``) every ``--health-interval-s`` throughout: checks, failures (not
SERVING, or no answer in time: must be 0) and the slowest answer.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any, Literal

import grpc
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from benchmarks.markers import RPC_TIMEOUT_S, proto_marker
from benchmarks.report import run_in_temp_root
from tidemark.clients.index import IndexClient
from tidemark.clients.marker import ServiceMarkerReader
from tidemark.clients.planner import PlannerClient, plan_options
from tidemark.commands.args import positive_int
from tidemark.config import ClientConfig
from tidemark.index.build import build_index
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.marker.v1 import marker_service_pb2 as marker_pb
from tidemark.proto.marker.v1.marker_service_pb2_grpc import MarkerServiceStub
from tidemark.proto.planner.v1 import planner_service_pb2 as planner_pb
from tidemark.rpc.options import client_options
from tidemark.rpc.process import ServeProcess
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.properties.config import PROPERTIES_PATH, TableConfig, format_properties
from tidemark.table.timeline.instant import new_instant_time
from tidemark.testing.tables import commit_file_groups

LoadKind = Literal["markers", "lookups", "planner"]
KINDS: tuple[LoadKind, ...] = ("markers", "lookups", "planner")
RSS_FLAT_GROWTH = 0.10
AS_OF = "20240101000000000"
FILE_GROUPS = 1000
PARTITIONS = ("dt=2024-01-01", "dt=2024-01-02")
ROWS_PER_FILE = 50
ABSENT_FRACTION = 0.1
ERROR_SAMPLES = 3
TRIGGER_POLL_S = "1"
HEALTH_TIMEOUT_S = 1.0
"""A kubelet probe's default ``timeoutSeconds`` (the chart keeps it)."""
READINESS_FAILURE_THRESHOLD = 2
"""The chart's ``probes.readiness.failureThreshold``: this many failed checks in a row take
a pod out of its Service (one slow answer does not)."""


def register(bench_subparsers: Any) -> None:
    parser: argparse.ArgumentParser = bench_subparsers.add_parser(
        "load", help="the three services under sustained load", description=__doc__
    )
    parser.add_argument("--duration-s", type=positive_int, default=600, help="seconds of load")
    parser.add_argument("--marker-writers", type=positive_int, default=240)
    parser.add_argument("--markers-per-instant", type=positive_int, default=10_000)
    parser.add_argument("--lookup-streams", type=positive_int, default=32)
    parser.add_argument("--lookup-keys", type=positive_int, default=100_000, help="per call")
    parser.add_argument("--index-entries", type=positive_int, default=1_000_000)
    parser.add_argument("--planner-tables", type=positive_int, default=50)
    parser.add_argument("--files-per-table", type=positive_int, default=20)
    parser.add_argument(
        "--processes", type=positive_int, default=2, help="load processes per service"
    )
    parser.add_argument("--rss-interval-s", type=float, default=1.0)
    parser.add_argument("--health-interval-s", type=float, default=1.0)
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    parser.set_defaults(handler=run)


def bench_table_config() -> TableConfig:
    """A table keyed by a string ``uid``, partitioned by ``dt`` (the index benches' too)."""
    schema = (
        '{"type":"record","name":"bench","fields":[{"name":"uid","type":"string"},'
        '{"name":"dt","type":"string"}]}'
    )
    return TableConfig(
        name="bench",
        record_key_fields=("uid",),
        partition_fields=("dt",),
        precombine_field=None,
        hive_style=False,
        avro_schema=schema,
        key_generator_class=TableConfig.default_key_generator(("uid",), ("dt",)),
    )


@dataclass(frozen=True)
class LoadSpec:
    """One load process: what it calls, where, with how many concurrent callers."""

    kind: LoadKind
    address: str
    tables: tuple[str, ...]
    callers: int
    duration_s: float
    items_per_call: int = 1
    entries: int = 0
    seed: int = 0


@dataclass
class LoadOutcome:
    """What one load process did: its calls' latencies and items, and what went wrong."""

    started: float = 0.0
    finished: float = 0.0
    latencies: list[float] = field(default_factory=list)
    items: int = 0
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    extra: int = 0
    """Kind-specific count: marker dirs checked; plans the triggers made."""

    def fail(self, what: str) -> None:
        self.errors += 1
        if len(self.error_samples) < ERROR_SAMPLES:
            self.error_samples.append(what)

    def timed(self, began: float, items: int) -> None:
        self.latencies.append(time.perf_counter() - began)
        self.items += items


async def _marker_load(spec: LoadSpec, outcome: LoadOutcome, deadline: float) -> None:
    """Rounds of ``items_per_call`` markers on a new instant by ``callers`` tasks; each
    round's dir is listed back (every marker must be there) and deleted."""
    (table_uri,) = spec.tables
    options = client_options(
        target=spec.address,
        max_message_bytes=ClientConfig().max_message_bytes,
        keepalive_time_ms=ClientConfig().keepalive_time_ms,
        keepalive_timeout_ms=ClientConfig().keepalive_timeout_ms,
    )
    reader = ServiceMarkerReader(spec.address, table_uri)
    table = TableRef(base_path=table_uri)
    instant = new_instant_time()
    async with grpc.aio.insecure_channel(spec.address, options=options) as channel:
        stub = MarkerServiceStub(channel)
        while time.time() < deadline:
            numbers = iter(range(spec.items_per_call))
            created: set[int] = set()

            async def writer(instant: str, numbers: Iterator[int], created: set[int]) -> None:
                for number in numbers:
                    if time.time() >= deadline:
                        return
                    request = marker_pb.CreateMarkerRequest(
                        table=table, instant_time=instant, marker=proto_marker(number, instant)
                    )
                    began = time.perf_counter()
                    try:
                        await stub.CreateMarker(request, timeout=RPC_TIMEOUT_S)
                    except grpc.aio.AioRpcError as error:
                        outcome.fail(f"CreateMarker: {error.code().name} {error.details()}")
                        continue
                    outcome.timed(began, 1)
                    created.add(number)

            await asyncio.gather(*(writer(instant, numbers, created) for _ in range(spec.callers)))
            await asyncio.to_thread(_check_and_delete, reader, instant, len(created), outcome)
            instant = new_instant_time(after=instant)


def _check_and_delete(
    reader: ServiceMarkerReader, instant: str, created: int, outcome: LoadOutcome
) -> None:
    try:
        listed = len(reader.all_markers(instant))
        reader.delete_dir(instant)
    except Exception as error:  # every failure is counted, the load goes on
        outcome.fail(f"list/delete {instant}: {error}")
        return
    outcome.extra += 1
    if listed != created:
        outcome.fail(f"{instant}: {created} markers created, {listed} listed")


def lookup_keys(numbers: np.ndarray) -> pa.Array:
    """Key ``n``: ``uid-<n>``, zero-padded (keys at or past the entry count are absent)."""
    return pa.array(np.char.add("uid-", np.char.zfill(numbers.astype(str), 10)), pa.string())


def file_ids() -> pa.Array:
    return pa.array([f"{group:08d}-aaaa-bbbb-cccc-dddddddddddd-0" for group in range(FILE_GROUPS)])


def _lookup_load(spec: LoadSpec, outcome: LoadOutcome, deadline: float) -> None:
    """``callers`` threads, each looking up ``items_per_call`` random keys per call and
    checking every answer: present keys at their file group, absent ones null."""
    (table_uri,) = spec.tables
    groups = file_ids()
    guard = threading.Lock()

    def stream(seed: int) -> None:
        rng = np.random.default_rng(seed)
        client = IndexClient(spec.address, table_uri)
        space = int(spec.entries / (1 - ABSENT_FRACTION))
        while time.time() < deadline:
            numbers = rng.integers(0, space, spec.items_per_call)
            keys = lookup_keys(numbers)
            expected = groups.take(pa.array(numbers % FILE_GROUPS))
            present = pa.array(numbers < spec.entries)
            began = time.perf_counter()
            try:
                answer = client.lookup(keys)
            except Exception as error:  # every failure is counted, the load goes on
                with guard:
                    outcome.fail(f"Lookup: {error}")
                continue
            with guard:
                outcome.timed(began, len(keys))
            wrong = pc.sum(
                pc.invert(
                    pc.if_else(
                        present,
                        pc.fill_null(pc.equal(answer["file_id"], expected), False),
                        pc.is_null(answer["file_id"]),
                    )
                )
            ).as_py()
            if wrong:
                with guard:
                    outcome.fail(f"Lookup: {wrong} of {len(keys)} keys answered wrongly")

    threads = [
        threading.Thread(target=stream, args=(spec.seed * 1000 + caller,))
        for caller in range(spec.callers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _planner_load(spec: LoadSpec, outcome: LoadOutcome, deadline: float) -> None:
    """One thread per table: schedule a plan, then cancel every pending plan (the one it
    got and those the table's trigger made), as cluster runs would consume them."""
    options = plan_options(small_file_limit_bytes=1 << 20, target_file_bytes=1 << 20)
    guard = threading.Lock()

    def schedule_and_cancel(table: str) -> None:
        planner = PlannerClient(spec.address)
        while time.time() < deadline:
            began = time.perf_counter()
            try:
                scheduled = planner.schedule(table, options).plan.instant_time
                with guard:
                    outcome.timed(began, 1)
                for plan in planner.list_plans(table):
                    planner.cancel_plan(table, plan.instant_time)
                    if plan.instant_time != scheduled:
                        with guard:
                            outcome.extra += 1
            except Exception as error:  # every failure is counted, the load goes on
                with guard:
                    outcome.fail(f"{table}: {error}")

    threads = [threading.Thread(target=schedule_and_cancel, args=(t,)) for t in spec.tables]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _load_process(spec: LoadSpec, barrier: Barrier, results: Any) -> None:
    """Entry point of a spawned load process: starts with the others, runs the duration."""
    outcome = LoadOutcome()
    barrier.wait()
    outcome.started = time.time()
    deadline = outcome.started + spec.duration_s
    if spec.kind == "markers":
        asyncio.run(_marker_load(spec, outcome, deadline))
    elif spec.kind == "lookups":
        _lookup_load(spec, outcome, deadline)
    else:
        _planner_load(spec, outcome, deadline)
    outcome.finished = time.time()
    results.put((spec.kind, outcome))


class RssSampler:
    """Samples the resident memory of server processes (and their workers) in a thread."""

    def __init__(self, pids: dict[LoadKind, int], interval_s: float) -> None:
        self.pids = pids
        self.interval_s = interval_s
        self.samples: dict[LoadKind, list[tuple[float, float]]] = {kind: [] for kind in pids}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.started = time.time()

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.time() - self.started
            for kind, pid in self.pids.items():
                self.samples[kind].append((round(now, 2), rss_mib(pid)))
            self._stop.wait(self.interval_s)


class HealthProber:
    """Checks each server's overall health every ``interval_s`` in a thread per server, on
    a new connection each time (as a kubelet's gRPC probe): what failed, and the slowest
    answer."""

    def __init__(self, addresses: dict[LoadKind, str], interval_s: float) -> None:
        self.interval_s = interval_s
        self.checks: dict[LoadKind, list[float]] = {kind: [] for kind in addresses}
        self.failures: dict[LoadKind, list[str]] = {kind: [] for kind in addresses}
        self.longest_streak: dict[LoadKind, int] = dict.fromkeys(addresses, 0)
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(kind, address), daemon=True)
            for kind, address in addresses.items()
        ]

    def __enter__(self) -> HealthProber:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _run(self, kind: LoadKind, address: str) -> None:
        streak = 0
        while not self._stop.is_set():
            began = time.perf_counter()
            failure = check_health(address)
            self.checks[kind].append(time.perf_counter() - began)
            streak = 0 if failure is None else streak + 1
            self.longest_streak[kind] = max(self.longest_streak[kind], streak)
            if failure is not None:
                self.failures[kind].append(failure)
            self._stop.wait(max(0.0, self.interval_s - (time.perf_counter() - began)))

    def summary(self, kind: LoadKind) -> dict[str, Any]:
        failures = self.failures[kind]
        return {
            "health_checks": len(self.checks[kind]),
            "health_failures": len(failures),
            "health_failure_streak": self.longest_streak[kind],
            "health_failure_samples": failures[:ERROR_SAMPLES],
            "health_max_ms": max(self.checks[kind], default=0.0) * 1000,
        }


def check_health(address: str) -> str | None:
    """None when ``address`` answers SERVING within ``HEALTH_TIMEOUT_S``, else what it
    answered."""
    with grpc.insecure_channel(address) as channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=HEALTH_TIMEOUT_S
            )
        except grpc.RpcError as error:
            return f"{error.code().name} {error.details()}"
    if response.status != health_pb2.HealthCheckResponse.SERVING:
        return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
    return None


def rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` and its child processes, in MiB (0 once it is gone)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    return kib / 1024 + sum(rss_mib(int(child)) for child in children)


def rss_summary(samples: list[tuple[float, float]]) -> dict[str, Any]:
    """Peak RSS over each half of the run and the growth from the first to the second."""
    values = [mib for _, mib in samples]
    half = len(values) // 2
    first, second = max(values[: max(half, 1)]), max(values[half:])
    growth = (second - first) / first
    return {
        "rss_mib": samples,
        "rss_max_mib": max(values),
        "rss_first_half_max_mib": first,
        "rss_second_half_max_mib": second,
        "rss_second_half_growth": growth,
        "rss_flat": growth <= RSS_FLAT_GROWTH,
    }


def summarize(outcomes: list[LoadOutcome], samples: list[tuple[float, float]]) -> dict[str, Any]:
    latencies = np.array([latency for outcome in outcomes for latency in outcome.latencies])
    wall_s = max(o.finished for o in outcomes) - min(o.started for o in outcomes)
    items = sum(o.items for o in outcomes)
    return {
        "calls": len(latencies),
        "items": items,
        "wall_s": wall_s,
        "calls_per_s": len(latencies) / wall_s,
        "items_per_s": items / wall_s,
        "p50_ms": float(np.percentile(latencies, 50) * 1000) if len(latencies) else None,
        "p99_ms": float(np.percentile(latencies, 99) * 1000) if len(latencies) else None,
        "errors": sum(o.errors for o in outcomes),
        "error_samples": [sample for o in outcomes for sample in o.error_samples],
        "checked": sum(o.extra for o in outcomes),
        **rss_summary(samples),
    }


def marker_tables(root: Path, count: int) -> tuple[str, ...]:
    """``count`` tables (their ``hoodie.properties`` only: the marker service needs no
    more), one per load process so their instants never collide."""
    tables = []
    for number in range(count):
        uri = str(root / f"markers-{number}")
        open_storage(uri).write(
            PROPERTIES_PATH, format_properties({"hoodie.table.name": f"markers_{number}"})
        )
        tables.append(uri)
    return tuple(tables)


def indexed_table(root: Path, entries: int) -> str:
    """A table whose record index holds ``entries`` keys, key ``n`` in group ``n % 1000``."""
    uri = str(root / "indexed")
    table = HoodieTable.create(uri, bench_table_config())
    numbers = np.arange(entries)
    groups = pa.array(numbers % FILE_GROUPS)
    build_index(
        table.storage,
        lookup_keys(numbers),
        pa.array([PARTITIONS[0]] * entries, pa.string()),
        file_ids().take(groups),
        pa.array([AS_OF] * entries, pa.string()),
        as_of=AS_OF,
    )
    return uri


def small_files_table(uri: str, files: int) -> str:
    """A table with one commit of ``files`` small file groups over two partitions: the
    planner's size-based strategy plans them all."""
    table = HoodieTable.create(uri, bench_table_config())
    groups = []
    for number in range(files):
        partition = PARTITIONS[number % len(PARTITIONS)]
        uids = [f"uid-{number}-{row}" for row in range(ROWS_PER_FILE)]
        groups.append((partition, pa.table({"uid": uids, "dt": [partition] * ROWS_PER_FILE})))
    commit_file_groups(table, groups)
    return uri


@contextlib.contextmanager
def servers(tables: tuple[str, ...]) -> Iterator[dict[LoadKind, ServeProcess]]:
    """The three services, the planner watching ``tables`` for their triggers."""
    env = {
        "TIDEMARK_PLANNER_TABLES": ",".join(tables),
        "TIDEMARK_PLANNER_TRIGGER_POLL_S": TRIGGER_POLL_S,
    }
    args = ("--log-level", "warning")
    started: dict[LoadKind, ServeProcess] = {}
    try:
        for kind, service in zip(KINDS, ("marker", "index", "planner"), strict=True):
            started[kind] = ServeProcess(service, args=args, env=env)
        yield started
    finally:
        for server in started.values():
            server.close()


def spread(
    kind: LoadKind,
    address: str,
    tables: Sequence[tuple[str, ...]],
    callers: int,
    duration_s: float,
    **fields: int,
) -> list[LoadSpec]:
    """One load process per entry of ``tables``, sharing ``callers`` between them."""
    each = max(1, callers // len(tables))
    return [
        LoadSpec(kind, address, table, each, duration_s, seed=number, **fields)
        for number, table in enumerate(tables)
    ]


def load_specs(
    args: argparse.Namespace, addresses: dict[LoadKind, str], root: Path, planner: tuple[str, ...]
) -> list[LoadSpec]:
    processes, duration_s = args.processes, args.duration_s
    markers = [(table,) for table in marker_tables(root, processes)]
    indexed = [(indexed_table(root, args.index_entries),)] * processes
    return [
        *spread(
            "markers",
            addresses["markers"],
            markers,
            args.marker_writers,
            duration_s,
            items_per_call=args.markers_per_instant,
        ),
        *spread(
            "lookups",
            addresses["lookups"],
            indexed,
            args.lookup_streams,
            duration_s,
            items_per_call=args.lookup_keys,
            entries=args.index_entries,
        ),
        LoadSpec("planner", addresses["planner"], planner, len(planner), duration_s),
    ]


def measure(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    planner_tables = tuple(
        small_files_table(str(root / f"planned-{number}"), args.files_per_table)
        for number in range(args.planner_tables)
    )
    with servers(planner_tables) as started:
        addresses = {kind: server.address for kind, server in started.items()}
        policy = planner_pb.TriggerPolicy(
            every_seconds=1,
            options=plan_options(small_file_limit_bytes=1 << 20, target_file_bytes=1 << 20),
        )
        for table in planner_tables:
            PlannerClient(addresses["planner"]).set_policy(table, policy)
        specs = load_specs(args, addresses, root, planner_tables)
        context = multiprocessing.get_context("spawn")
        barrier = context.Barrier(len(specs) + 1)
        results = context.Queue()
        workers = [
            context.Process(target=_load_process, args=(spec, barrier, results)) for spec in specs
        ]
        for worker in workers:
            worker.start()
        barrier.wait()
        pids = {kind: server.pid for kind, server in started.items()}
        with (
            RssSampler(pids, args.rss_interval_s) as sampler,
            HealthProber(addresses, args.health_interval_s) as prober,
        ):
            outcomes: list[tuple[LoadKind, LoadOutcome]] = [results.get() for _ in workers]
        for worker in workers:
            worker.join()
            if worker.exitcode != 0:
                raise RuntimeError(f"load process exited with {worker.exitcode}")
    by_kind = {
        kind: {
            **summarize([o for k, o in outcomes if k == kind], sampler.samples[kind]),
            **prober.summary(kind),
        }
        for kind in KINDS
    }
    return {
        "duration_s": args.duration_s,
        "marker_writers": args.marker_writers,
        "markers_per_instant": args.markers_per_instant,
        "lookup_streams": args.lookup_streams,
        "lookup_keys": args.lookup_keys,
        "index_entries": args.index_entries,
        "planner_tables": args.planner_tables,
        "files_per_table": args.files_per_table,
        "processes": args.processes,
        "cpus": os.cpu_count(),
        "load_average_1m": os.getloadavg()[0],
        "rss_flat_growth": RSS_FLAT_GROWTH,
        **{kind: by_kind[kind] for kind in KINDS},
    }


UNITS: dict[LoadKind, str] = {"markers": "markers", "lookups": "keys", "planner": "schedules"}
CHECKED: dict[LoadKind, str] = {
    "markers": "marker dirs listed back",
    "lookups": "",
    "planner": "triggered plans",
}


def format_report(report: dict[str, Any]) -> str:
    lines = [
        f"{report['duration_s']} s of load at once: {report['marker_writers']} marker writers, "
        f"{report['lookup_streams']} lookup streams x {report['lookup_keys']:,} keys "
        f"(index of {report['index_entries']:,}), {report['planner_tables']} planner tables "
        f"with triggers; {report['processes']} load processes per service, "
        f"{report['cpus']} CPUs, load average {report['load_average_1m']:.1f}",
        f"{'load':10} {'items/s':>12} {'calls/s':>10} {'p50 ms':>9} {'p99 ms':>9} "
        f"{'errors':>7} {'RSS MiB 1st/2nd half':>21} {'flat':>5} {'health fail/checks':>19} "
        f"{'max ms':>7}",
    ]
    for kind in KINDS:
        load = report[kind]
        lines.append(
            f"{kind:10} {load['items_per_s']:>12,.0f} {load['calls_per_s']:>10,.1f} "
            f"{load['p50_ms'] or 0:>9.1f} {load['p99_ms'] or 0:>9.1f} {load['errors']:>7} "
            f"{load['rss_first_half_max_mib']:>10.0f}/{load['rss_second_half_max_mib']:<10.0f} "
            f"{'yes' if load['rss_flat'] else 'NO':>5} "
            f"{load['health_failures']:>9}/{load['health_checks']:<9} "
            f"{load['health_max_ms']:>7.0f}"
        )
    for kind in KINDS:
        load = report[kind]
        if CHECKED[kind]:
            lines.append(
                f"{kind}: {load['checked']:,} {CHECKED[kind]}; {UNITS[kind]} per second above"
            )
        for sample in load["error_samples"]:
            lines.append(f"{kind} error: {sample}")
        for sample in load["health_failure_samples"]:
            lines.append(f"{kind} health: {sample}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    report = run_in_temp_root(args, "tidemark-bench-load-", measure, format_report)
    failed = any(
        report[kind]["errors"]
        or report[kind]["health_failure_streak"] >= READINESS_FAILURE_THRESHOLD
        for kind in KINDS
    )
    return 1 if failed else 0
