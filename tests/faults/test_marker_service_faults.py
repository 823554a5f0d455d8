"""Writes with a marker service: relative table paths, an unreachable service, and a
writer killed (SIGKILL) while a running ``tidemark serve marker`` leases its marker dir."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from pyspark.sql import SparkSession

from faults.faultkit import (
    KEYS,
    LOCK_LEASE_S,
    Row,
    StageHook,
    assert_committed_and_clean,
    model_of,
    newest_pending,
    rows,
    start_stopping_writer,
    write_rows,
)
from tidemark.errors import UnavailableError
from tidemark.proto.common.v1.common_pb2 import TableRef
from tidemark.proto.marker.v1 import marker_service_pb2 as pb
from tidemark.proto.marker.v1.marker_service_pb2_grpc import MarkerServiceStub
from tidemark.rpc.client import channel_for
from tidemark.rpc.process import ServeProcess
from tidemark.services.marker.config import MarkerConfig
from tidemark.services.marker.embedded import start_embedded_marker_service
from tidemark.storage import open_storage
from tidemark.table.leases.storage_lease import LockHolder, StorageLease
from tidemark.table.properties.config import PROPERTIES_PATH, format_properties
from tidemark.table.writes.markers import marker_dir, marker_lease_dir
from tidemark.testing.s3local import free_port

SERVICE_LEASE_S = 3
"""The external service's marker-dir lease: renewed every second."""


@pytest.fixture
def serve_marker() -> Iterator[ServeProcess]:
    """A running ``tidemark serve marker`` in its own process (and working directory)."""
    process = ServeProcess(
        "marker",
        env={"TIDEMARK_MARKER_LEASE_S": str(SERVICE_LEASE_S)},
        args=("--log-format", "console"),
    )
    yield process
    process.kill()


def _write_with_service(
    spark: SparkSession,
    batch: list[Row],
    table: str,
    operation: str,
    address: str,
    **options: Any,
) -> None:
    """``write_rows`` with markers in the marker service at ``address``."""
    write_rows(
        spark, batch, table, operation, markers="service", marker_service_address=address, **options
    )


def _upsert_through_another_service(spark: SparkSession, table: str, batch: list[Row]) -> None:
    """An upsert of ``batch`` (the next write) with markers in a new embedded service."""
    with start_embedded_marker_service() as other_service:
        _write_with_service(spark, batch, table, "upsert", other_service.address)


def test_the_service_refuses_a_relative_table_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative path would resolve against the service's own working directory."""
    monkeypatch.chdir(tmp_path)
    with start_embedded_marker_service() as service, channel_for(service.address) as ch:
        request = pb.CreateMarkerRequest(
            table=TableRef(base_path="tables/t"),
            instant_time="20240102030405006",
            marker=pb.Marker(
                partition_path="p", data_file_name="f.parquet", io_type=pb.IO_TYPE_CREATE
            ),
        )
        with pytest.raises(grpc.RpcError) as refused:
            MarkerServiceStub(ch).CreateMarker(request)
    assert isinstance(refused.value, grpc.Call)
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "table.base_path" in (refused.value.details() or "")
    assert list(tmp_path.iterdir()) == []


def test_a_relative_table_path_is_written_with_service_markers(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, serve_marker: ServeProcess
) -> None:
    """``--table ../t``: the writer sends the service the absolute, normalised path."""
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    batch = rows(0, 12, "rel")
    _write_with_service(spark, batch, "../t", "bulk_insert", serve_marker.address, **KEYS)
    assert_committed_and_clean(str(tmp_path / "t"), model_of(batch))


