"""Paths stay inside their table: a ``.hoodie`` linked to another table outside the
allowed root is refused by the storage every service and job goes through, by the marker
service on a real server, and a ``file:/abs`` spelling is told how to write itself."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tidemark.config import ServerConfig
from tidemark.errors import InvalidArgumentError, PermissionDeniedError
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.marker.v1 import marker_service_pb2 as pb
from tidemark.proto.marker.v1.marker_service_pb2_grpc import MarkerServiceStub
from tidemark.rpc.client import channel_for
from tidemark.rpc.registry import resolve_services
from tidemark.rpc.server import build_server
from tidemark.storage import open_storage
from tidemark.storage.uri import parse_uri
from tidemark.table.properties import PROPERTIES_PATH
from tidemark.table.table import HoodieTable


def tree(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


@pytest.fixture
def escaping(tmp_path: Path) -> Path:
    """``lake/t`` whose ``.hoodie`` links to the table ``outside/victim``."""
    victim = tmp_path / "outside" / "victim"
    (victim / ".hoodie").mkdir(parents=True)
    (victim / PROPERTIES_PATH).write_text("hoodie.table.name=victim\n")
    table = tmp_path / "lake" / "t"
    table.mkdir(parents=True)
    (table / ".hoodie").symlink_to(victim / ".hoodie")
    return table


def test_storage_refuses_paths_that_resolve_outside_the_root(escaping: Path) -> None:
    storage = open_storage(str(escaping))
    outside = tree(escaping.parents[1] / "outside")
    for touch in (
        lambda: storage.exists(PROPERTIES_PATH),
        lambda: storage.read(PROPERTIES_PATH),
        lambda: storage.write(".hoodie/MARKERS0", b"x"),
        lambda: storage.create_if_absent(".hoodie/lease", b"x"),
        lambda: storage.list_dir(".hoodie"),
        lambda: list(storage.list(".hoodie/")),
    ):
        with pytest.raises(PermissionDeniedError, match="outside"):
            touch()
    assert tree(escaping.parents[1] / "outside") == outside
    with pytest.raises(PermissionDeniedError):
        HoodieTable.open(str(escaping))


def test_a_link_inside_the_root_is_followed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f").write_bytes(b"data")
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    (tmp_path / "real" / "g").symlink_to(tmp_path / "real" / "f")
    storage = open_storage(str(tmp_path))
    assert storage.read("alias/f") == b"data"
    assert storage.read("real/g") == b"data"


def test_a_file_linked_out_of_the_root_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "secret").write_bytes(b"s")
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "f").symlink_to(tmp_path / "secret")
    with pytest.raises(PermissionDeniedError, match="outside"):
        open_storage(str(tmp_path / "t")).read("f")


@pytest.fixture
def marker_address(escaping: Path) -> Iterator[str]:
    config = ServerConfig(port=0, metrics_port=0, allowed_roots=(str(escaping.parent),))
    server = build_server(config, resolve_services("marker"))
    yield f"127.0.0.1:{server.port}"
    server.stop(0)


def create_marker(address: str, base_path: str) -> grpc.RpcError:
    request = pb.CreateMarkerRequest(
        table=TableRef(base_path=base_path),
        instant_time="20260101000000000",
        marker=pb.Marker(data_file_name="f.parquet", io_type=pb.IO_TYPE_CREATE),
    )
    with channel_for(address) as channel, pytest.raises(grpc.RpcError) as caught:
        MarkerServiceStub(channel).CreateMarker(request, timeout=30)
    return caught.value


def test_the_marker_service_writes_nothing_through_an_escaping_link(
    escaping: Path, marker_address: str
) -> None:
    outside = escaping.parents[1] / "outside"
    before = tree(outside)
    error = create_marker(marker_address, str(escaping))
    assert isinstance(error, grpc.Call)
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert tree(outside) == before


def test_a_file_uri_with_one_slash_says_what_to_write(escaping: Path, marker_address: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"three slashes \(file:///data/t\)"):
        parse_uri("file:/data/t")
    error = create_marker(marker_address, f"file:{escaping}")
    assert isinstance(error, grpc.Call)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"file://{escaping}" in str(error.details())
