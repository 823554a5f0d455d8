"""Three marker replicas on one table: one owner per marker dir, the others name it and
the client follows, and after kill -9 of the owner another replica takes its dirs over
once the lease ran out, with no acknowledged marker lost or stored twice."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import grpc
import pytest
from marker.conftest import INSTANT, as_table, create_request, metric, stored_markers

from tidemark.clients.marker import ServiceMarkerWriter
from tidemark.config import ClientConfig
from tidemark.proto.marker.v1.marker_service_pb2_grpc import MarkerServiceStub
from tidemark.rpc.client import channel_for
from tidemark.rpc.status import OWNER_KEY
from tidemark.services.marker import FULL_NAME as MARKER
from tidemark.storage import open_storage
from tidemark.table.writes.markers import (
    IOType,
    MarkerSpec,
    StorageMarkerReader,
    marker_lease_dir,
    marker_name,
)
from tidemark.testing.s3local import free_port

from .conftest import Replica, StartReplica, round_robin_target

LEASE_S = 2.0
SERVE_ENV = {"TIDEMARK_MARKER_LEASE_S": str(LEASE_S), "TIDEMARK_MARKER_BATCH_INTERVAL_MS": "10"}
CLIENT = ClientConfig(timeout_s=10.0, max_attempts=3, max_total_s=20.0, initial_backoff_s=0.05)
Marker = tuple[str, str, IOType]


@pytest.fixture
def replicas(start_replica: StartReplica) -> list[Replica]:
    return [start_replica("marker", env=SERVE_ENV) for _ in range(3)]


def lease_records(root: str) -> list[dict[str, object]]:
    """The instant's lease generations, oldest first."""
    directory = Path(root, marker_lease_dir(INSTANT))
    return [json.loads(path.read_bytes()) for path in sorted(directory.iterdir())]


def owner_of(replicas: Sequence[Replica], root: str) -> Replica:
    (owner,) = [r for r in replicas if r.address == lease_records(root)[-1]["address"]]
    return owner


def write_all(
    targets: Sequence[str],
    root: str,
    markers: Sequence[Sequence[Marker]],
    midway: Callable[[], None] | None = None,
) -> tuple[list[str], int]:
    """Writer ``i`` creates ``markers[i]`` one call each through ``targets[i]``, all at
    once; ``midway`` runs once half the markers are acknowledged, while the writers go
    on. Returns the markers acknowledged and how many were when ``midway`` returned
    (raises what a writer raised)."""
    acknowledged: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    half = threading.Event()
    total = sum(len(batch) for batch in markers)

    def write(target: str, batch: Sequence[Marker]) -> None:
        writer = ServiceMarkerWriter(MarkerSpec("service", root, INSTANT, target), CLIENT)
        try:
            for marker in batch:
                writer.create(*marker)
                with lock:
                    acknowledged.append(marker_name(*marker))
                    if 2 * len(acknowledged) >= total:
                        half.set()
        except BaseException as error:
            errors.append(error)
            half.set()

    threads = [
        threading.Thread(target=write, args=(target, batch))
        for target, batch in zip(targets, markers, strict=True)
    ]
    for thread in threads:
        thread.start()
    if midway is not None:
        half.wait()
        midway()
    with lock:
        at_midway = len(acknowledged)
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return acknowledged, at_midway


def test_writers_through_every_replica_reach_the_one_owner(
    replicas: list[Replica], local_root: str
) -> None:
    table = as_table(local_root)
    shared = [(f"p={i % 4}", f"f{i}.parquet", IOType.CREATE) for i in range(120)]
    targets = [*(r.address for r in replicas), round_robin_target(replicas)] * 2

    acknowledged, _ = write_all(targets, table, [shared] * len(targets))

    assert len(acknowledged) == len(shared) * len(targets)
    expected = sorted(marker_name(*marker) for marker in shared)
    assert sorted(stored_markers(table)) == expected  # each exactly once
    assert sorted(StorageMarkerReader(open_storage(table)).all_markers(INSTANT)) == expected
    (record,) = lease_records(table)  # one owner, never taken over
    owner = owner_of(replicas, table)
    assert record["address"] == owner.address


def test_writers_through_the_service_remember_the_owner_from_its_first_answer(
    replicas: list[Replica], local_root: str
) -> None:
    """Creates through one address balancing over three replicas: each writer's first
    answer names the owner (a redirect from a non-owner, or the owner's own answer), and
    every later create goes to the owner directly, none to a non-owner."""
    table = as_table(local_root)
    writers = 6
    per_writer = 40
    markers = [
        [(f"p={w}", f"f{i}.parquet", IOType.CREATE) for i in range(per_writer)]
        for w in range(writers)
    ]

    acknowledged, _ = write_all([round_robin_target(replicas)] * writers, table, markers)

    assert len(acknowledged) == writers * per_writer
    owner = owner_of(replicas, table)
    at_non_owners = sum(r.calls(MARKER, "CreateMarker") for r in replicas if r is not owner)
    assert at_non_owners <= writers  # at most each writer's first create
    redirects = sum(metric(r.metrics_port, "tidemark_owner_redirects_total") for r in replicas)
    assert redirects == at_non_owners  # each one an "ask the owner" answer, counted apart
    assert owner.calls(MARKER, "CreateMarker") >= writers * per_writer
    assert len(lease_records(table)) == 1  # no takeover: no owner was ever unreachable


