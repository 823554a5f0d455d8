"""Fixtures of the record-index tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tidemark.proto.index.v1.index_service_pb2_grpc import IndexServiceStub
from tidemark.rpc.client import channel_for
from tidemark.rpc.embedded import EmbeddedServer
from tidemark.services.index.config import IndexConfig
from tidemark.services.index.embedded import start_embedded_index_service
from tidemark.storage import Storage, open_storage

from .servicekit import KEYS, build_index, create_table

MAX_BATCH_KEYS = 1_000


@pytest.fixture
def local_storage(local_root: str) -> Storage:
    return open_storage(local_root)


@pytest.fixture
def indexed_table(local_root: str) -> str:
    """A Hudi table whose record index holds ``KEYS`` at ``location_of``."""
    build_index(create_table(local_root).storage, KEYS)
    return local_root


@pytest.fixture
def index_service() -> Iterator[EmbeddedServer]:
    """An index service on loopback that takes at most ``MAX_BATCH_KEYS`` keys per call."""
    with start_embedded_index_service(config=IndexConfig(max_batch_keys=MAX_BATCH_KEYS)) as service:
        yield service


@pytest.fixture
def index_stub(index_service: EmbeddedServer) -> Iterator[IndexServiceStub]:
    """A raw stub (no retries): tests see the exact status of one call."""
    with channel_for(index_service.address) as channel:
        yield IndexServiceStub(channel)
