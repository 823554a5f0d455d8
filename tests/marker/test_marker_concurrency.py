"""Many writers, overlapping names, several instants: each marker stored and created once."""

from __future__ import annotations

import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from tidemark.clients.marker import ServiceMarkerReader, ServiceMarkerWriter
from tidemark.services.marker.config import MarkerConfig
from tidemark.table.writes.markers import IOType, MarkerSpec, marker_name

from .conftest import FAST_CLIENT, INSTANT, StartService, as_table, stored_markers

OTHER_INSTANT = "20240102030405999"


def test_overlapping_creates_store_and_report_each_marker_once(
    start_service: StartService, local_root: str
) -> None:
    service = start_service(MarkerConfig(batch_interval_ms=5, num_marker_files=4))
    spec = MarkerSpec("service", local_root, INSTANT, service.address)
    writer = ServiceMarkerWriter(spec, FAST_CLIENT)
    files = [
        (f"p={i % 3}", f"file-{i}.parquet", IOType.CREATE if i % 2 else IOType.MERGE)
        for i in range(300)
    ]
    requests = files * 4
    random.Random(7).shuffle(requests)

    with ThreadPoolExecutor(32) as pool:
        created = list(pool.map(lambda marker: (marker, writer.create(*marker)), requests))

    created_count = Counter(marker for marker, was_created in created if was_created)
    assert set(created_count) == set(files)
    assert set(created_count.values()) == {1}
    expected = {marker_name(*marker) for marker in files}
    stored = stored_markers(local_root)
    assert Counter(stored) == Counter(dict.fromkeys(expected, 1))
    assert (
        ServiceMarkerReader(service.address, local_root, FAST_CLIENT).all_markers(INSTANT)
        == expected
    )


def test_batch_calls_dedup_within_and_across_calls(
    start_service: StartService, local_root: str
) -> None:
    service = start_service(MarkerConfig(batch_interval_ms=5, num_marker_files=2))
    writer = ServiceMarkerWriter(
        MarkerSpec("service", local_root, INSTANT, service.address), FAST_CLIENT
    )
    batch = [("", f"f{i}.parquet", IOType.CREATE) for i in range(50)]

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: writer.create_many(batch + batch[:5]), range(8)))

    per_marker = [sum(answer[i] for answer in answers) for i in range(len(batch) + 5)]
    assert per_marker == [1] * len(batch) + [0] * 5
    assert sorted(stored_markers(local_root)) == sorted(marker_name(*m) for m in batch)


def test_instants_and_tables_are_independent(
    start_service: StartService, local_root: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    other_root = as_table(str(tmp_path_factory.mktemp("other")))
    service = start_service(MarkerConfig(batch_interval_ms=5, num_marker_files=3))
    targets = [(local_root, INSTANT), (local_root, OTHER_INSTANT), (other_root, INSTANT)]
    writers = [
        ServiceMarkerWriter(MarkerSpec("service", root, instant, service.address), FAST_CLIENT)
        for root, instant in targets
    ]

    def write(index: int) -> bool:
        return writers[index % 3].create("", f"f{index // 3}.parquet", IOType.APPEND)

    with ThreadPoolExecutor(24) as pool:
        assert all(pool.map(write, range(300)))

    for root, instant in targets:
        reader = ServiceMarkerReader(service.address, root, FAST_CLIENT)
        assert reader.all_markers(instant) == {f"f{i}.parquet.marker.APPEND" for i in range(100)}
        assert reader.create_and_merge_markers(instant) == set()
        assert len(stored_markers(root, instant)) == 100