def test_an_unreachable_marker_service_is_named_and_nothing_is_created(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIDEMARK_CLIENT_MAX_ATTEMPTS", "1")
    address = f"127.0.0.1:{free_port()}"
    table = tmp_path / "table"
    with pytest.raises(UnavailableError) as failed:
        _write_with_service(spark, rows(0, 4, "x"), str(table), "bulk_insert", address, **KEYS)
    assert f"marker service at {address}" in str(failed.value)
    assert failed.value.field == "marker_service_address"
    assert not table.exists()


def test_a_killed_writer_is_rolled_back_at_once_while_its_marker_service_lives(
    spark: SparkSession, tmp_path: Path, serve_marker: ServeProcess
) -> None:
    """The dead writer's marker dir is leased by the still running service; the next
    write (another marker service) rolls the instant back holding the table lock, and
    the running service gives the dir up instead of renewing its lease."""
    table = str(tmp_path / "table")
    first = rows(0, 20, "v1")
    _write_with_service(spark, first, table, "bulk_insert", serve_marker.address, **KEYS)
    writer = start_stopping_writer(
        table,
        rows(10, 20, "dead", ts=2),
        "upsert",
        stop_at="started:commit",
        marker_service=serve_marker.address,
    )
    dead = newest_pending(table)
    storage = open_storage(table)
    assert any(storage.list(marker_lease_dir(dead) + "/"))
    writer.kill()
    writer.wait()

    time.sleep(LOCK_LEASE_S)
    second = rows(25, 10, "v2", ts=3)
    _upsert_through_another_service(spark, table, second)
    time.sleep(2 * SERVICE_LEASE_S / 3)
    assert list(storage.list(marker_lease_dir(dead) + "/")) == []
    assert_committed_and_clean(table, model_of(first, second))


def test_a_killed_marker_service_fails_the_write_naming_it(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    serve_marker: ServeProcess,
) -> None:
    """The service dies (SIGKILL) before the commit: the write names it and says its
    instant did not commit; the next write (another service) rolls that instant back."""
    monkeypatch.setenv("TIDEMARK_CLIENT_MAX_ATTEMPTS", "2")
    table = str(tmp_path / "table")
    with pytest.raises(UnavailableError) as failed:
        _write_with_service(
            spark,
            rows(0, 20, "lost"),
            table,
            "bulk_insert",
            serve_marker.address,
            listener=StageHook(started={"commit": serve_marker.kill}),
            **KEYS,
        )
    message = str(failed.value)
    assert f"marker service at {serve_marker.address}" in message
    assert "was not committed" in message

    kept = rows(5, 10, "kept")
    _upsert_through_another_service(spark, table, kept)
    assert_committed_and_clean(table, model_of(kept))


def _delete_request(table: str, instant: str, holder: LockHolder) -> pb.DeleteMarkerDirRequest:
    request = pb.DeleteMarkerDirRequest(table=TableRef(base_path=table), instant_time=instant)
    request.table_lock.generation = holder.generation
    request.table_lock.token = holder.token
    return request


def test_only_the_table_lock_holder_deletes_a_dir_another_service_leases(tmp_path: Path) -> None:
    """A forged or stale lock is refused and deletes nothing; the holder's deletion
    works at once, and the service that leased the dir gives it up at its next renewal
    instead of writing its lease back."""
    table, instant = str(tmp_path), "20240102030405006"
    config = MarkerConfig(batch_interval_ms=5, lease_s=SERVICE_LEASE_S)
    marker = pb.Marker(partition_path="p", data_file_name="f.parquet", io_type=pb.IO_TYPE_CREATE)
    storage = open_storage(table)
    storage.write(PROPERTIES_PATH, format_properties({"hoodie.table.name": "t"}))
    with (
        start_embedded_marker_service(config=config) as owner,
        start_embedded_marker_service(config=config) as other,
        channel_for(owner.address) as owner_channel,
        channel_for(other.address) as other_channel,
    ):
        create = pb.CreateMarkerRequest(
            table=TableRef(base_path=table), instant_time=instant, marker=marker
        )
        assert MarkerServiceStub(owner_channel).CreateMarker(create).created
        deleting = MarkerServiceStub(other_channel).DeleteMarkerDir
        with StorageLease(storage, "test-writer", lease_s=30) as lock:
            held = lock.holder
            assert held is not None
            forged = LockHolder(held.generation, "not-the-token")
            with pytest.raises(grpc.RpcError) as refused:
                deleting(_delete_request(table, instant, forged))
            assert isinstance(refused.value, grpc.Call)
            assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
            assert "table_lock" in (refused.value.details() or "")
            assert any(storage.list(marker_dir(instant) + "/"))

            assert deleting(_delete_request(table, instant, held)).deleted
        with pytest.raises(grpc.RpcError) as released:
            deleting(_delete_request(table, instant, held))
        assert isinstance(released.value, grpc.Call)
        assert released.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        time.sleep(2 * SERVICE_LEASE_S / 3)
        assert list(storage.list(marker_dir(instant) + "/")) == []
        assert list(storage.list(marker_lease_dir(instant) + "/")) == []
