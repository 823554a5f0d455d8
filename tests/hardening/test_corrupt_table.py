"""Damaged table metadata, MARKERS files and lease objects: every reader fails with
DataLossError (gRPC DATA_LOSS from a service) naming the file, in one line, and nothing
is written: the planner on a table whose hoodie.properties, replacecommit or requested
plan is damaged, the marker service on a marker dir whose MARKERS file or lease is
damaged, a writer taking a table lock whose newest lease is damaged; the planner's
trigger policy, the leftovers clean-up's watermark and rollback metadata; a snapshot
read of a damaged Parquet data file."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from planner.plankit import new_table
from table.table_testkit import file_tree

from tidemark.cli import main
from tidemark.clients.planner import PlannerClient, plan_options
from tidemark.config import ClientConfig
from tidemark.errors import DataLossError
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.marker.v1 import marker_service_pb2 as marker_pb
from tidemark.proto.marker.v1.marker_service_pb2_grpc import MarkerServiceStub
from tidemark.rpc.client import channel_for
from tidemark.services.marker.embedded import start_embedded_marker_service
from tidemark.services.planner.embedded import start_embedded_planner_service
from tidemark.services.planner.triggers import POLICY_PATH
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.files.reader import read_snapshot
from tidemark.table.leases.storage_lease import LOCK_DIR, StorageLease
from tidemark.table.metadata.actions import REPLACE_COMMIT, ROLLBACK
from tidemark.table.properties.config import PROPERTIES_PATH
from tidemark.table.timeline.instant import Instant, State
from tidemark.table.writes.commit import LEFTOVERS_WATERMARK, remove_rolled_back_leftovers
from tidemark.table.writes.markers import StorageMarkerReader, marker_dir, marker_lease_dir

from .damagekit import flip_bit, truncate

INSTANT = "20240102030405006"
LATER = "29990101000000000"
"""A replacecommit later than every commit of the test tables."""
CLIENT = ClientConfig(timeout_s=30.0, max_attempts=1)


@pytest.fixture(scope="module")
def planner() -> Iterator[PlannerClient]:
    with start_embedded_planner_service() as service:
        yield PlannerClient(service.address, CLIENT)


@pytest.fixture(scope="module")
def markers() -> Iterator[MarkerServiceStub]:
    with (
        start_embedded_marker_service() as service,
        channel_for(service.address) as channel,
    ):
        yield MarkerServiceStub(channel)


@pytest.fixture
def table(tmp_path: Path) -> HoodieTable:
    """A table of two partitions with a few small file groups (written with pyarrow)."""
    return new_table(tmp_path, {"eu": [20, 30], "us": [10]})


def _duplicate_key(path: Path) -> None:
    """The table name given a second time with another value (before the checksum)."""
    text = path.read_text()
    path.write_text(
        text.replace(
            "hoodie.table.checksum=", "hoodie.table.name=other\n" + "hoodie.table.checksum="
        )
    )


def _properties(damage: Callable[[Path], object]) -> Callable[[Path], str]:
    def apply(root: Path) -> str:
        damage(root / PROPERTIES_PATH)
        return PROPERTIES_PATH

    return apply


def _timeline_file(instant: Instant, data: bytes) -> Callable[[Path], str]:
    """Write ``data`` as ``instant``'s file (and, for a completed one, its requested and
    inflight files with empty payloads, as an abandoned plan leaves them)."""

    def apply(root: Path) -> str:
        if instant.state == State.COMPLETED:
            for state in (State.REQUESTED, State.INFLIGHT):
                (root / Instant(instant.timestamp, instant.action, state).path).write_bytes(b"")
        (root / instant.path).write_bytes(data)
        return instant.path

    return apply


TABLE_DAMAGES: dict[str, Callable[[Path], str]] = {
    "hoodie.properties truncated": _properties(truncate),
    "hoodie.properties with a duplicated key": _properties(_duplicate_key),
    "hoodie.properties binary garbage": _properties(lambda p: p.write_bytes(b"\x00\xff\xfe\x80")),
    "replacecommit invalid JSON": _timeline_file(
        Instant(LATER, REPLACE_COMMIT, State.COMPLETED), b'{"partitionToReplaceFileIds": {"eu"'
    ),
    "replacecommit.requested invalid Avro": _timeline_file(
        Instant(LATER, REPLACE_COMMIT, State.REQUESTED), b"Obj\x01garbage"
    ),
}


@pytest.mark.parametrize("damage", list(TABLE_DAMAGES), ids=list(TABLE_DAMAGES))
def test_the_planner_refuses_a_table_whose_metadata_is_damaged(
    table: HoodieTable, planner: PlannerClient, damage: str
) -> None:
    root = Path(table.uri)
    relative = TABLE_DAMAGES[damage](root)
    before = file_tree(root)

    with pytest.raises(DataLossError) as refused:
        planner.schedule(table.uri, plan_options(sort_columns=["name"]))

    message = str(refused.value)
    assert f"{relative} is damaged" in message and len(message.splitlines()) == 1, message
    assert file_tree(root) == before


MARKER_DAMAGES: dict[str, tuple[str, bytes]] = {
    "MARKERS file with a torn last line": (
        f"{marker_dir(INSTANT)}/MARKERS0",
        b"eu/a-0_0-1-0_20240102030405006.parquet.marker.CREATE\neu/b-0_1-1-0_2024010203",
    ),
    "MARKERS file of binary garbage": (f"{marker_dir(INSTANT)}/MARKERS1", b"\xff\xd8\x00\x10JFIF"),
    "marker dir lease of garbage": (f"{marker_lease_dir(INSTANT)}/0000000000", b"{owner: x"),
}


@pytest.mark.parametrize("damage", list(MARKER_DAMAGES), ids=list(MARKER_DAMAGES))
def test_the_marker_service_refuses_a_damaged_marker_dir(
    table: HoodieTable, markers: MarkerServiceStub, damage: str
) -> None:
    root = Path(table.uri)
    relative, data = MARKER_DAMAGES[damage]
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_bytes(data)
    before = file_tree(root)

    with pytest.raises(grpc.RpcError) as refused:
        markers.CreateMarker(
            marker_pb.CreateMarkerRequest(
                table=TableRef(base_path=table.uri),
                instant_time=INSTANT,
                marker=marker_pb.Marker(
                    partition_path="eu",
                    data_file_name="c-0_2-1-0_20240102030405006.parquet",
                    io_type=marker_pb.IO_TYPE_CREATE,
                ),
            ),
            timeout=30,
        )

    details = refused.value.details() or ""
    assert refused.value.code() == grpc.StatusCode.DATA_LOSS, details
    assert f"{relative} is damaged" in details and len(details.splitlines()) == 1, details
    assert file_tree(root) == before


@pytest.mark.parametrize("damage", [d for d in MARKER_DAMAGES if "MARKERS" in d])
def test_the_writer_reading_markers_refuses_a_damaged_markers_file(
    table: HoodieTable, damage: str
) -> None:
    relative, data = MARKER_DAMAGES[damage]
    table.storage.write(relative, data)

    with pytest.raises(DataLossError, match=f"{relative} is damaged"):
        StorageMarkerReader(table.storage).all_markers(INSTANT)


def test_a_table_lock_whose_newest_lease_is_damaged_is_not_taken(table: HoodieTable) -> None:
    root = Path(table.uri)
    relative = f"{LOCK_DIR}/{7:020d}"
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_bytes(b'{"owner": "w", "token": ')
    before = file_tree(root)

    with pytest.raises(DataLossError) as refused:
        StorageLease(open_storage(table.uri), "writer", heartbeat=False).acquire()

    message = str(refused.value)
    assert f"{relative} is damaged" in message and "delete it" in message, message
    assert file_tree(root) == before


def test_the_planner_refuses_a_damaged_trigger_policy(
    table: HoodieTable, planner: PlannerClient
) -> None:
    root = Path(table.uri)
    (root / POLICY_PATH).parent.mkdir(parents=True, exist_ok=True)
    (root / POLICY_PATH).write_bytes(b'{"everyNCommits": "many"')
    before = file_tree(root)

    with pytest.raises(DataLossError) as refused:
        planner.get_policy(table.uri)

    assert f"{POLICY_PATH} is damaged" in str(refused.value), refused.value
    assert "set the policy again" in str(refused.value)
    assert file_tree(root) == before


CLEAN_UP_DAMAGES: dict[str, tuple[str, bytes]] = {
    "leftovers watermark of garbage": (LEFTOVERS_WATERMARK, b"\x00\x01garbage"),
    "rollback metadata of invalid Avro": (
        Instant(LATER, ROLLBACK, State.COMPLETED).path,
        b"Obj\x01\x02\x16avro.schema",
    ),
}


@pytest.mark.parametrize("damage", list(CLEAN_UP_DAMAGES), ids=list(CLEAN_UP_DAMAGES))
def test_damaged_rollback_records_stop_the_clean_up_before_a_write(
    table: HoodieTable, damage: str
) -> None:
    """The leftovers clean-up every write runs first reads the watermark and the
    rollbacks after it."""
    root = Path(table.uri)
    relative, data = CLEAN_UP_DAMAGES[damage]
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_bytes(data)
    before = file_tree(root)

    with pytest.raises(DataLossError, match=f"{relative} is damaged"):
        remove_rolled_back_leftovers(HoodieTable.open(table.uri))  # its timeline read now

    assert file_tree(root) == before


@pytest.mark.parametrize("damage", ["truncated", "footer bit flip"])
def test_reading_a_damaged_data_file_names_it_in_one_line(
    table: HoodieTable, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    base_file = table.view().latest_base_files()[0]
    path = Path(table.uri) / base_file.path
    if damage == "truncated":
        truncate(path)
    else:
        flip_bit(path, path.stat().st_size - 12)  # inside the footer's Thrift metadata
    before = file_tree(Path(table.uri))

    with pytest.raises(DataLossError, match=f"{base_file.path} is damaged"):
        read_snapshot(HoodieTable.open(table.uri))
    assert main(["read", "--table", table.uri]) == 2

    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1, captured.err
    assert f"{base_file.path} is damaged" in captured.err
    assert file_tree(Path(table.uri)) == before
