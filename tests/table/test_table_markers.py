"""Marker names, direct markers and Hudi's timeline-server MARKERS files."""

from __future__ import annotations

import pickle

import pytest

from tidemark.clients.marker import marker_writer_for
from tidemark.errors import DataLossError, InvalidArgumentError
from tidemark.storage import open_storage
from tidemark.table.writes.markers import (
    IOType,
    MarkerSpec,
    StorageMarkerReader,
    marker_dir,
    marker_name,
    parse_marker_name,
    read_markers_from_storage,
)

INSTANT = "20240418172802262"
FILE = "97de74b1-2a8e-4bb7-874c-0a74e1f42a77-0_1-98-142_20240418172802262.parquet"


def test_names_round_trip() -> None:
    assert marker_name("10", FILE, IOType.CREATE) == f"10/{FILE}.marker.CREATE"
    assert marker_name("", FILE, IOType.MERGE) == f"{FILE}.marker.MERGE"
    assert parse_marker_name(f"a=1/b=2/{FILE}.marker.APPEND") == ("a=1/b=2", FILE, IOType.APPEND)
    assert marker_dir(INSTANT) == f".hoodie/.temp/{INSTANT}"


@pytest.mark.parametrize(
    "name",
    [
        "",
        f"/10/{FILE}.marker.CREATE",
        f"../{FILE}.marker.CREATE",
        f"10//{FILE}.marker.CREATE",
        f"10/{FILE}.marker.CREATE\n10/x.marker.CREATE",
        f"10/{FILE}.marker.DELETE",
        f"10/{FILE}",
        "10/.marker.CREATE",
        "10/..marker.CREATE",
        "10/...marker.CREATE",
    ],
)
def test_bad_marker_names_are_rejected(name: str) -> None:
    with pytest.raises(InvalidArgumentError) as error:
        parse_marker_name(name)
    assert error.value.field == "marker"


def test_bad_instant_in_marker_dir() -> None:
    with pytest.raises(InvalidArgumentError):
        marker_dir("../../etc")


def test_direct_writer_is_idempotent_and_reader_sees_markers(local_root: str) -> None:
    spec = MarkerSpec("direct", local_root, INSTANT)
    writer = marker_writer_for(pickle.loads(pickle.dumps(spec)))
    assert writer.create("10", FILE, IOType.CREATE) is True
    assert writer.create("10", FILE, IOType.CREATE) is False
    assert writer.create("", FILE, IOType.APPEND) is True
    storage = open_storage(local_root)
    assert storage.read(f".hoodie/.temp/{INSTANT}/10/{FILE}.marker.CREATE") == b""
    reader = StorageMarkerReader(storage)
    assert reader.all_markers(INSTANT) == {f"10/{FILE}.marker.CREATE", f"{FILE}.marker.APPEND"}
    assert reader.create_and_merge_markers(INSTANT) == {f"10/{FILE}.marker.CREATE"}
    assert reader.delete_dir(INSTANT) is True
    assert reader.all_markers(INSTANT) == set()
    assert reader.delete_dir(INSTANT) is False


def test_timeline_server_marker_files_are_read(local_root: str) -> None:
    storage = open_storage(local_root)
    directory = marker_dir(INSTANT)
    storage.write(f"{directory}/MARKERS.type", b"TIMELINE_SERVER_BASED")
    storage.write(
        f"{directory}/MARKERS0", f"10/{FILE}.marker.CREATE\n20/b.parquet.marker.MERGE\n".encode()
    )
    storage.write(f"{directory}/MARKERS1", b"30/c.parquet.marker.APPEND")
    storage.write(f"{directory}/MARKERS2", b"")
    assert read_markers_from_storage(storage, INSTANT) == {
        f"10/{FILE}.marker.CREATE",
        "20/b.parquet.marker.MERGE",
        "30/c.parquet.marker.APPEND",
    }


def test_markers_files_without_type_file_are_still_read(local_root: str) -> None:
    storage = open_storage(local_root)
    storage.write(f"{marker_dir(INSTANT)}/MARKERS0", b"10/a.parquet.marker.CREATE")
    assert read_markers_from_storage(storage, INSTANT) == {"10/a.parquet.marker.CREATE"}


def test_corrupt_marker_file_is_reported(local_root: str) -> None:
    storage = open_storage(local_root)
    storage.write(f"{marker_dir(INSTANT)}/MARKERS0", b"../../escape.parquet.marker.CREATE")
    with pytest.raises(DataLossError, match=f"{marker_dir(INSTANT)}/MARKERS0 is damaged"):
        read_markers_from_storage(storage, INSTANT)


def test_spec_validation() -> None:
    with pytest.raises(InvalidArgumentError) as kind:
        MarkerSpec("carrier-pigeon", "/t", INSTANT)  # type: ignore[arg-type]
    assert kind.value.field == "kind"
    with pytest.raises(InvalidArgumentError) as address:
        MarkerSpec("service", "/t", INSTANT)
    assert address.value.field == "service_address"
