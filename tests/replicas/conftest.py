"""Several ``tidemark serve`` replicas on loopback, and what tests observe of them: the
TCP connections a client holds to one, and the calls each one counted in its metrics."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from marker.conftest import metric

from tidemark.rpc.process import ServeProcess
from tidemark.testing.s3local import free_port

ESTABLISHED = "01"
WAIT_S = 30.0
"""Bound of the loops that wait for something to happen (never asserted on)."""


class Replica:
    """A serve process and its metrics port."""

    def __init__(self, process: ServeProcess, metrics_port: int) -> None:
        self.process = process
        self.metrics_port = metrics_port
        self.address = process.address
        self.port = int(process.address.rpartition(":")[2])

    def calls(self, service: str, method: str) -> float:
        """Calls of ``method`` this replica started, from its /metrics."""
        return metric(
            self.metrics_port, "grpc_server_started_total", grpc_service=service, grpc_method=method
        )


StartReplica = Callable[..., Replica]


@pytest.fixture
def start_replica() -> Iterator[StartReplica]:
    """``start_replica("marker", env={...}, args=[...])``: killed at teardown if running."""
    started: list[Replica] = []

    def start(
        service: str, *, env: dict[str, str] | None = None, args: Sequence[str] = ()
    ) -> Replica:
        metrics_port = free_port()
        process = ServeProcess(
            service,
            env=env,
            args=["--metrics-port", str(metrics_port), "--log-format", "console", *args],
        )
        replica = Replica(process, metrics_port)
        started.append(replica)
        return replica

    yield start
    for replica in started:
        if replica.process.process.poll() is None:
            replica.process.kill()


def client_ports(server_port: int) -> set[int]:
    """Local ports of the established loopback connections to ``server_port`` (the
    clients' ends, from /proc/net/tcp and tcp6, where gRPC's IPv4 sockets may show as
    IPv4-mapped): a new port is a new connection."""
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, remote, state = line.split()[1:4]
            if state == ESTABLISHED and int(remote.rpartition(":")[2], 16) == server_port:
                ports.add(int(local.rpartition(":")[2], 16))
    return ports


def connected_to_all(replicas: Sequence[Replica]) -> None:
    """Wait (at most ``WAIT_S``) until this process holds a connection to every replica:
    a round-robin channel connects to all its addresses at once but sends calls only
    over the connections ready, so calls made at its start may all go to the first."""
    deadline = time.monotonic() + WAIT_S
    while not all(client_ports(replica.port) for replica in replicas):
        assert time.monotonic() < deadline, "not connected to every replica"
        time.sleep(0.01)


def round_robin_target(replicas: Sequence[Replica]) -> str:
    """One ``ipv4:`` target listing every replica, as ``dns:///`` resolves a headless
    Service's name to every pod."""
    return "ipv4:" + ",".join(replica.address for replica in replicas)
