"""Marker services on real gRPC servers (loopback, ephemeral ports) and helpers to call them."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tidemark.clock import SYSTEM_CLOCK, Clock
from tidemark.config import ClientConfig
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.marker.v1 import marker_service_pb2 as pb
from tidemark.proto.marker.v1.marker_service_pb2_grpc import MarkerServiceStub
from tidemark.rpc.client import channel_for
from tidemark.rpc.process import ServeProcess
from tidemark.rpc.status import ERROR_FIELD_KEY
from tidemark.services.marker.config import MarkerConfig
from tidemark.services.marker.embedded import EmbeddedMarkerService, start_embedded_marker_service
from tidemark.storage import open_storage
from tidemark.table.properties.config import PROPERTIES_PATH, format_properties

INSTANT = "20240102030405006"
FAST_CLIENT = ClientConfig(
    timeout_s=10.0, max_attempts=3, max_total_s=20.0, initial_backoff_s=0.05, max_backoff_s=0.2
)

StartService = Callable[..., EmbeddedMarkerService]


def as_table(uri: str) -> str:
    """``uri`` made a table (its ``hoodie.properties``): the service serves tables only."""
    open_storage(uri).write(PROPERTIES_PATH, format_properties({"hoodie.table.name": "t"}))
    return uri


def only_the_table(root: str) -> bool:
    """Whether ``root`` holds nothing but what ``as_table`` wrote."""
    return [str(p.relative_to(root)) for p in Path(root).rglob("*") if p.is_file()] == [
        PROPERTIES_PATH
    ]


@pytest.fixture
def empty_root(tmp_path: Path) -> str:
    """A fresh empty local folder, for a test that creates its table itself."""
    root = tmp_path / "empty"
    root.mkdir()
    return str(root)


@pytest.fixture
def local_root(local_root: str) -> str:
    """The shared fresh local root, made a table."""
    return as_table(local_root)


@pytest.fixture
def s3_bucket(s3_bucket: str) -> str:
    """The shared fresh S3 root, made a table."""
    return as_table(s3_bucket)


@pytest.fixture
def start_service() -> Iterator[StartService]:
    """``start_service(config=MarkerConfig(...), allowed_roots=[...], clock=...)``; stopped at
    teardown."""
    started: list[EmbeddedMarkerService] = []

    def start(
        config: MarkerConfig | None = None,
        allowed_roots: Sequence[str] = (),
        clock: Clock = SYSTEM_CLOCK,
    ) -> EmbeddedMarkerService:
        service = start_embedded_marker_service(
            config=config or MarkerConfig(batch_interval_ms=10),
            allowed_roots=allowed_roots,
            clock=clock,
        )
        started.append(service)
        return service

    yield start
    for service in reversed(started):
        service.close()


@pytest.fixture
def stub_for() -> Iterator[Callable[[str], MarkerServiceStub]]:
    """A raw stub (no retries) so tests see the exact status of one call."""
    channels: list[grpc.Channel] = []

    def make(address: str) -> MarkerServiceStub:
        channel = channel_for(address)
        channels.append(channel)
        return MarkerServiceStub(channel)

    yield make
    for channel in channels:
        channel.close()


def create_request(
    table: str, name: str, io_type: pb.IOType = pb.IO_TYPE_CREATE, partition: str = "p=1"
) -> pb.CreateMarkerRequest:
    return pb.CreateMarkerRequest(
        table=TableRef(base_path=table),
        instant_time=INSTANT,
        marker=pb.Marker(partition_path=partition, data_file_name=name, io_type=io_type),
    )


def error_field(error: grpc.RpcError) -> str | None:
    assert isinstance(error, grpc.Call)
    return dict(error.trailing_metadata() or ()).get(ERROR_FIELD_KEY)


def marker_files(root: str, instant: str = INSTANT) -> dict[str, bytes]:
    """Every object under the instant's marker dir, by name."""
    directory = Path(root, ".hoodie", ".temp", instant)
    if not directory.is_dir():
        return {}
    return {path.name: path.read_bytes() for path in directory.iterdir() if path.is_file()}


def stored_markers(root: str, instant: str = INSTANT) -> list[str]:
    """Marker names in MARKERS<n> files, with repeats (to prove each is stored once)."""
    names: list[str] = []
    for name, content in marker_files(root, instant).items():
        if re.fullmatch(r"MARKERS\d+", name):
            names.extend(line for line in content.decode().split("\n") if line)
    return names


@pytest.fixture
def serve_process() -> Iterator[Callable[[dict[str, str]], ServeProcess]]:
    processes: list[ServeProcess] = []

    def start(env: dict[str, str]) -> ServeProcess:
        process = ServeProcess("marker", env=env, args=("--log-format", "console"))
        processes.append(process)
        return process

    yield start
    for process in processes:
        if process.process.poll() is None:
            process.kill()


def metric(port: int, sample_name: str, host: str = "127.0.0.1", **labels: str) -> float:
    """One sample's value from the service's real /metrics endpoint (0 when absent)."""
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == sample_name and labels.items() <= sample.labels.items()
    )
