"""Bounded memory: a full queue answers RESOURCE_EXHAUSTED, idle marker dirs are evicted."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from tidemark.errors import ConfigError
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.marker.v1 import marker_service_pb2 as pb
from tidemark.proto.marker.v1.marker_service_pb2_grpc import MarkerServiceStub
from tidemark.services.marker.config import MarkerConfig
from tidemark.table.writes.markers import marker_lease_dir
from tidemark.testing.clock import ManualClock

from .conftest import (
    INSTANT,
    StartService,
    create_request,
    error_field,
    metric,
    stored_markers,
)


def test_full_queue_is_resource_exhausted(
    start_service: StartService, stub_for: Callable[[str], MarkerServiceStub], local_root: str
) -> None:
    service = start_service(MarkerConfig(queue_limit=4, batch_interval_ms=1000))
    stub = stub_for(service.address)
    markers = [
        pb.Marker(data_file_name=f"f{i}.parquet", io_type=pb.IO_TYPE_CREATE) for i in range(4)
    ]
    request = pb.CreateMarkersRequest(
        table=TableRef(base_path=local_root), instant_time=INSTANT, markers=markers
    )

    calls = [stub.CreateMarkers.future(request) for _ in range(2)]  # together they need 8 slots

    errors = [call.exception() for call in calls]
    rejected = [error for error in errors if isinstance(error, grpc.RpcError)]
    assert len(rejected) == 1
    assert rejected[0].code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error_field(rejected[0]) == "markers"
    accepted = next(call for call, error in zip(calls, errors, strict=True) if error is None)
    assert list(accepted.result().created) == [True] * 4
    assert list(stub.CreateMarkers(request).created) == [False] * 4
    assert len(stored_markers(local_root)) == 4


def test_idle_dir_is_evicted_and_reloaded(
    start_service: StartService, stub_for: Callable[[str], MarkerServiceStub], local_root: str
) -> None:
    """Idle time is the service's clock, stepped by the test: the dir is evicted (its lease
    released, its state dropped) only after the step, and the reloaded dir cannot be
    evicted again while its request waits on a loaded machine."""
    clock = ManualClock()
    service = start_service(MarkerConfig(batch_interval_ms=5, idle_evict_s=10), clock=clock)
    stub = stub_for(service.address)
    assert stub.CreateMarker(create_request(local_root, "a.parquet")).created
    lease_file = Path(local_root, marker_lease_dir(INSTANT), "0000000000")

    clock.advance(11)
    while metric(service.metrics_port, "tidemark_marker_dirs") != 0:
        time.sleep(0.05)  # the maintenance thread's next pass evicts it
    assert json.loads(lease_file.read_bytes())["expires_at"] == 0  # released, not run out

    assert not stub.CreateMarker(create_request(local_root, "a.parquet")).created
    assert stub.CreateMarker(create_request(local_root, "b.parquet")).created
    assert sorted(stored_markers(local_root)) == [
        "p=1/a.parquet.marker.CREATE",
        "p=1/b.parquet.marker.CREATE",
    ]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("BATCH_INTERVAL_MS", "0"),
        ("NUM_MARKER_FILES", "-1"),
        ("QUEUE_LIMIT", "many"),
        ("LEASE_S", "0.5"),
    ],
)
def test_config_from_env_is_validated(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        MarkerConfig.load(environ={f"TIDEMARK_MARKER_{name}": value})
    assert caught.value.field == name.lower()


def test_config_from_env_and_overrides() -> None:
    config = MarkerConfig.load(
        overrides={"num_marker_files": 7}, environ={"TIDEMARK_MARKER_BATCH_INTERVAL_MS": "20"}
    )
    assert (config.batch_interval_ms, config.num_marker_files, config.lease_s) == (20, 7, 60.0)


def test_threads_are_not_leaked(start_service: StartService, local_root: str) -> None:
    """The first server of a process starts gRPC's process-wide asyncio poller thread;
    after that, starting and stopping services leaves no thread behind."""
    start_service().close()
    before = threading.active_count()
    for _ in range(3):
        start_service().close()
    assert threading.active_count() <= before
