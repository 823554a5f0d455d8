"""One owner per marker dir, and recovery after kill -9, with `tidemark serve marker`
subprocesses on the same storage."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from tidemark.clients.marker import ServiceMarkerReader, ServiceMarkerWriter
from tidemark.config import ClientConfig
from tidemark.errors import ConflictError, TidemarkError
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.marker.v1 import marker_service_pb2 as pb
from tidemark.proto.marker.v1.marker_service_pb2_grpc import MarkerServiceStub
from tidemark.rpc.process import ServeProcess
from tidemark.services.marker.config import MarkerConfig
from tidemark.storage import open_storage
from tidemark.table.writes.markers import (
    IOType,
    MarkerSpec,
    StorageMarkerReader,
    marker_lease_dir,
    marker_name,
)
from tidemark.testing.clock import AdvancingClock

from .conftest import (
    INSTANT,
    StartService,
    create_request,
    error_field,
    stored_markers,
)

LEASE_S = 2.0
SERVE_ENV = {
    "TIDEMARK_MARKER_LEASE_S": str(LEASE_S),
    "TIDEMARK_MARKER_BATCH_INTERVAL_MS": "10",
}
NO_RETRY = ClientConfig(timeout_s=5.0, max_attempts=1)


def create_when_owned(stub: MarkerServiceStub, request: pb.CreateMarkerRequest) -> bool:
    """Create, waiting out a dead owner's lease (FAILED_PRECONDITION until it expires)."""
    while True:
        try:
            return bool(stub.CreateMarker(request).created)
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise
            time.sleep(0.1)


def test_second_server_is_refused_until_the_owner_lease_expires(
    serve_process: Callable[[dict[str, str]], ServeProcess],
    start_service: StartService,
    stub_for: Callable[[str], MarkerServiceStub],
    local_root: str,
) -> None:
    owner = serve_process(SERVE_ENV)
    assert stub_for(owner.address).CreateMarker(create_request(local_root, "a.parquet")).created
    clock = AdvancingClock()
    config = MarkerConfig(batch_interval_ms=5, lease_s=LEASE_S)
    second = stub_for(start_service(config, clock=clock).address)

    with pytest.raises(grpc.RpcError) as create:
        second.CreateMarker(create_request(local_root, "b.parquet"))
    with pytest.raises(grpc.RpcError) as delete:
        second.DeleteMarkerDir(
            pb.DeleteMarkerDirRequest(table=TableRef(base_path=local_root), instant_time=INSTANT)
        )
    for refused in (create.value, delete.value):
        assert refused.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert f"/{owner.pid}/" in (refused.details() or "")
        assert error_field(refused) == "instant_time"
    assert stored_markers(local_root) == ["p=1/a.parquet.marker.CREATE"]

    owner.kill()
    clock.advance(LEASE_S)  # the dead owner's last renewal runs out

    assert second.CreateMarker(create_request(local_root, "b.parquet")).created
    assert not second.CreateMarker(create_request(local_root, "a.parquet")).created
    assert sorted(stored_markers(local_root)) == [
        "p=1/a.parquet.marker.CREATE",
        "p=1/b.parquet.marker.CREATE",
    ]
    assert sorted(path.name for path in Path(local_root, marker_lease_dir(INSTANT)).iterdir()) == [
        "0000000000",
        "0000000001",
    ]


def test_every_acknowledged_marker_survives_kill_9(
    serve_process: Callable[[dict[str, str]], ServeProcess],
    stub_for: Callable[[str], MarkerServiceStub],
    local_root: str,
) -> None:
    first = serve_process(SERVE_ENV)
    writer = ServiceMarkerWriter(
        MarkerSpec("service", local_root, INSTANT, first.address), NO_RETRY
    )
    acknowledged: list[str] = []
    lock = threading.Lock()
    enough = threading.Event()

    def load(worker: int) -> None:
        for index in range(10_000):
            marker = (f"w={worker}", f"f{index}.parquet", IOType.CREATE)
            try:
                writer.create(*marker)
            except TidemarkError:
                return
            with lock:
                acknowledged.append(marker_name(*marker))
                if len(acknowledged) >= 400:
                    enough.set()

    threads = [threading.Thread(target=load, args=(worker,)) for worker in range(16)]
    for thread in threads:
        thread.start()
    enough.wait()
    first.kill()
    for thread in threads:
        thread.join()

    restarted = serve_process(SERVE_ENV)
    listed = ServiceMarkerReader(restarted.address, local_root, NO_RETRY).all_markers(INSTANT)
    assert set(acknowledged) <= listed
    stub = stub_for(restarted.address)
    assert create_when_owned(stub, create_request(local_root, "after-restart.parquet"))
    for name in acknowledged[:50]:
        partition, _, rest = name.partition("/")
        data_file = rest.removesuffix(".marker.CREATE")
        assert not stub.CreateMarker(
            create_request(local_root, data_file, partition=partition)
        ).created


def test_deleting_a_dead_services_marker_dir_from_storage_removes_its_lease(
    serve_process: Callable[[dict[str, str]], ServeProcess],
    stub_for: Callable[[str], MarkerServiceStub],
    local_root: str,
) -> None:
    """Rollback without a running service deletes the marker dir straight from storage;
    the lease the dead service took must go with it, not pile up under .hoodie/.aux."""
    other_instant = "20240101000000999"
    owner = serve_process(SERVE_ENV)
    stub = stub_for(owner.address)
    assert stub.CreateMarker(create_request(local_root, "a.parquet")).created
    other = create_request(local_root, "b.parquet")
    other.instant_time = other_instant
    assert stub.CreateMarker(other).created
    owner.kill()
    storage = open_storage(local_root)
    assert any(storage.list(marker_lease_dir(INSTANT) + "/"))

    assert StorageMarkerReader(storage).delete_dir(INSTANT)

    assert stored_markers(local_root) == []
    assert list(storage.list(marker_lease_dir(INSTANT) + "/")) == []
    assert StorageMarkerReader(storage).all_markers(other_instant) == {
        "p=1/b.parquet.marker.CREATE"
    }
    assert any(storage.list(marker_lease_dir(other_instant) + "/"))


def test_deleting_a_dir_waits_out_a_dead_owners_lease(
    serve_process: Callable[[dict[str, str]], ServeProcess],
    start_service: StartService,
    stub_for: Callable[[str], MarkerServiceStub],
    local_root: str,
) -> None:
    """The next writer's rollback deletes the marker dir of a crashed writer through its
    own service: it waits for the dead owner's lease instead of failing."""
    owner = serve_process(SERVE_ENV)
    assert stub_for(owner.address).CreateMarker(create_request(local_root, "a.parquet")).created
    owner.kill()
    second = start_service(MarkerConfig(batch_interval_ms=5, lease_s=LEASE_S))
    impatient = ServiceMarkerReader(second.address, local_root, NO_RETRY, owner_wait_s=0)
    with pytest.raises(ConflictError) as refused:
        impatient.delete_dir(INSTANT)
    assert refused.value.field == "instant_time"

    assert ServiceMarkerReader(second.address, local_root, NO_RETRY).delete_dir(INSTANT)

    assert stored_markers(local_root) == []
    assert list(open_storage(local_root).list(marker_lease_dir(INSTANT) + "/")) == []
