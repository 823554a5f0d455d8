"""Health follows a replica's life: NOT_SERVING until its services' readiness checks
passed, SERVING then, NOT_SERVING from SIGTERM on while in-flight calls drain."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tidemark.config import ServerConfig
from tidemark.rpc.registry import Closeable, ServiceContext, ServiceDefinition
from tidemark.rpc.server import RunningServer, build_server
from tidemark.services.marker import FULL_NAME as MARKER
from tidemark.testing.s3local import free_port

from .conftest import WAIT_S, StartReplica

WARMING = "tidemark.test.v1.Warming"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class Warming:
    """A service whose readiness check waits until the test lets it pass (or fail)."""

    def __init__(self) -> None:
        self.checking = threading.Event()
        self.release = threading.Event()
        self.fail = False
        self.closed = False

    def add_to_server(self, server: grpc.aio.Server, context: ServiceContext) -> Closeable:
        context.ready_when(self.ready)
        return self

    async def ready(self) -> None:
        self.checking.set()
        await asyncio.to_thread(self.release.wait, WAIT_S)
        if self.fail:
            raise RuntimeError("cache load failed")

    def close(self) -> None:
        self.closed = True


def status(port: int, service: str) -> health_pb2.HealthCheckResponse.ServingStatus:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        request = health_pb2.HealthCheckRequest(service=service)
        return health_pb2_grpc.HealthStub(channel).Check(request, timeout=10).status


@pytest.fixture
def warming() -> Iterator[Warming]:
    service = Warming()
    yield service
    service.release.set()


def start_in_thread(
    config: ServerConfig, service: Warming
) -> tuple[threading.Thread, list[object]]:
    """``build_server`` on a thread (it returns once ready); the result or error lands in
    the list."""
    outcome: list[object] = []
    definition = ServiceDefinition("warming", WARMING, service.add_to_server)

    def build() -> None:
        try:
            outcome.append(build_server(config, [definition]))
        except Exception as error:
            outcome.append(error)

    thread = threading.Thread(target=build)
    thread.start()
    return thread, outcome


def test_not_serving_until_the_readiness_checks_passed(warming: Warming) -> None:
    port, health_port = free_port(), free_port()
    config = ServerConfig(port=port, metrics_port=0, health_port=health_port)
    thread, outcome = start_in_thread(config, warming)
    assert warming.checking.wait(WAIT_S)

    for checked in (port, health_port):
        assert status(checked, "") == NOT_SERVING
        assert status(checked, WARMING) == NOT_SERVING
    warming.release.set()
    thread.join()

    (running,) = outcome
    assert isinstance(running, RunningServer)
    try:
        assert status(port, "") == status(port, WARMING) == SERVING
        assert status(health_port, "") == SERVING
    finally:
        running.stop(0)
    assert warming.closed


def test_a_failed_readiness_check_stops_the_server(warming: Warming) -> None:
    port = free_port()
    thread, outcome = start_in_thread(ServerConfig(port=port, metrics_port=0), warming)
    assert warming.checking.wait(WAIT_S)
    warming.fail = True
    warming.release.set()
    thread.join()

    (error,) = outcome
    assert isinstance(error, RuntimeError)
    assert warming.closed
    with pytest.raises(grpc.RpcError) as refused:
        status(port, "")
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


def test_sigterm_reports_not_serving_while_calls_drain(start_replica: StartReplica) -> None:
    """A health Watch stream on the main port is a call in flight: the replica drains it
    for up to its grace period, and meanwhile both ports say NOT_SERVING."""
    health_port = free_port()
    replica = start_replica(
        "marker", args=["--health-port", str(health_port), "--grace-period", "60"]
    )
    assert status(health_port, "") == status(replica.port, MARKER) == SERVING
    with grpc.insecure_channel(replica.address) as channel:
        watch = health_pb2_grpc.HealthStub(channel).Watch(
            health_pb2.HealthCheckRequest(service=""), timeout=WAIT_S
        )
        assert next(watch).status == SERVING

        replica.process.process.send_signal(signal.SIGTERM)

        assert next(watch).status == NOT_SERVING
        assert status(health_port, "") == NOT_SERVING
        assert status(health_port, MARKER) == NOT_SERVING
        assert replica.process.process.poll() is None  # still draining the watch
        watch.cancel()
    assert replica.process.process.wait(WAIT_S) == 0
