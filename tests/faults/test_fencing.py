"""A writer that loses its lock never publishes, and nothing it wrote becomes readable.

Each scenario runs a ``tidemark write`` child process against the local S3 server (or a
local table), breaks it (503s on the lock, SIGSTOP past its lease, SIGKILL), lets a second
writer in this process take over, and ends with one more write, after which both readers
return exactly the committed rows and no pending instant, marker, lease or temporary file
of the broken writer is left.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from spark.sparkkit import rows_by_key, snapshot

from faults.faultkit import (
    DATA,
    Writer,
    assert_exactly_committed,
    completed_instants,
    error_line,
    has_markers,
    model_rows,
    newest_pending,
    temporary_files,
    wait_for,
    wait_for_lease_expiry,
    write_input,
)
from spark_jobs.write import write
from tidemark.s3local import FaultProxy

pytestmark = pytest.mark.spark

LOCK_REQUESTS = r"\.tidemark(/|%2F)lock"
"""The lock's objects and listings in request targets (list prefixes are URL-encoded)."""
DATA_FILE_UPLOADS = r"\.parquet$"
FAULT_S = 12.0


def _write(spark: SparkSession, uri: str, path: Path, operation: str) -> str:
    """A write by a second writer, in this process; returns its instant."""
    df = spark.read.parquet(str(path))
    return write(
        spark, df, uri, operation, record_key_fields=["id"], partition_fields=["part"]
    ).instant


def _visible_rows(uri: str) -> dict[str, dict]:
    return {
        key: {column: row[column] for column in DATA}
        for key, row in rows_by_key(snapshot(uri)).items()
    }


def _assert_lost_lock(writer: Writer) -> None:
    code, out, err = writer.finish()
    assert code == 2, out + err[-3000:]
    assert "lost the table lock" in error_line(err)
    assert "Traceback" not in err
    assert "committed instant" not in out


def test_lock_renewals_failing_for_12_s_never_publish(
    spark: SparkSession,
    s3_bucket: str,
    tmp_path: Path,
    writer_proxy: FaultProxy,
    start_writer: Callable[..., Writer],
) -> None:
    uri = s3_bucket
    writer_proxy.delay(1000, method="PUT", path_pattern=DATA_FILE_UPLOADS)
    first_input = write_input(tmp_path / "first.parquet", range(200_000), "first")
    first = start_writer(
        uri,
        first_input,
        "bulk_insert",
        "--target-file-mb",
        "1",
        env={"AWS_ENDPOINT_URL": writer_proxy.endpoint},
    )
    wait_for(lambda: has_markers(uri), "the first writer's tasks", first)
    failed = newest_pending(uri)
    writer_proxy.fail_always(path_pattern=LOCK_REQUESTS)
    faulted = time.monotonic()
    wait_for_lease_expiry(uri)
    second = range(1_000_000, 1_000_500)
    _write(spark, uri, write_input(tmp_path / "second.parquet", second, "second"), "bulk_insert")
    model = model_rows(second, "second")
    time.sleep(max(0.0, FAULT_S - (time.monotonic() - faulted)))
    writer_proxy.clear()
    _assert_lost_lock(first)
    assert failed not in completed_instants(uri)
    assert _visible_rows(uri) == model
    third = range(1_000_000, 1_000_100)
    _write(spark, uri, write_input(tmp_path / "third.parquet", third, "third"), "upsert")
    model |= model_rows(third, "third")
    assert_exactly_committed(uri, model)


def test_writer_paused_past_its_lease_never_publishes(
    spark: SparkSession,
    s3_bucket: str,
    tmp_path: Path,
    writer_proxy: FaultProxy,
    start_writer: Callable[..., Writer],
) -> None:
    uri = s3_bucket
    base = range(1_000)
    _write(spark, uri, write_input(tmp_path / "base.parquet", base, "base"), "bulk_insert")
    model = model_rows(base, "base")
    writer_proxy.delay(1000, method="PUT", path_pattern=DATA_FILE_UPLOADS)
    paused_input = write_input(tmp_path / "paused.parquet", range(1_000, 200_000), "paused")
    paused = start_writer(
        uri,
        paused_input,
        "bulk_insert",
        "--target-file-mb",
        "1",
        env={"AWS_ENDPOINT_URL": writer_proxy.endpoint},
    )
    wait_for(lambda: has_markers(uri), "the paused writer's tasks", paused)
    failed = newest_pending(uri)
    paused.signal_tree(signal.SIGSTOP)
    wait_for_lease_expiry(uri)
    second = range(100)
    _write(spark, uri, write_input(tmp_path / "second.parquet", second, "second"), "upsert")
    model |= model_rows(second, "second")
    paused.signal_tree(signal.SIGCONT)
    _assert_lost_lock(paused)
    assert failed not in completed_instants(uri)
    assert _visible_rows(uri) == model
    third = range(100, 200)
    _write(spark, uri, write_input(tmp_path / "third.parquet", third, "third"), "upsert")
    model |= model_rows(third, "third")
    assert_exactly_committed(uri, model)


def test_killed_writer_leaves_temporary_files_the_next_write_removes(
    spark: SparkSession, tmp_path: Path, start_writer: Callable[..., Writer]
) -> None:
    """On local disk a file is written to a hidden temporary and renamed when complete;
    with 64 MB files each task holds one open temporary per partition all along."""
    uri = str(tmp_path / "table")
    base = range(1_000)
    _write(spark, uri, write_input(tmp_path / "base.parquet", base, "base"), "bulk_insert")
    model = model_rows(base, "base")
    killed_input = write_input(tmp_path / "killed.parquet", range(1_000, 600_000), "killed")
    killed = start_writer(uri, killed_input, "bulk_insert", "--target-file-mb", "64")
    wait_for(lambda: temporary_files(uri) != [], "a file being written", killed)
    killed.signal_tree(signal.SIGKILL)
    killed.finish()
    assert temporary_files(uri) != []
    assert _visible_rows(uri) == model
    wait_for_lease_expiry(uri)
    second = range(500, 600)
    _write(spark, uri, write_input(tmp_path / "second.parquet", second, "second"), "upsert")
    model |= model_rows(second, "second")
    assert_exactly_committed(uri, model)
