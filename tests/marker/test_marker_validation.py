"""Bad input is INVALID_ARGUMENT naming the field, and nothing is written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tidemark.errors import InvalidArgumentError
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.marker.v1 import marker_service_pb2 as pb
from tidemark.proto.marker.v1.marker_service_pb2_grpc import MarkerServiceStub
from tidemark.services.marker import requests
from tidemark.services.marker.config import MarkerConfig
from tidemark.table.writes.markers import IOType, marker_name

from .conftest import (
    INSTANT,
    StartService,
    as_table,
    create_request,
    error_field,
    only_the_table,
)


@pytest.mark.parametrize(
    ("partition", "name", "io_type", "field"),
    [
        ("p=1", "", pb.IO_TYPE_CREATE, "marker.data_file_name"),
        ("/abs", "f.parquet", pb.IO_TYPE_CREATE, "marker.partition_path"),
        ("p=1/../..", "f.parquet", pb.IO_TYPE_CREATE, "marker.partition_path"),
        ("p=1", "..", pb.IO_TYPE_CREATE, "marker.data_file_name"),
        ("p=1", "a/b.parquet", pb.IO_TYPE_CREATE, "marker.data_file_name"),
        ("p=1", "f.parquet\nMARKERS0", pb.IO_TYPE_CREATE, "marker.data_file_name"),
        ("p=1\n", "f.parquet", pb.IO_TYPE_CREATE, "marker.partition_path"),
        ("p=1", "f.parquet", pb.IO_TYPE_UNSPECIFIED, "marker.io_type"),
        ("p=1", "f.parquet", 7, "marker.io_type"),
    ],
)
def test_bad_marker_is_rejected(
    start_service: StartService,
    stub_for: Callable[[str], MarkerServiceStub],
    local_root: str,
    partition: str,
    name: str,
    io_type: pb.IOType,
    field: str,
) -> None:
    stub = stub_for(start_service().address)
    with pytest.raises(grpc.RpcError) as caught:
        stub.CreateMarker(create_request(local_root, name, io_type, partition))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_field(caught.value) == field
    assert only_the_table(local_root)


@pytest.mark.parametrize(
    "instant", ["", "2024", "2024010203040500x", "202401020304050061", "20241302030405006"]
)
def test_bad_instant_is_rejected(
    start_service: StartService,
    stub_for: Callable[[str], MarkerServiceStub],
    local_root: str,
    instant: str,
) -> None:
    stub = stub_for(start_service().address)
    request = create_request(local_root, "f.parquet")
    request.instant_time = instant
    with pytest.raises(grpc.RpcError) as caught:
        stub.CreateMarker(request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_field(caught.value) == "instant_time"
    assert only_the_table(local_root)


def test_table_outside_allowed_roots_is_rejected(
    start_service: StartService, stub_for: Callable[[str], MarkerServiceStub], tmp_path: Path
) -> None:
    allowed = tmp_path / "allowed"
    outside = tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    stub = stub_for(start_service(allowed_roots=[str(allowed)]).address)
    for table, code in (
        (str(outside), grpc.StatusCode.PERMISSION_DENIED),
        (f"{allowed}/../outside", grpc.StatusCode.INVALID_ARGUMENT),
        ("", grpc.StatusCode.INVALID_ARGUMENT),
    ):
        with pytest.raises(grpc.RpcError) as caught:
            stub.CreateMarker(create_request(table, "f.parquet"))
        assert caught.value.code() == code
        assert error_field(caught.value) == "table.base_path"
    with pytest.raises(grpc.RpcError) as caught:
        stub.DeleteMarkerDir(
            pb.DeleteMarkerDirRequest(table=TableRef(base_path=str(outside)), instant_time=INSTANT)
        )
    assert error_field(caught.value) == "table.base_path"
    with pytest.raises(grpc.RpcError) as caught:
        stub.CreateMarker(create_request(str(allowed / "table"), "f.parquet"))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert not any(allowed.iterdir()), "no folder is created for a path that is not a table"
    assert stub.CreateMarker(create_request(as_table(str(allowed / "table")), "f.parquet")).created
    assert not any(Path(outside).iterdir())


def test_one_bad_marker_fails_the_whole_batch(
    start_service: StartService, stub_for: Callable[[str], MarkerServiceStub], local_root: str
) -> None:
    stub = stub_for(start_service(MarkerConfig(queue_limit=10)).address)
    good = pb.Marker(partition_path="p=1", data_file_name="ok.parquet", io_type=pb.IO_TYPE_CREATE)
    bad = pb.Marker(partition_path="p=1", data_file_name="bad\r.parquet", io_type=pb.IO_TYPE_CREATE)
    table = TableRef(base_path=local_root)
    with pytest.raises(grpc.RpcError) as caught:
        stub.CreateMarkers(
            pb.CreateMarkersRequest(table=table, instant_time=INSTANT, markers=[good, bad])
        )
    assert error_field(caught.value) == "markers[1].data_file_name"
    with pytest.raises(grpc.RpcError) as caught:
        stub.CreateMarkers(
            pb.CreateMarkersRequest(table=table, instant_time=INSTANT, markers=[good] * 11)
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_field(caught.value) == "markers"
    assert only_the_table(local_root)


_PATH_TEXT = st.text(alphabet="a.=/\\\n\r\x00\x0b\u2028", max_size=8)


def _name_or_none(build: Callable[[], str]) -> str | None:
    try:
        return build()
    except InvalidArgumentError:
        return None


@given(partition=_PATH_TEXT, name=_PATH_TEXT)
@example(partition="", name=".")
@example(partition="p", name="..")
def test_create_fast_path_accepts_exactly_the_valid_markers(partition: str, name: str) -> None:
    """The service's one-regex check of a create agrees with the table layer's rules for
    marker names (plus: a data file name has no '/'), on arbitrary input."""
    message = pb.Marker(partition_path=partition, data_file_name=name, io_type=pb.IO_TYPE_MERGE)
    expected = (
        _name_or_none(lambda: marker_name(partition, name, IOType.MERGE))
        if "/" not in name
        else None
    )
    assert _name_or_none(lambda: requests.marker(message)) == expected
