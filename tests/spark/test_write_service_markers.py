"""Spark writes with service markers (an embedded marker service) on local disk and S3."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from faults.faultkit import StageHook
from pyspark.sql import SparkSession

from spark.killed_writer import LEASE_S as KILLED_LEASE_S
from spark.sparkkit import kill_writer_before_commit, local_frame
from tidemark.cli import main
from tidemark.faults import FAIL_TASK_ATTEMPT_PROPERTY
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions
from tidemark.services.marker.embedded import EmbeddedMarkerService, start_embedded_marker_service
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.writes.markers import read_markers_from_storage

from .sparkkit import assert_readers_agree, data_files, files_in_view

SCHEMA = "id int, name string, part string, ts long"
DATA = ["id", "name", "part", "ts"]
KEYS: dict[str, Any] = {
    "record_key_fields": ["id"],
    "partition_fields": ["part"],
    "precombine_field": "ts",
}
LEASE_ENV = {"TIDEMARK_MARKER_LEASE_S": str(KILLED_LEASE_S)}


@pytest.fixture
def marker_service(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddedMarkerService]:
    monkeypatch.setenv("TIDEMARK_MARKER_LEASE_S", LEASE_ENV["TIDEMARK_MARKER_LEASE_S"])
    with start_embedded_marker_service() as service:
        yield service


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def any_uri(request: pytest.FixtureRequest, table_uri: str) -> str:
    if request.param == "s3":
        return str(request.getfixturevalue("s3_bucket"))
    return table_uri


def _rows(n: int, name: str, ts: int) -> list[tuple[int, str, str, int]]:
    return [(i, name, "p" if i % 2 else "q", ts) for i in range(n)]


def _service_markers(marker_service: EmbeddedMarkerService) -> dict[str, Any]:
    """``write`` options for markers through ``marker_service``."""
    return {"markers": "service", "marker_service_address": marker_service.address}


def _temp_objects(uri: str) -> list[str]:
    return [info.path for info in open_storage(uri).list(".hoodie/.temp/")]


def test_service_markers_commit_rows_and_reconcile_retried_attempts(
    spark: SparkSession, any_uri: str, marker_service: EmbeddedMarkerService
) -> None:
    service = _service_markers(marker_service)
    spark.sparkContext.setLocalProperty(FAIL_TASK_ATTEMPT_PROPERTY, "0")
    try:
        rows_v1 = local_frame(spark, _rows(6, "v1", 1), SCHEMA)
        bulk = write(spark, rows_v1, any_uri, "bulk_insert", WriteOptions(**KEYS, **service))
        rows_v2 = local_frame(spark, _rows(8, "v2", 2), SCHEMA)
        upsert = write(spark, rows_v2, any_uri, "upsert", WriteOptions(**service))
    finally:
        spark.sparkContext.setLocalProperty(FAIL_TASK_ATTEMPT_PROPERTY, None)  # type: ignore[arg-type]
    assert bulk.files_reconciled >= 1, "failed first attempts leave files that reconcile deletes"
    assert upsert.files_reconciled >= 1
    assert marker_service.storage_requests().get("put", 0) >= 2
    rows = assert_readers_agree(any_uri, DATA)
    assert {k: r["name"] for k, r in rows.items()} == {str(i): "v2" for i in range(8)}
    assert _temp_objects(any_uri) == [], "no marker dir may outlive its commit"
    committed = {
        stat.path
        for instant in HoodieTable.open(any_uri).timeline.completed(frozenset({"commit"}))
        for stat in HoodieTable.open(any_uri).timeline.read_metadata(instant).write_stats
    }
    assert data_files(any_uri) == committed
    assert files_in_view(any_uri) <= committed


def test_killed_job_with_service_markers_is_rolled_back_from_its_markers(
    spark: SparkSession, table_uri: str, marker_service: EmbeddedMarkerService
) -> None:
    service = _service_markers(marker_service)
    rows_v1 = local_frame(spark, _rows(4, "v1", 1), SCHEMA)
    write(spark, rows_v1, table_uri, "bulk_insert", WriteOptions(**KEYS, **service))
    committed = data_files(table_uri)
    kill_writer_before_commit(table_uri, "1,2,10", "service", env=LEASE_ENV)
    (pending,) = HoodieTable.open(table_uri).timeline.pending()
    storage = open_storage(table_uri)
    orphans = data_files(table_uri) - committed
    assert orphans, "the killed job wrote data files"
    markers = read_markers_from_storage(storage, pending.timestamp)
    assert {m.split(".marker.")[0] for m in markers} == orphans
    assert any(p.rsplit("/", 1)[1].startswith("MARKERS") for p in _temp_objects(table_uri))
    time.sleep(1.5 * KILLED_LEASE_S)  # the dead writer's table lock and marker dir lease run out
    rows_v3 = local_frame(spark, [(3, "v3", "p", 3)], SCHEMA)
    write(spark, rows_v3, table_uri, "upsert", WriteOptions(**service))
    timeline = HoodieTable.open(table_uri).timeline
    assert [i.action for i in timeline.completed()] == ["commit", "rollback", "commit"]
    assert data_files(table_uri) & orphans == set()
    assert _temp_objects(table_uri) == []
    rows = assert_readers_agree(table_uri, DATA)
    assert {k: r["name"] for k, r in rows.items()} == {"0": "v1", "1": "v1", "2": "v1", "3": "v3"}


class InjectedCommitFailureError(RuntimeError):
    """Raised by a write's stage listener once the write's files and markers exist."""


def _failed_upsert(
    spark: SparkSession, uri: str, service: dict[str, Any], keys: list[int]
) -> tuple[str, set[str]]:
    """An upsert through the marker service that fails as its commit starts; returns its
    pending instant and the data files its markers name."""
    seen: dict[str, set[str]] = {}

    def fail() -> None:
        (pending,) = HoodieTable.open(uri).timeline.pending()
        assert pending.path == f".hoodie/timeline/{pending.timestamp}.inflight"
        marked = read_markers_from_storage(open_storage(uri), pending.timestamp)
        seen[pending.timestamp] = {m.split(".marker.")[0] for m in marked}
        names = [path.rsplit("/", 1)[1] for path in _temp_objects(uri)]
        assert any(name.startswith("MARKERS") for name in names)  # the service's files
        assert not any(".marker." in name for name in names)  # no direct marker objects
        raise InjectedCommitFailureError(pending.timestamp)

    df = local_frame(spark, [(key, "failed", "p", 9) for key in keys], SCHEMA)
    with pytest.raises(InjectedCommitFailureError):
        write(
            spark,
            df,
            uri,
            "upsert",
            WriteOptions(**service),
            listener=StageHook(started={"commit": fail}),
        )
    ((instant, marked),) = seen.items()
    return instant, marked


@pytest.mark.parametrize("version", [8, 9])
def test_service_markers_and_rollbacks_on_layout_two(
    spark: SparkSession,
    table_uri: str,
    marker_service: EmbeddedMarkerService,
    version: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A table at 8 or 9 written through the marker service; a write failing after its
    files and markers exist is rolled back by `tidemark rollback`, another by the next
    write, each on `.hoodie/timeline/` and from the markers the service wrote."""
    service = _service_markers(marker_service)
    rows_v1 = local_frame(spark, _rows(4, "v1", 1), SCHEMA)
    options = WriteOptions(**KEYS, **service, table_version=version)
    write(spark, rows_v1, table_uri, "bulk_insert", options)
    assert marker_service.storage_requests().get("put", 0) >= 1
    assert _temp_objects(table_uri) == []
    committed = data_files(table_uri)

    instant, marked = _failed_upsert(spark, table_uri, service, [1, 2, 10])
    assert marked and marked == data_files(table_uri) - committed
    assert main(["rollback", "--table", table_uri, "--instant", instant]) == 0
    assert f"deleted {len(marked)} files" in capsys.readouterr().out
    assert data_files(table_uri) == committed

    instant, marked = _failed_upsert(spark, table_uri, service, [0, 11])
    assert marked and marked == data_files(table_uri) - committed
    write(spark, local_frame(spark, [(3, "v3", "p", 3)], SCHEMA), table_uri, "upsert")
    table = HoodieTable.open(table_uri)
    completed = table.timeline.completed()
    assert [i.action for i in completed] == ["commit", "rollback", "rollback", "commit"]
    assert all(
        i.path == f".hoodie/timeline/{i.timestamp}_{i.completion_time}.{i.action}"
        for i in completed
    )
    assert table.timeline.pending() == []
    assert data_files(table_uri) & marked == set()
    assert _temp_objects(table_uri) == []
    rows = assert_readers_agree(table_uri, DATA)
    assert {k: r["name"] for k, r in rows.items()} == {"0": "v1", "1": "v1", "2": "v1", "3": "v3"}
