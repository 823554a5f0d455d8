"""Failed task attempts, a killed driver, and the same on S3: readers see exactly the
committed rows, stray files are removed, failed instants are rolled back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark.sparkkit import (
    SCHEMA,
    assert_readers_agree,
    data_files,
    files_in_view,
    kill_writer_before_commit,
    local_frame,
)
from tidemark.faults import FAIL_TASK_ATTEMPT_PROPERTY
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions
from tidemark.table import HoodieTable

DATA = ["id", "name", "part", "ts"]
CREATE: dict[str, Any] = {
    "record_key_fields": ["id"],
    "partition_fields": ["part"],
    "precombine_field": "ts",
}


@pytest.fixture
def first_attempts_fail(spark: SparkSession) -> Iterator[None]:
    """Every task's attempt 0 fails right after writing its file; Spark retries it."""
    spark.sparkContext.setLocalProperty(FAIL_TASK_ATTEMPT_PROPERTY, "0")
    yield
    spark.sparkContext.setLocalProperty(FAIL_TASK_ATTEMPT_PROPERTY, None)  # type: ignore[arg-type]


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def any_uri(request: pytest.FixtureRequest, table_uri: str) -> str:
    if request.param == "s3":
        return str(request.getfixturevalue("s3_bucket"))
    return table_uri


def _rows(n: int, name: str, ts: int) -> list[tuple]:
    return [(i, name, "p" if i % 2 else "q", ts) for i in range(n)]


def test_retried_attempts_leave_no_stray_files(
    spark: SparkSession, any_uri: str, first_attempts_fail: None
) -> None:
    bulk = write(
        spark,
        local_frame(spark, _rows(6, "v1", 1), SCHEMA),
        any_uri,
        "bulk_insert",
        WriteOptions(**CREATE),
    )
    upsert = write(spark, local_frame(spark, _rows(8, "v2", 2), SCHEMA), any_uri, "upsert")
    assert bulk.files_reconciled >= 1
    assert upsert.files_reconciled >= 1
    rows = assert_readers_agree(any_uri, DATA)
    assert {k: r["name"] for k, r in rows.items()} == {str(i): "v2" for i in range(8)}
    assert data_files(any_uri) == files_in_view(any_uri) | _older_versions(any_uri)


def _older_versions(uri: str) -> set[str]:
    """Committed files of earlier instants (COW keeps them until a clean)."""
    table = HoodieTable.open(uri)
    committed = set()
    for instant in table.timeline.completed(frozenset({"commit", "replacecommit"})):
        committed |= {s.path for s in table.timeline.read_metadata(instant).write_stats}
    return committed


def test_killed_writer_is_rolled_back_by_the_next_write(
    spark: SparkSession, table_uri: str
) -> None:
    write(
        spark,
        local_frame(spark, _rows(4, "v1", 1), SCHEMA),
        table_uri,
        "bulk_insert",
        WriteOptions(**CREATE),
    )
    committed = data_files(table_uri)
    kill_writer_before_commit(table_uri, "1,2,10")
    assert data_files(table_uri) > committed
    pending = HoodieTable.open(table_uri).timeline.pending()
    assert [i.action for i in pending] == ["commit"]
    # the next write rolls the dead one back once its lease has run out: at its begin,
    # or at its commit, which on table version 6 waits for the earlier instant first
    write(spark, local_frame(spark, [(3, "v3", "p", 3)], SCHEMA), table_uri, "upsert")
    timeline = HoodieTable.open(table_uri).timeline
    assert not timeline.pending()
    assert sorted(i.action for i in timeline.completed()) == ["commit", "commit", "rollback"]
    [(_, rolled_back)] = timeline.rollbacks()
    assert [info.commit_time for info in rolled_back.instants_rollback] == [pending[0].timestamp]
    assert pending[0].timestamp not in {i.timestamp for i in timeline.instants()}
    rows = assert_readers_agree(table_uri, DATA)
    assert {k: r["name"] for k, r in rows.items()} == {"0": "v1", "1": "v1", "2": "v1", "3": "v3"}
    assert data_files(table_uri) == files_in_view(table_uri) | _older_versions(table_uri)
