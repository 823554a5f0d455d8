"""Paths stay inside their table: a ``.hoodie`` linked to another table outside the
allowed root is refused by the storage every service and job goes through, by the marker
service on a real server, as is a folder swapped for a link after a first write (the
marker dir of an instant, after its first marker); refusals name the path as given,
never where the link leads; and a ``file:/abs`` spelling is told how to write itself."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tidemark.config import ServerConfig
from tidemark.errors import InvalidArgumentError, NotFoundError, PermissionDeniedError
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.marker.v1 import marker_service_pb2 as pb
from tidemark.proto.marker.v1.marker_service_pb2_grpc import MarkerServiceStub
from tidemark.rpc.client import channel_for
from tidemark.rpc.registry import resolve_services
from tidemark.rpc.server import build_server
from tidemark.storage import open_storage
from tidemark.storage.uri import parse_uri
from tidemark.table import HoodieTable
from tidemark.table.properties.config import PROPERTIES_PATH

INSTANT = "20260101000000000"


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
        with pytest.raises(PermissionDeniedError, match="symbolic link") as refused:
            touch()
        assert "outside" not in str(refused.value)
    assert tree(escaping.parents[1] / "outside") == outside
    with pytest.raises(PermissionDeniedError):
        HoodieTable.open(str(escaping))


def test_a_link_inside_the_root_is_refused_too(tmp_path: Path) -> None:
    """A table's files and folders are never links: one inside is refused, not followed."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f").write_bytes(b"data")
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    (tmp_path / "real" / "g").symlink_to(tmp_path / "real" / "f")
    storage = open_storage(str(tmp_path))
    assert storage.read("real/f") == b"data"
    for path in ("alias/f", "real/g"):
        with pytest.raises(PermissionDeniedError, match="symbolic link"):
            storage.read(path)
    assert [info.path for info in storage.list("")] == ["real/f"]
    assert storage.list_dir("").dirs == ("real",)


def test_a_file_linked_out_of_the_root_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "secret").write_bytes(b"s")
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "f").symlink_to(tmp_path / "secret")
    for touch in (
        lambda storage: storage.read("f"),
        lambda storage: storage.exists("f"),
        lambda storage: storage.local_file("f"),
    ):
        with pytest.raises(PermissionDeniedError, match="symbolic link"):
            touch(open_storage(str(tmp_path / "t")))


def swap_for_link(folder: Path, target: Path) -> None:
    """Move ``folder`` aside and put a link to ``target`` in its place."""
    folder.rename(folder.with_name(folder.name + "-moved"))
    folder.symlink_to(target)


def test_a_folder_swapped_for_a_link_after_a_first_write_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept").write_bytes(b"k")
    storage = open_storage(str(tmp_path / "t"))
    storage.write("a/b/first", b"1")
    assert storage.read("a/b/first") == b"1"
    swap_for_link(tmp_path / "t" / "a" / "b", outside)
    for touch in (
        lambda: storage.write("a/b/second", b"2"),
        lambda: storage.create_if_absent("a/b/second", b"2"),
        lambda: storage.open_output("a/b/second").close(),
        lambda: storage.delete_many(["a/b/kept"]),
        lambda: storage.read("a/b/kept"),
        lambda: storage.read_range("a/b/kept", 0, 1),
        lambda: storage.list("a/b/"),
        lambda: storage.list_dir("a/b"),
    ):
        with pytest.raises(PermissionDeniedError, match="symbolic link") as refused:
            touch()
        assert str(outside) not in str(refused.value)
    assert tree(outside) == ["kept"]


def test_the_table_folder_itself_swapped_for_a_link_is_refused(tmp_path: Path) -> None:
    """The walk starts at ``/``: the root's own folders are checked at every request."""
    outside = tmp_path / "outside"
    outside.mkdir()
    storage = open_storage(str(tmp_path / "lake" / "t"))
    storage.write("f", b"1")
    swap_for_link(tmp_path / "lake", outside)
    with pytest.raises(PermissionDeniedError, match="symbolic link"):
        storage.write("g", b"2")
    assert tree(outside) == []


def test_a_fifo_in_a_table_is_not_an_object_and_blocks_nothing(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    storage = open_storage(str(tmp_path))
    with pytest.raises(NotFoundError):
        storage.read("pipe")
    assert not storage.exists("pipe")


@pytest.fixture
def marker_address(escaping: Path) -> Iterator[str]:
    config = ServerConfig(port=0, metrics_port=0, allowed_roots=(str(escaping.parent),))
    server = build_server(config, resolve_services("marker"))
    yield f"127.0.0.1:{server.port}"
    server.stop(0)


def create_marker(address: str, base_path: str) -> grpc.RpcError:
    request = pb.CreateMarkerRequest(
        table=TableRef(base_path=base_path),
        instant_time=INSTANT,
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


def create_marker_ok(address: str, base_path: str, file_name: str) -> None:
    request = pb.CreateMarkerRequest(
        table=TableRef(base_path=base_path),
        instant_time=INSTANT,
        marker=pb.Marker(data_file_name=file_name, io_type=pb.IO_TYPE_CREATE),
    )
    with channel_for(address) as channel:
        assert MarkerServiceStub(channel).CreateMarker(request, timeout=30).created


def test_a_marker_dir_swapped_for_a_link_after_a_first_marker_is_refused(tmp_path: Path) -> None:
    """The issue's case: the instant's marker folder linked out of the allowed root once
    the service has written there; the next create is refused, nothing written outside,
    and the refusal names neither the outside folder nor anything resolved."""
    table = tmp_path / "lake" / "t"
    (table / ".hoodie").mkdir(parents=True)
    (table / PROPERTIES_PATH).write_text("hoodie.table.name=t\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    config = ServerConfig(port=0, metrics_port=0, allowed_roots=(str(tmp_path / "lake"),))
    server = build_server(config, resolve_services("marker"))
    address = f"127.0.0.1:{server.port}"
    try:
        create_marker_ok(address, str(table), "first.parquet")
        swap_for_link(table / ".hoodie" / ".temp" / INSTANT, outside)
        error = create_marker(address, str(table))
    finally:
        server.stop(0)
    assert isinstance(error, grpc.Call)
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    details = str(error.details())
    assert "symbolic link" in details
    assert str(outside) not in details
    assert tree(outside) == []


def test_a_table_path_linked_out_of_the_roots_is_refused_as_given(
    escaping: Path, marker_address: str
) -> None:
    alias = escaping.parent / "alias"
    alias.symlink_to(escaping.parents[1] / "outside" / "victim")
    error = create_marker(marker_address, str(alias))
    assert isinstance(error, grpc.Call)
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    details = str(error.details())
    assert str(alias) in details
    assert "outside" not in details