def test_a_replica_that_does_not_own_the_dir_names_the_owner(
    start_replica: StartReplica, local_root: str
) -> None:
    """The owner is named by its ``--advertise-address``, which the client follows."""
    table = as_table(local_root)
    port = free_port()
    advertised = f"localhost:{port}"
    first = start_replica(
        "marker", env=SERVE_ENV, args=["--port", str(port), "--advertise-address", advertised]
    )
    second = start_replica("marker", env=SERVE_ENV)
    with channel_for(first.address) as channel:
        assert MarkerServiceStub(channel).CreateMarker(create_request(table, "a.parquet")).created
    with channel_for(second.address) as channel, pytest.raises(grpc.RpcError) as refused:
        MarkerServiceStub(channel).CreateMarker(create_request(table, "b.parquet"))
    error = refused.value
    assert isinstance(error, grpc.Call)
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert dict(error.trailing_metadata() or ())[OWNER_KEY] == advertised
    assert stored_markers(table) == ["p=1/a.parquet.marker.CREATE"]

    writer = ServiceMarkerWriter(MarkerSpec("service", table, INSTANT, second.address), CLIENT)
    assert writer.create("p=1", "b.parquet", IOType.CREATE)
    assert first.calls(MARKER, "CreateMarker") == 2
    assert sorted(stored_markers(table)) == [
        "p=1/a.parquet.marker.CREATE",
        "p=1/b.parquet.marker.CREATE",
    ]


@pytest.mark.parametrize("stop", ["kill", "close"])
def test_the_owner_stopped_mid_stream_loses_no_acknowledged_marker(
    replicas: list[Replica], local_root: str, stop: str
) -> None:
    """Writers go through the two replicas that do not own the dir and through all three
    round robin; the owner is killed with -9 (or stopped with SIGTERM) while they write;
    they carry on through the others, one of which takes the dir over once the lease
    ran out (at once after SIGTERM: the owner releases its leases as it stops)."""
    table = as_table(local_root)
    write_all([round_robin_target(replicas)], table, [[("p=0", "first.parquet", IOType.CREATE)]])
    owner = owner_of(replicas, table)
    others = [r for r in replicas if r is not owner]
    targets = [*(r.address for r in others), round_robin_target(replicas)] * 2
    batches = [[(f"w={w}", f"f{i}.parquet", IOType.CREATE) for i in range(150)] for w in range(6)]

    acknowledged, at_kill = write_all(targets, table, batches, midway=getattr(owner.process, stop))

    assert len(acknowledged) == 150 * len(targets) > at_kill
    expected = sorted({"p=0/first.parquet.marker.CREATE", *acknowledged})
    assert sorted(stored_markers(table)) == expected  # none lost, none twice
    records = lease_records(table)
    assert len(records) == 2  # taken over once
    assert records[-1]["address"] in {r.address for r in others}
    takeovers = sum(metric(r.metrics_port, "tidemark_marker_lease_takeovers_total") for r in others)
    assert takeovers == (1 if stop == "kill" else 0)  # a released lease is no takeover


def test_a_replica_restarted_at_its_address_waits_out_its_former_lease(
    start_replica: StartReplica, local_root: str
) -> None:
    """A StatefulSet pod comes back with its name: the lease of its killed process names
    the very address the client asked, so the client waits the lease out instead of
    following the answer to itself, then the restarted process takes the dir over. (The
    client's retries outlast gRPC's reconnect backoff, about a second, after the kill.) The
    lease outlives the restart on a loaded machine too: it is four times as long as a
    replica took to start just before, at least 5 s."""
    table = as_table(local_root)
    began = time.monotonic()
    start_replica("marker", env=SERVE_ENV).process.kill()
    lease_s = max(5.0, 4 * (time.monotonic() - began))
    port = free_port()
    args = ["--port", str(port)]
    env = {**SERVE_ENV, "TIDEMARK_MARKER_LEASE_S": f"{lease_s:.1f}"}
    first = start_replica("marker", env=env, args=args)
    patient = ClientConfig(timeout_s=2 * lease_s, initial_backoff_s=0.5, max_backoff_s=2.0)
    writer = ServiceMarkerWriter(MarkerSpec("service", table, INSTANT, first.address), patient)
    assert writer.create("p=1", "a.parquet", IOType.CREATE)
    first.process.kill()

    restarted = start_replica("marker", env=env, args=args)

    assert restarted.address == first.address
    assert writer.create("p=1", "b.parquet", IOType.CREATE)
    assert not writer.create("p=1", "a.parquet", IOType.CREATE)
    assert sorted(stored_markers(table)) == [
        "p=1/a.parquet.marker.CREATE",
        "p=1/b.parquet.marker.CREATE",
    ]
    assert [record["address"] for record in lease_records(table)] == [first.address] * 2
    refused = metric(
        restarted.metrics_port,
        "grpc_server_handled_total",
        grpc_method="CreateMarker",
        grpc_code="FAILED_PRECONDITION",
    )
    assert refused > 0  # while the former lease lived
