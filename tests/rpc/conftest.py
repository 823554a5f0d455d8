"""Fixtures hosting the probe service on the real server runtime, on loopback."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import grpc
import pytest
import structlog

from tidemark.config import ServerConfig
from tidemark.logs import use_library_defaults
from tidemark.rpc.registry import ServiceDefinition
from tidemark.rpc.server import RunningServer, build_server

from .probe import SERVICE, ProbeServicer, Unary


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """Leave no handler pointing at this test's captured stderr, and the library's
    logging defaults as ``import tidemark`` set them."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    structlog.contextvars.clear_contextvars()
    yield
    structlog.contextvars.clear_contextvars()
    structlog.reset_defaults()
    root.handlers[:] = handlers
    root.setLevel(level)
    use_library_defaults()


@pytest.fixture
def servicer() -> ProbeServicer:
    return ProbeServicer()


@pytest.fixture
def definition(servicer: ProbeServicer) -> ServiceDefinition:
    return ServiceDefinition(name="test", full_name=SERVICE, add_to_server=servicer.add_to_server)


@pytest.fixture
def server(servicer: ProbeServicer, definition: ServiceDefinition) -> Iterator[RunningServer]:
    running = build_server(ServerConfig(port=0, metrics_port=0), [definition])
    yield running
    servicer.release.set()
    running.stop(0)


@pytest.fixture
def channel(server: RunningServer) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as open_channel:
        yield open_channel


@pytest.fixture
def method_path() -> Callable[[str], str]:
    """``method_path("Echo")`` -> ``/tidemark.test.v1.TestService/Echo``."""
    return lambda name: f"/{SERVICE}/{name}"


@pytest.fixture
def unary(channel: grpc.Channel, method_path: Callable[[str], str]) -> Unary:
    """``unary("Echo")`` -> the raw-bytes callable for that test method."""
    return lambda name: channel.unary_unary(method_path(name), None, None)
