"""Stateless traffic over several replicas: ``dns:///`` targets, round robin, connections
closed at their maximum age, keepalive and message limits from the same numbers on both
sides, large messages; against real ``tidemark serve`` processes on loopback."""

from __future__ import annotations

import random
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from marker.conftest import INSTANT, as_table, stored_markers

from tidemark.clients.marker import ServiceMarkerReader, ServiceMarkerWriter, check_reachable
from tidemark.config import ClientConfig, ServerConfig
from tidemark.rpc.client import channel_for
from tidemark.rpc.options import (
    AGE_JITTER,
    MAX_RECONNECT_BACKOFF_MS,
    client_options,
    jittered_ms,
    server_options,
)
from tidemark.rpc.server import advertise_address
from tidemark.services.marker import FULL_NAME as MARKER
from tidemark.table.writes.markers import IOType, MarkerSpec, marker_name

from .conftest import WAIT_S, StartReplica, client_ports, connected_to_all, round_robin_target

CLIENT = ClientConfig(timeout_s=10.0, max_attempts=3, max_total_s=20.0, initial_backoff_s=0.05)


def test_a_dns_target_reaches_the_service(start_replica: StartReplica, local_root: str) -> None:
    replica = start_replica("marker")
    target = f"dns:///localhost:{replica.port}"
    check_reachable(target, CLIENT)
    writer = ServiceMarkerWriter(MarkerSpec("service", as_table(local_root), INSTANT, target))

    assert writer.create("p=1", "a.parquet", IOType.CREATE)
    assert not writer.create("p=1", "a.parquet", IOType.CREATE)
    assert stored_markers(local_root) == ["p=1/a.parquet.marker.CREATE"]


def test_calls_spread_round_robin_over_three_replicas(
    start_replica: StartReplica, local_root: str
) -> None:
    replicas = [start_replica("marker") for _ in range(3)]
    reader = ServiceMarkerReader(round_robin_target(replicas), as_table(local_root), CLIENT)
    assert not reader.dir_exists(INSTANT)
    connected_to_all(replicas)

    for _ in range(59):
        assert not reader.dir_exists(INSTANT)

    calls = [replica.calls(MARKER, "MarkerDirExists") for replica in replicas]
    assert sum(calls) == 60
    assert min(calls) > 0, calls


def test_connections_close_at_their_maximum_age_without_failing_calls(
    start_replica: StartReplica, local_root: str
) -> None:
    replica = start_replica("marker", args=["--max-connection-age-s", "0.5"])
    reader = ServiceMarkerReader(replica.address, as_table(local_root), CLIENT)
    seen: set[int] = set()
    deadline = time.monotonic() + WAIT_S
    while len(seen) < 3 and time.monotonic() < deadline:
        assert not reader.dir_exists(INSTANT)  # every call succeeds, across the closes
        seen |= client_ports(replica.port)
        time.sleep(0.05)
    assert len(seen) >= 3


def test_the_advertise_address_defaults_to_the_bound_host_and_port() -> None:
    assert advertise_address(ServerConfig(host="10.0.0.7"), 50051) == "10.0.0.7:50051"
    assert advertise_address(ServerConfig(host="0.0.0.0"), 50051) == f"{socket.gethostname()}:50051"
    given = ServerConfig(host="0.0.0.0", advertise_address="marker-1.markers.lake.svc:50051")
    assert advertise_address(given, 50051) == "marker-1.markers.lake.svc:50051"


def test_server_connection_ages_are_jittered_ten_percent() -> None:
    rng = random.Random(25)
    ages = [jittered_ms(300.0, rng) for _ in range(1000)]
    assert min(ages) >= 300_000 * (1 - AGE_JITTER)
    assert max(ages) <= 300_000 * (1 + AGE_JITTER)
    assert len(set(ages)) > 900


def test_server_and_client_options_come_from_the_same_numbers() -> None:
    numbers = {"max_message_bytes": 5, "keepalive_time_ms": 7, "keepalive_timeout_ms": 11}
    client = dict(client_options(target="dns:///replicas:1", **numbers))
    server = dict(
        server_options(
            max_message_bytes=5,
            keepalive_time_ms=7,
            keepalive_timeout_ms=11,
            max_connection_age_ms=13,
            max_connection_age_grace_ms=17,
        )
    )
    assert server["grpc.http2.min_ping_interval_without_data_ms"] == 3
    for key in (
        "grpc.max_send_message_length",
        "grpc.max_receive_message_length",
        "grpc.keepalive_time_ms",
        "grpc.keepalive_timeout_ms",
    ):
        assert client[key] == server[key]
    assert '"round_robin"' in str(client["grpc.service_config"])
    assert "grpc.service_config" not in dict(client_options(target="host:1", **numbers))
    assert client["grpc.max_reconnect_backoff_ms"] == MAX_RECONNECT_BACKOFF_MS < 120_000
    assert (server["grpc.max_connection_age_ms"], server["grpc.max_connection_age_grace_ms"]) == (
        13,
        17,
    )
    defaults = ServerConfig(), ClientConfig()
    assert defaults[0].keepalive_time_ms == defaults[1].keepalive_time_ms
    assert defaults[0].max_message_bytes == defaults[1].max_message_bytes


