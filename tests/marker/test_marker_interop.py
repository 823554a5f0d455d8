"""Hudi's timeline-server marker format, byte for byte, in both directions.

Expected bytes follow Hudi's MarkerDirState: each marker is appended to its file's
buffer followed by '\\n' and the whole buffer is rewritten on each flush; batches take
file indexes round robin from 0; MARKERS.type holds TIMELINE_SERVER_BASED, no newline.
"""

from __future__ import annotations

from pathlib import Path

from tidemark.clients.marker import ServiceMarkerReader, ServiceMarkerWriter
from tidemark.services.marker.config import MarkerConfig
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.metadata.actions import COMMIT
from tidemark.table.properties.config import TableConfig
from tidemark.table.writes.commit import rollback
from tidemark.table.writes.markers import IOType, MarkerSpec, StorageMarkerReader, marker_name

from .conftest import FAST_CLIENT, INSTANT, StartService, marker_files

HUDI_MARKERS0 = (
    b"p=1/aaaa-0_0-1-0_20240102030405006.parquet.marker.CREATE\n"
    b"p=1/bbbb-0_1-1-0_20240102030405006.parquet.marker.MERGE\n"
)
HUDI_MARKERS1 = b"p=2/cccc-0_2-1-0_20240102030405006.parquet.marker.APPEND\n"


def write_hudi_marker_dir(root: str) -> None:
    directory = Path(root, ".hoodie", ".temp", INSTANT)
    directory.mkdir(parents=True)
    (directory / "MARKERS.type").write_bytes(b"TIMELINE_SERVER_BASED")
    (directory / "MARKERS0").write_bytes(HUDI_MARKERS0)
    (directory / "MARKERS1").write_bytes(HUDI_MARKERS1)


def test_files_match_hudi_bytes(start_service: StartService, local_root: str) -> None:
    service = start_service(MarkerConfig(batch_interval_ms=5, num_marker_files=3))
    writer = ServiceMarkerWriter(
        MarkerSpec("service", local_root, INSTANT, service.address), FAST_CLIENT
    )
    markers = [
        (f"dt=2024-01-0{i}", f"f{i}_0-1-0_{INSTANT}.parquet", IOType.CREATE) for i in range(1, 6)
    ]

    for marker in markers:
        assert writer.create(*marker)

    names = [marker_name(*marker).encode() for marker in markers]
    assert marker_files(local_root) == {
        "MARKERS.type": b"TIMELINE_SERVER_BASED",
        "MARKERS0": names[0] + b"\n" + names[3] + b"\n",
        "MARKERS1": names[1] + b"\n" + names[4] + b"\n",
        "MARKERS2": names[2] + b"\n",
    }


def test_hudi_written_markers_are_listed_and_extended(
    start_service: StartService, local_root: str
) -> None:
    write_hudi_marker_dir(local_root)
    service = start_service(MarkerConfig(batch_interval_ms=5, num_marker_files=2))
    writer = ServiceMarkerWriter(
        MarkerSpec("service", local_root, INSTANT, service.address), FAST_CLIENT
    )
    reader = ServiceMarkerReader(service.address, local_root, FAST_CLIENT)
    hudi = {line for line in (HUDI_MARKERS0 + HUDI_MARKERS1).decode().split("\n") if line}

    assert reader.all_markers(INSTANT) == hudi
    assert reader.append_markers(INSTANT) == {m for m in hudi if m.endswith("APPEND")}
    assert not writer.create("p=1", f"aaaa-0_0-1-0_{INSTANT}.parquet", IOType.CREATE)
    assert writer.create("p=1", f"dddd-0_3-1-0_{INSTANT}.parquet", IOType.CREATE)

    # The batch answering the duplicate took file 0 (Hudi's round robin counts every batch).
    files = marker_files(local_root)
    new_marker = f"p=1/dddd-0_3-1-0_{INSTANT}.parquet.marker.CREATE\n".encode()
    assert files["MARKERS0"] == HUDI_MARKERS0
    assert files["MARKERS1"] == HUDI_MARKERS1 + new_marker
    assert files["MARKERS.type"] == b"TIMELINE_SERVER_BASED"
    assert len(reader.create_and_merge_markers(INSTANT)) == 3


def new_table(root: str) -> HoodieTable:
    config = TableConfig(
        name="orders",
        record_key_fields=("id",),
        partition_fields=("p",),
        precombine_field=None,
        hive_style=True,
        avro_schema='{"type":"record","name":"orders","fields":[{"name":"id","type":"long"}]}',
        key_generator_class=TableConfig.default_key_generator(("id",), ("p",)),
    )
    table = HoodieTable.create(root, config)
    table.timeline.create_requested(INSTANT, COMMIT)
    table.timeline.transition_inflight(INSTANT, COMMIT)
    return table


def test_rollback_through_service_deletes_files_of_hudi_markers(
    start_service: StartService, empty_root: str
) -> None:
    local_root = empty_root  # new_table writes the table's own properties
    table = new_table(local_root)
    write_hudi_marker_dir(local_root)
    data_files = [
        f"p=1/aaaa-0_0-1-0_{INSTANT}.parquet",
        f"p=1/bbbb-0_1-1-0_{INSTANT}.parquet",
        f"p=1/eeee-0_4-1-0_{INSTANT}.parquet",
    ]
    for path in data_files:
        table.storage.write(path, b"PAR1")
    service = start_service(MarkerConfig(batch_interval_ms=5))
    writer = ServiceMarkerWriter(
        MarkerSpec("service", local_root, INSTANT, service.address), FAST_CLIENT
    )
    assert writer.create("p=1", f"eeee-0_4-1-0_{INSTANT}.parquet", IOType.CREATE)

    result = rollback(table, INSTANT, ServiceMarkerReader(service.address, local_root, FAST_CLIENT))

    assert sorted(result.deleted_files) == data_files
    assert not any(table.storage.exists(path) for path in data_files)
    assert marker_files(local_root) == {}


def test_our_marker_files_drive_a_storage_rollback(
    start_service: StartService, empty_root: str
) -> None:
    local_root = empty_root  # new_table writes the table's own properties
    table = new_table(local_root)
    service = start_service(MarkerConfig(batch_interval_ms=5, num_marker_files=2))
    writer = ServiceMarkerWriter(
        MarkerSpec("service", local_root, INSTANT, service.address), FAST_CLIENT
    )
    data_files = [f"p={i}/f{i}-0_{i}-1-0_{INSTANT}.parquet" for i in range(4)]
    for path in data_files:
        partition, _, name = path.partition("/")
        assert writer.create(partition, name, IOType.CREATE)
        table.storage.write(path, b"PAR1")
    service.close()

    result = rollback(table, INSTANT, StorageMarkerReader(open_storage(local_root)))

    assert sorted(result.deleted_files) == data_files
    assert marker_files(local_root) == {}
