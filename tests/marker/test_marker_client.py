"""The executor-side writer: picklable, retried, failing or falling back when unreachable."""

from __future__ import annotations

import pickle
import socket

import pytest

from tidemark.clients.marker import ServiceMarkerReader, ServiceMarkerWriter, marker_writer_for
from tidemark.config import ClientConfig
from tidemark.errors import UnavailableError
from tidemark.services.marker.config import MarkerConfig
from tidemark.storage import open_storage
from tidemark.table.writes.markers import IOType, MarkerSpec, read_markers_from_storage

from .conftest import FAST_CLIENT, INSTANT, StartService

UNREACHABLE_CLIENT = ClientConfig(
    timeout_s=1.0, max_attempts=2, initial_backoff_s=0.01, max_backoff_s=0.02
)


def closed_port_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def test_spec_builds_a_picklable_service_writer(
    start_service: StartService, local_root: str
) -> None:
    service = start_service(MarkerConfig(batch_interval_ms=5))
    writer = marker_writer_for(MarkerSpec("service", local_root, INSTANT, service.address))
    assert writer.create("p=1", "a.parquet", IOType.CREATE)

    copy = pickle.loads(pickle.dumps(writer))

    assert isinstance(copy, ServiceMarkerWriter)
    assert not copy.create("p=1", "a.parquet", IOType.CREATE)
    reader = ServiceMarkerReader(service.address, local_root, FAST_CLIENT)
    assert reader.dir_exists(INSTANT)
    assert reader.delete_dir(INSTANT)
    assert not reader.dir_exists(INSTANT)
    assert reader.all_markers(INSTANT) == set()


def test_unreachable_service_fails_the_writer(local_root: str) -> None:
    writer = ServiceMarkerWriter(
        MarkerSpec("service", local_root, INSTANT, closed_port_address()), UNREACHABLE_CLIENT
    )
    with pytest.raises(UnavailableError):
        writer.create("p=1", "a.parquet", IOType.CREATE)
    assert read_markers_from_storage(open_storage(local_root), INSTANT) == set()


def test_unreachable_service_falls_back_to_direct_markers_when_allowed(local_root: str) -> None:
    spec = MarkerSpec(
        "service", local_root, INSTANT, closed_port_address(), fallback_to_direct=True
    )
    writer = ServiceMarkerWriter(spec, UNREACHABLE_CLIENT)

    assert writer.create("p=1", "a.parquet", IOType.CREATE)
    assert writer.create_many(
        [("p=1", "a.parquet", IOType.CREATE), ("", "b.parquet", IOType.APPEND)]
    ) == [
        False,
        True,
    ]
    assert read_markers_from_storage(open_storage(local_root), INSTANT) == {
        "p=1/a.parquet.marker.CREATE",
        "b.parquet.marker.APPEND",
    }
