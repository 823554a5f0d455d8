"""A writer that loses its write's lease never publishes, and nothing it wrote becomes
readable.

Each scenario runs a ``tidemark write`` child process against the local S3 server (or a
local table), breaks it while it writes its files (503s on its lease, SIGSTOP past its
lease, SIGKILL), lets a second writer in this process roll it back once its lease ran
out, and ends with one more write, after which both readers return exactly the committed
rows and no pending instant, marker, lease or temporary file of the broken writer is
left.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    temporary_data_files,
    wait_for,
    wait_for_write_lease_expiry,
    write_input,
)
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions
from tidemark.testing.s3local import FaultProxy

LEASE_REQUESTS = r"\.tidemark(/|%2F)(lock|writes)"
"""The table lock's and the writes' lease objects and listings in request targets (list
prefixes are URL-encoded)."""
DATA_FILE_UPLOADS = r"\.parquet$"
FAULT_S = 12.0

SlowWriter = Callable[[Path, str], tuple[Writer, str]]
"""``start_slow_writer``'s function: (input path, what to call it) -> writer, instant."""


def _write(
    spark: SparkSession, uri: str, tmp_path: Path, ids: range, name: str, operation: str
) -> dict[str, dict[str, Any]]:
    """A write of ``write_input(ids, name)`` by a second writer, in this process; returns
    the model of its rows."""
    df = spark.read.parquet(str(write_input(tmp_path / f"{name}.parquet", ids, name)))
    write(
        spark, df, uri, operation, WriteOptions(record_key_fields=["id"], partition_fields=["part"])
    )
    return model_rows(ids, name)


def _visible_rows(uri: str) -> dict[str, dict]:
    return {
        key: {column: row[column] for column in DATA}
        for key, row in rows_by_key(snapshot(uri)).items()
    }


def _assert_lost_lease(writer: Writer, instant: str) -> None:
    """The fenced writer fails naming why: its lease lost, or, when a resumed task reaches
    its inflight check before the writer notices the loss, its instant rolled back."""
    code, out, err = writer.finish()
    assert code == 2, out + err[-3000:]
    line = error_line(err)
    assert f"lost the write {instant} lock" in line or (
        f"instant {instant} is no longer inflight" in line
        and f"instant {instant} was rolled back" in line
    ), line
    assert "Traceback" not in err
    assert "committed instant" not in out


@pytest.fixture
def start_slow_writer(
    s3_bucket: str, writer_proxy: FaultProxy, start_writer: Callable[..., Writer]
) -> SlowWriter:
    """``start_slow_writer(input_path, what)``: a bulk insert into ``s3_bucket`` of 1 MB
    files whose uploads through ``writer_proxy`` each take a second; returns once its
    tasks run, with the writer and its pending instant."""

    def start(input_path: Path, what: str) -> tuple[Writer, str]:
        writer_proxy.delay(1000, method="PUT", path_pattern=DATA_FILE_UPLOADS)
        writer = start_writer(
            s3_bucket,
            input_path,
            "bulk_insert",
            "--target-file-mb",
            "1",
            env={"AWS_ENDPOINT_URL": writer_proxy.endpoint},
        )
        wait_for(lambda: has_markers(s3_bucket), f"the {what} writer's tasks", writer)
        return writer, newest_pending(s3_bucket)

    return start


def _assert_fenced_off(
    spark: SparkSession,
    uri: str,
    tmp_path: Path,
    writer: Writer,
    failed: str,
    model: dict[str, dict[str, Any]],
    third: range,
) -> None:
    """``writer`` exits having lost its lease, its instant ``failed`` never completed and
    readers see ``model``; after one more write (``third``) exactly the committed rows."""
    _assert_lost_lease(writer, failed)
    assert failed not in completed_instants(uri)
    assert _visible_rows(uri) == model
    model = model | _write(spark, uri, tmp_path, third, "third", "upsert")
    assert_exactly_committed(uri, model)


def test_lease_renewals_failing_for_12_s_never_publish(
    spark: SparkSession,
    s3_bucket: str,
    tmp_path: Path,
    writer_proxy: FaultProxy,
    start_slow_writer: SlowWriter,
) -> None:
    uri = s3_bucket
    first_input = write_input(tmp_path / "first.parquet", range(200_000), "first")
    first, failed = start_slow_writer(first_input, "first")
    writer_proxy.fail_always(path_pattern=LEASE_REQUESTS)
    faulted = time.monotonic()
    wait_for_write_lease_expiry(uri, failed)
    model = _write(spark, uri, tmp_path, range(1_000_000, 1_000_500), "second", "bulk_insert")
    time.sleep(max(0.0, FAULT_S - (time.monotonic() - faulted)))
    writer_proxy.clear()
    _assert_fenced_off(spark, uri, tmp_path, first, failed, model, range(1_000_000, 1_000_100))


def test_writer_paused_past_its_lease_never_publishes(
    spark: SparkSession, s3_bucket: str, tmp_path: Path, start_slow_writer: SlowWriter
) -> None:
    uri = s3_bucket
    model = _write(spark, uri, tmp_path, range(1_000), "base", "bulk_insert")
    paused_input = write_input(tmp_path / "paused.parquet", range(1_000, 200_000), "paused")
    paused, failed = start_slow_writer(paused_input, "paused")
    paused.signal_tree(signal.SIGSTOP)
    wait_for_write_lease_expiry(uri, failed)
    model |= _write(spark, uri, tmp_path, range(100), "second", "upsert")
    paused.signal_tree(signal.SIGCONT)
    _assert_fenced_off(spark, uri, tmp_path, paused, failed, model, range(100, 200))


def test_killed_writer_leaves_temporary_files_the_next_write_removes(
    spark: SparkSession, tmp_path: Path, start_writer: Callable[..., Writer]
) -> None:
    """On local disk a file is written to a hidden temporary and renamed when complete;
    with 64 MB files each task holds one open temporary per partition all along. Markers,
    leases and timeline files pass through short-lived temporaries too, so the writer is
    killed only once a data file's temporary is seen."""
    uri = str(tmp_path / "table")
    model = _write(spark, uri, tmp_path, range(1_000), "base", "bulk_insert")
    killed_input = write_input(tmp_path / "killed.parquet", range(1_000, 600_000), "killed")
    killed = start_writer(uri, killed_input, "bulk_insert", "--target-file-mb", "64")
    wait_for(lambda: temporary_data_files(uri) != [], "a data file being written", killed)
    killed.signal_tree(signal.SIGKILL)
    killed.finish()
    assert temporary_data_files(uri) != []
    assert _visible_rows(uri) == model
    wait_for_write_lease_expiry(uri, newest_pending(uri))
    model |= _write(spark, uri, tmp_path, range(500, 600), "second", "upsert")
    assert_exactly_committed(uri, model)
