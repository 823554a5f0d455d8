"""Storage faults on the local S3 server: 503s are retried; a flush that keeps failing
fails its requests, is not remembered, and loses nothing acknowledged before it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import grpc
import pytest

from tidemark.clients.marker import ServiceMarkerReader, ServiceMarkerWriter
from tidemark.errors import UnavailableError
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.marker.v1 import marker_service_pb2 as pb
from tidemark.proto.marker.v1.marker_service_pb2_grpc import MarkerServiceStub
from tidemark.services.marker.config import MarkerConfig
from tidemark.services.marker.embedded import EmbeddedMarkerService
from tidemark.storage import open_storage
from tidemark.table.writes.markers import IOType, MarkerSpec, read_markers_from_storage
from tidemark.testing.s3local import FaultProxy

from .conftest import FAST_CLIENT, INSTANT, StartService, create_request, metric

MARKERS_PUT = r"/MARKERS\d+$"


@pytest.fixture
def service_faulty_s3(s3_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    """Every S3 request of this process goes through the fault proxy."""
    with FaultProxy(s3_server) as fault_proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", fault_proxy.endpoint)
        monkeypatch.setenv("TIDEMARK_STORAGE_MAX_ATTEMPTS", "3")
        yield fault_proxy


@pytest.fixture
def service(service_faulty_s3: FaultProxy, start_service: StartService) -> EmbeddedMarkerService:
    return start_service(MarkerConfig(batch_interval_ms=5, num_marker_files=2))


@pytest.fixture
def stub(
    service: EmbeddedMarkerService, stub_for: Callable[[str], MarkerServiceStub]
) -> MarkerServiceStub:
    return stub_for(service.address)


def test_throttled_flush_is_retried(
    service_faulty_s3: FaultProxy, stub: MarkerServiceStub, s3_bucket: str
) -> None:
    service_faulty_s3.fail_next(2, method="PUT", path_pattern=MARKERS_PUT)

    assert stub.CreateMarker(create_request(s3_bucket, "a.parquet")).created

    assert service_faulty_s3.injected == 2
    assert read_markers_from_storage(open_storage(s3_bucket), INSTANT) == {
        "p=1/a.parquet.marker.CREATE"
    }


def test_failing_flush_is_never_acknowledged(
    service_faulty_s3: FaultProxy, stub: MarkerServiceStub, s3_bucket: str
) -> None:
    acknowledged = {f"p=1/{name}.marker.CREATE" for name in ("a.parquet", "b.parquet")}
    assert stub.CreateMarker(create_request(s3_bucket, "a.parquet")).created
    assert stub.CreateMarker(create_request(s3_bucket, "b.parquet")).created
    service_faulty_s3.fail_always(method="PUT", path_pattern=MARKERS_PUT)

    with pytest.raises(grpc.RpcError) as single:
        stub.CreateMarker(create_request(s3_bucket, "c.parquet"))
    batch = pb.CreateMarkersRequest(
        table=TableRef(base_path=s3_bucket),
        instant_time=INSTANT,
        markers=[
            pb.Marker(partition_path="p=1", data_file_name=name, io_type=pb.IO_TYPE_CREATE)
            for name in ("a.parquet", "d.parquet")
        ],
    )
    with pytest.raises(grpc.RpcError) as many:
        stub.CreateMarkers(batch)
    listed = {
        name
        for chunk in stub.ListMarkers(
            pb.ListMarkersRequest(table=batch.table, instant_time=INSTANT)
        )
        for name in chunk.marker_names
    }
    service_faulty_s3.clear()

    assert single.value.code() == grpc.StatusCode.UNAVAILABLE
    assert many.value.code() == grpc.StatusCode.UNAVAILABLE
    assert listed == acknowledged
    assert read_markers_from_storage(open_storage(s3_bucket), INSTANT) == acknowledged
    assert stub.CreateMarker(create_request(s3_bucket, "c.parquet")).created
    assert list(stub.CreateMarkers(batch).created) == [False, True]
    assert read_markers_from_storage(open_storage(s3_bucket), INSTANT) == acknowledged | {
        "p=1/c.parquet.marker.CREATE",
        "p=1/d.parquet.marker.CREATE",
    }


def test_flushes_are_timed_and_counted_by_outcome(
    service_faulty_s3: FaultProxy,
    service: EmbeddedMarkerService,
    stub: MarkerServiceStub,
    s3_bucket: str,
) -> None:
    batch = pb.CreateMarkersRequest(
        table=TableRef(base_path=s3_bucket),
        instant_time=INSTANT,
        markers=[
            pb.Marker(partition_path="p=1", data_file_name=name, io_type=pb.IO_TYPE_CREATE)
            for name in ("a.parquet", "b.parquet", "c.parquet")
        ],
    )
    assert list(stub.CreateMarkers(batch).created) == [True, True, True]
    assert list(stub.CreateMarkers(batch).created) == [False, False, False]
    service_faulty_s3.fail_always(method="PUT", path_pattern=MARKERS_PUT)
    with pytest.raises(grpc.RpcError):
        stub.CreateMarker(create_request(s3_bucket, "d.parquet"))
    service_faulty_s3.clear()

    port = service.metrics_port
    assert metric(port, "tidemark_marker_flush_seconds_count", outcome="ok") == 1
    assert metric(port, "tidemark_marker_flush_seconds_count", outcome="failed") == 1
    assert metric(port, "tidemark_marker_flush_seconds_sum", outcome="ok") > 0
    assert metric(port, "tidemark_marker_flush_markers_count") == 1
    assert metric(port, "tidemark_marker_flush_markers_sum") == 3


def test_a_storage_outage_is_not_blamed_on_the_marker_service(
    service_faulty_s3: FaultProxy, service: EmbeddedMarkerService, s3_bucket: str
) -> None:
    """Issue 21: when S3 fails under the service (DeleteObjects here), the error says the
    service answered and what failed, not that the service is unreachable."""
    reader = ServiceMarkerReader(service.address, s3_bucket, FAST_CLIENT, owner_wait_s=0.5)
    assert ServiceMarkerWriter(
        MarkerSpec("service", s3_bucket, INSTANT, service.address), FAST_CLIENT
    ).create("p=1", "a.parquet", IOType.CREATE)
    service_faulty_s3.fail_always(method="POST")  # DeleteObjects
    with pytest.raises(UnavailableError) as failed:
        reader.delete_dir(INSTANT)
    service_faulty_s3.clear()
    assert f"marker service at {service.address} answered: " in str(failed.value)
    assert "unreachable" not in str(failed.value)
    assert reader.delete_dir(INSTANT)
