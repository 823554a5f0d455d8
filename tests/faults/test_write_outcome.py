"""The outcome of a write is its completed instant: clean-up failures after it are
warnings, a retry with the same idempotency key is a no-op, a failure before it says the
instant did not commit, and a race to create the table is joined, not lost."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from faults.faultkit import (
    LOCK_LEASE_S,
    WRITER_LEASE_S,
    StageHook,
    assert_committed_and_clean,
    assert_table_holds,
    bulk_insert,
    completed_instants,
    model_of,
    rows,
    rows_to_parquet,
    start_stopping_writer,
    write_args,
    write_rows,
)
from tidemark.cli import main
from tidemark.errors import InvalidArgumentError, PermissionDeniedError
from tidemark.storage import open_storage
from tidemark.storage.local import TEMP_MARKER
from tidemark.table import HoodieTable
from tidemark.table.leases.storage_lease import LOCK_DIR, STALE_TEMPORARY_S, StorageLease
from tidemark.table.metadata.actions import COMMIT
from tidemark.table.writes.commit import IDEMPOTENCY_KEY
from tidemark.table.writes.markers import delete_marker_dir, marker_dir, marker_lease_dir
from tidemark.testing.leases import outlive_lease
from tidemark.testing.s3local import FaultProxy

DELETE_OBJECTS = r"[?&]delete"
LOCK_OBJECTS = r"/\.hoodie/\.tidemark/lock/"
COMPLETED_INSTANT = r"/\.hoodie/\d{17}\.commit$"


def _completed(uri: str) -> list[str]:
    return completed_instants(uri, frozenset({COMMIT}))


def test_clean_up_failures_after_the_commit_are_warnings(
    spark: SparkSession, s3_bucket: str, driver_faulty_s3: FaultProxy
) -> None:
    """Deleting the marker dir fails (403) and releasing the lock fails (503) once the
    instant is published: the write still returns its instant, and the next write
    deletes the committed instant's marker dir."""
    first = rows(0, 40, "v1")
    hook = StageHook(
        started={
            "commit": lambda: driver_faulty_s3.fail_always(
                method="POST", path_pattern=DELETE_OBJECTS, status=403, code="AccessDenied"
            )
        },
        finished={
            "commit": lambda: driver_faulty_s3.fail_always(method="PUT", path_pattern=LOCK_OBJECTS)
        },
    )
    result = bulk_insert(
        spark, first, s3_bucket, markers="direct", lock_lease_s=LOCK_LEASE_S, listener=hook
    )
    assert driver_faulty_s3.injected >= 2
    assert _completed(s3_bucket) == [result.instant]
    assert any(open_storage(s3_bucket).list(marker_dir(result.instant) + "/"))

    driver_faulty_s3.clear()
    outlive_lease(open_storage(s3_bucket), lease_s=LOCK_LEASE_S)  # its release failed
    second = rows(20, 40, "v2", ts=2)
    write_rows(spark, second, s3_bucket, "upsert", markers="direct")
    assert_committed_and_clean(s3_bucket, model_of(first, second))


def test_a_publish_answered_with_errors_after_it_took_effect_is_a_commit(
    spark: SparkSession, s3_bucket: str, driver_faulty_s3: FaultProxy
) -> None:
    """The completed instant is written but every answer to it is a 503 (the first
    response lost, the retries refused): the write reports its instant as committed."""
    batch = rows(0, 20, "v1")
    hook = StageHook(
        started={
            "commit": lambda: driver_faulty_s3.fail_always(
                method="PUT", path_pattern=COMPLETED_INSTANT, forward=True
            )
        }
    )
    result = bulk_insert(spark, batch, s3_bucket, lock_lease_s=LOCK_LEASE_S, listener=hook)
    assert driver_faulty_s3.injected >= 2
    driver_faulty_s3.clear()
    assert _completed(s3_bucket) == [result.instant]
    assert_committed_and_clean(s3_bucket, model_of(batch))


def test_a_storage_failure_before_the_publish_is_reported_as_itself(
    spark: SparkSession, s3_bucket: str, driver_faulty_s3: FaultProxy
) -> None:
    """Publishing the instant is denied and so is every lock write: the error is the
    publish's, says the instant did not commit, and the next write rolls it back.

    The lease is the long one: with renewals failing from the commit stage on, the publish
    must be tried within the safety margin, which a busy machine may not manage in 0.75 s."""
    hook = StageHook(
        started={
            "commit": lambda: driver_faulty_s3.fail_always(
                method="PUT",
                path_pattern=f"{COMPLETED_INSTANT}|{LOCK_OBJECTS}",
                status=403,
                code="AccessDenied",
            )
        }
    )
    lost = rows(0, 30, "lost")
    with pytest.raises(PermissionDeniedError) as failed:
        bulk_insert(spark, lost, s3_bucket, lock_lease_s=WRITER_LEASE_S, listener=hook)
    message = str(failed.value)
    assert "access denied" in message and "was not committed" in message
    assert "release" not in message and "\n" not in message

    driver_faulty_s3.clear()
    outlive_lease(open_storage(s3_bucket), lease_s=WRITER_LEASE_S)  # it could not release
    kept = rows(10, 10, "kept")
    write_rows(spark, kept, s3_bucket, "upsert")
    assert_committed_and_clean(s3_bucket, model_of(kept))


