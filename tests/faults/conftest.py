"""Fixtures of the fault scenarios: fault proxies (for child writers, or for this
process), and child writers that are always killed at the end of a test (a failed
scenario leaves no process)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from faults.faultkit import Writer
from tidemark.storage.retry import MAX_ATTEMPTS_ENV
from tidemark.testing.s3local import FaultProxy


@pytest.fixture
def writer_proxy(s3_server: str) -> Iterator[FaultProxy]:
    """A FaultProxy in front of the S3 server for the child writers (give them
    ``AWS_ENDPOINT_URL=proxy.endpoint``); the test's own requests go straight to the
    server, so a second writer in the test is not hit by the faults."""
    with FaultProxy(s3_server) as proxy:
        yield proxy


@pytest.fixture
def driver_faulty_s3(s3_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    """A fault proxy between the driver (this process) and the S3 server; executors keep
    talking to the server directly. Two attempts per storage request keep failures fast."""
    with FaultProxy(s3_server) as fault_proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", fault_proxy.endpoint)
        monkeypatch.setenv(MAX_ATTEMPTS_ENV, "2")
        yield fault_proxy


@pytest.fixture
def start_writer() -> Iterator[Callable[..., Writer]]:
    """``start_writer(table, input, operation, *options, env=...)``: a ``tidemark write``
    child process (see ``Writer.start``)."""
    started: list[Writer] = []

    def start(
        table: str,
        input_path: Path,
        operation: str,
        *options: str,
        env: dict[str, str] | None = None,
    ) -> Writer:
        writer = Writer.start(table, input_path, operation, *options, env=env)
        started.append(writer)
        return writer

    yield start
    for writer in started:
        writer.kill()
