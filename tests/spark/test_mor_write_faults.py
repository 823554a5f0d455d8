"""Merge-on-read writes that fail: retried task attempts leave no stray log file, and a
writer killed before its commit leaves readers exact; the next write rolls its deltacommit
back as Hudi does on each version (v6: a rollback command block, v8/9: its logs deleted)."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from spark.sparkkit import SCHEMA, assert_readers_agree, kill_writer_before_commit, local_frame
from tidemark.faults import FAIL_TASK_ATTEMPT_PROPERTY
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.logfiles.command_blocks import rolled_back_instant
from tidemark.table.logfiles.file_names import is_log_file_name
from tidemark.table.logfiles.framing import BlockType, read_log_file
from tidemark.table.metadata.actions import DELTA_COMMIT, ROLLBACK

DATA = ["id", "name", "part", "ts"]


def _create(spark: SparkSession, uri: str, version: int) -> None:
    rows = [(i, "v1", "p" if i % 2 else "q", 1) for i in range(8)]
    options = WriteOptions(
        record_key_fields=["id"],
        partition_fields=["part"],
        precombine_field="ts",
        table_type="MERGE_ON_READ",
        table_version=version,
    )
    write(spark, local_frame(spark, rows, SCHEMA), uri, "upsert", options)


def _log_files(uri: str) -> set[str]:
    storage = open_storage(uri)
    return {
        info.path
        for info in storage.list("")
        if is_log_file_name(info.path.rpartition("/")[2]) and not info.path.startswith(".hoodie/")
    }


def test_retried_appends_leave_one_log_per_file_group(
    spark: SparkSession, table_uri: str, table_version: int
) -> None:
    _create(spark, table_uri, table_version)
    spark.sparkContext.setLocalProperty(FAIL_TASK_ATTEMPT_PROPERTY, "0")
    try:
        result = write(
            spark,
            local_frame(spark, [(i, "v2", "p" if i % 2 else "q", 2) for i in range(8)], SCHEMA),
            table_uri,
            "upsert",
        )
    finally:
        spark.sparkContext.setLocalProperty(FAIL_TASK_ATTEMPT_PROPERTY, None)  # type: ignore[arg-type]
    assert result.files_reconciled >= 1
    table = HoodieTable.open(table_uri)
    [instant] = table.timeline.completed(frozenset({DELTA_COMMIT}))[-1:]
    committed = {s.path for s in table.timeline.read_metadata(instant).write_stats}
    assert _log_files(table_uri) == committed
    rows = assert_readers_agree(table_uri, DATA)
    assert {r["name"] for r in rows.values()} == {"v2"}


@pytest.mark.parametrize("table_version", [6, 9], ids=["v6", "v9"])
def test_a_killed_append_is_rolled_back_by_the_next_write(
    spark: SparkSession, table_uri: str, table_version: int
) -> None:
    """A killed writer's appends, rolled back as each timeline layout does it (version 6: a
    rollback command block; 8 and 9 share layout 2's rule, deleting the failed log files:
    ``log_rollback`` tells them apart by nothing else, so one child JVM runs for both)."""
    _create(spark, table_uri, table_version)
    kill_writer_before_commit(table_uri, "1,2")
    [pending] = HoodieTable.open(table_uri).timeline.pending()
    assert pending.action == DELTA_COMMIT
    failed_logs = _log_files(table_uri)
    assert failed_logs  # its appends are on storage, unread: the instant never completed
    rows = assert_readers_agree(table_uri, DATA)
    assert {r["name"] for r in rows.values()} == {"v1"}

    write(spark, local_frame(spark, [(3, "v3", "p", 3)], SCHEMA), table_uri, "upsert")
    timeline = HoodieTable.open(table_uri).timeline
    assert not timeline.pending()
    [(_, rolled_back)] = timeline.rollbacks()
    assert [i.commit_time for i in rolled_back.instants_rollback] == [pending.timestamp]
    assert ROLLBACK in {i.action for i in timeline.completed()}
    storage = open_storage(table_uri)
    if table_version == 6:
        command_blocks = [
            block
            for path in _log_files(table_uri) - failed_logs
            for block in read_log_file(storage, path)
            if block.block_type == BlockType.COMMAND
        ]
        assert {rolled_back_instant(block) for block in command_blocks} == {pending.timestamp}
        assert failed_logs <= _log_files(table_uri)
    else:
        assert not failed_logs & _log_files(table_uri)
    rows = assert_readers_agree(table_uri, DATA)
    assert {k: r["name"] for k, r in rows.items()} == {
        **{str(i): "v1" for i in range(8)},
        "3": "v3",
    }