def test_a_bulk_insert_retried_with_its_idempotency_key_writes_nothing_twice(
    spark: SparkSession, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The writer dies (SIGKILL) after its commit, before it could report it: the retry
    with the same key (``tidemark write`` in this process, its session) reports the
    earlier instant and writes nothing."""
    table = str(tmp_path / "table")
    batch = rows(0, 30, "once")
    writer = start_stopping_writer(
        table, batch, "bulk_insert", stop_at="finished:commit", idempotency_key="load-7"
    )
    writer.kill()
    writer.wait()
    (committed,) = _completed(table)
    timeline = HoodieTable.open(table).timeline
    metadata = timeline.read_metadata(timeline.find(committed))
    assert metadata.extra_metadata[IDEMPOTENCY_KEY] == "load-7"

    source = rows_to_parquet(tmp_path / "batch.parquet", batch)
    outlive_lease(open_storage(table), lease_s=LOCK_LEASE_S)  # the killed writer's lock
    capfd.readouterr()
    retry = write_args(table, source, "bulk_insert", "--idempotency-key", "load-7")
    code = main([*retry, "--master", "local[2]"])
    out, err = capfd.readouterr()
    assert code == 0, err
    assert f"already committed as instant {committed}" in out
    assert _completed(table) == [committed]
    assert_committed_and_clean(table, model_of(batch))


def test_the_loser_of_a_race_to_create_the_table_writes_into_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Another writer creates (and writes) the table between this write's checks and its
    create: this write joins the table instead of failing."""
    table = str(tmp_path / "table")
    winner, loser = rows(100, 10, "winner"), rows(0, 20, "loser")

    def other_writer() -> None:
        bulk_insert(spark, winner, table)

    hook = StageHook(finished={"prepare": other_writer})
    bulk_insert(spark, loser, table, markers="direct", listener=hook)
    assert len(_completed(table)) == 2
    assert_committed_and_clean(table, model_of(winner, loser))


def test_a_race_to_create_the_table_with_another_layout_names_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = str(tmp_path / "table")
    winner = rows(0, 4, "winner")

    def other_writer() -> None:
        write_rows(
            spark,
            winner,
            table,
            "bulk_insert",
            markers="direct",
            record_key_fields=["id"],
            partition_fields=["name"],
        )

    hook = StageHook(finished={"prepare": other_writer})
    with pytest.raises(InvalidArgumentError) as refused:
        bulk_insert(spark, rows(0, 4, "loser"), table, markers="direct", listener=hook)
    assert refused.value.field == "partition_fields"
    assert "another writer created the table concurrently" in str(refused.value)
    assert_table_holds(table, model_of(winner))


def test_temporaries_of_killed_lease_and_marker_writes_are_deleted(tmp_path: Path) -> None:
    """A process killed while renewing a lease or flushing a MARKERS file leaves a hidden
    temporary; the next lock holder and the marker dir's deletion remove them. A fresh
    temporary in the lock dir is another contender's claim being written: it is kept."""
    storage = open_storage(str(tmp_path))
    instant = "20240102030405006"
    temporaries = [
        tmp_path / f"{LOCK_DIR}/.{1:020d}{TEMP_MARKER}a",
        tmp_path / f"{marker_dir(instant)}/.MARKERS0{TEMP_MARKER}b",
        tmp_path / f"{marker_lease_dir(instant)}/.{0:010d}{TEMP_MARKER}c",
    ]
    killed_at = time.time() - 2 * STALE_TEMPORARY_S
    for temporary in temporaries:
        temporary.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_bytes(b"partial")
        os.utime(temporary, (killed_at, killed_at))
    claim_being_written = tmp_path / f"{LOCK_DIR}/.{1:020d}{TEMP_MARKER}d"
    claim_being_written.write_bytes(b"partial")
    with StorageLease(storage, "next-writer", heartbeat=False):
        delete_marker_dir(storage, instant)
    assert [path for path in temporaries if path.exists()] == []
    assert claim_being_written.exists()