@pytest.mark.parametrize(("server_keepalive_ms", "kept"), [(1_000, True), (30_000, False)])
def test_a_client_pinging_at_the_agreed_rate_keeps_its_connection(
    start_replica: StartReplica, server_keepalive_ms: int, kept: bool
) -> None:
    """Client and server at the same keepalive (1 s, gRPC's shortest): the idle
    connection outlives many pings. A server set for 30 s takes pings every second as
    abuse and closes the connection (GOAWAY too_many_pings after three early pings), so
    the client's next call opens another: what agreeing options prevent."""
    replica = start_replica("marker", env={"TIDEMARK_KEEPALIVE_TIME_MS": str(server_keepalive_ms)})
    config = ClientConfig(keepalive_time_ms=1_000, keepalive_timeout_ms=5_000)
    request = health_pb2.HealthCheckRequest(service=MARKER)
    with channel_for(replica.address, config=config) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        assert health.Check(request, timeout=10).status == health_pb2.HealthCheckResponse.SERVING
        (first,) = client_ports(replica.port)
        time.sleep(6.0)  # idle: six pings at the client's rate
        assert health.Check(request, timeout=10).status == health_pb2.HealthCheckResponse.SERVING
        assert (client_ports(replica.port) == {first}) is kept


def test_a_batch_larger_than_grpcs_default_limit_goes_through(
    start_replica: StartReplica, local_root: str
) -> None:
    """gRPC refuses messages over 4 MiB unless both sides raise the limit: 40,000 markers
    (about 5 MiB, created in calls under the CreateMarkers limit) and the one listing of
    them cross a ``dns:///`` channel."""
    replica = start_replica("marker")
    target = f"dns:///localhost:{replica.port}"
    writer = ServiceMarkerWriter(MarkerSpec("service", as_table(local_root), INSTANT, target))
    markers = [("p=" + "x" * 60, f"{index:040d}.parquet", IOType.CREATE) for index in range(40_000)]
    request_bytes = sum(len(marker_name(*marker)) for marker in markers)
    assert request_bytes > 4 * 1024 * 1024

    assert all(writer.create_many(markers))

    listed = ServiceMarkerReader(target, local_root, CLIENT).all_markers(INSTANT)
    assert listed == {marker_name(*marker) for marker in markers}
    assert len(stored_markers(local_root)) == len(markers)


@pytest.mark.parametrize("stop", ["kill", "close"])
def test_calls_over_three_replicas_survive_losing_one(
    start_replica: StartReplica, local_root: str, stop: str
) -> None:
    """Readers call round robin over three replicas from eight threads; one replica is
    killed with -9 (or stopped with SIGTERM) midway: no call fails, the retries and the
    round robin carry them to the two others."""
    replicas = [start_replica("marker") for _ in range(3)]
    reader = ServiceMarkerReader(round_robin_target(replicas), as_table(local_root), CLIENT)
    assert not reader.dir_exists(INSTANT)
    connected_to_all(replicas)
    answered = threading.Semaphore(0)

    def read(count: int) -> list[bool]:
        answers = []
        for _ in range(count):
            answers.append(reader.dir_exists(INSTANT))
            answered.release()
        return answers

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(read, 100) for _ in range(8)]
        for _ in range(200):
            answered.acquire()
        getattr(replicas[0].process, stop)()
        answers = [answer for future in futures for answer in future.result()]

    assert answers == [False] * 800
    assert replicas[0].process.process.poll() is not None
    assert all(replica.calls(MARKER, "MarkerDirExists") > 0 for replica in replicas[1:])


def test_a_service_restarted_on_its_address_answers_the_next_call(
    start_replica: StartReplica, local_root: str
) -> None:
    """A plain ``host:port`` keeps pick_first, which reconnects on the next call: the
    process's cached channel reaches a service restarted on the same port at once
    (round robin would fail calls until its reconnect backoff ends)."""
    first = start_replica("marker")
    address = f"127.0.0.1:{first.port}"
    reader = ServiceMarkerReader(address, as_table(local_root), CLIENT)
    assert reader.dir_exists(INSTANT) is False
    first.process.kill()
    time.sleep(8)
    start_replica("marker", args=["--port", str(first.port)])

    assert reader.dir_exists(INSTANT) is False
