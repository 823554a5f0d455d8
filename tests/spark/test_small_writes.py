"""A small write's shuffles are sized to its input, not to the session's
``spark.sql.shuffle.partitions``, which is set back afterwards; ``shuffle_parallelism``
fixes them (Hudi's ``hoodie.upsert.shuffle.parallelism``). The files are written by as many
tasks, at most one a file group, though adaptive execution would coalesce so small a
shuffle into one task."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

import tidemark.spark
from benchmarks.small_writes import stage_tasks
from spark.sparkkit import local_frame
from tidemark.errors import InvalidArgumentError
from tidemark.jobs.shuffles import SHUFFLE_PARTITIONS, sized_shuffles
from tidemark.spark import WriteOptions

SCHEMA = "id long, user string, day string, ts long"


@pytest.fixture
def users_session(spark: SparkSession) -> Iterator[SparkSession]:
    """The tests' session with a user's shuffle partitions (Spark's default, 200)."""
    before = spark.conf.get(SHUFFLE_PARTITIONS)
    spark.conf.set(SHUFFLE_PARTITIONS, "200")
    try:
        yield spark
    finally:
        spark.conf.set(SHUFFLE_PARTITIONS, str(before))


def upsert_stages(spark: SparkSession, table: str, first_id: int, parallelism: int) -> list[int]:
    rows = [(first_id + k, "u", f"2026-11-0{1 + k % 3}", 100) for k in range(10)]
    jobs_before = set(spark.sparkContext.statusTracker().getJobIdsForGroup(None))
    options = WriteOptions(shuffle_parallelism=parallelism)
    tidemark.spark.write(local_frame(spark, rows, SCHEMA), table, "upsert", options=options)
    return stage_tasks(spark, jobs_before)


def test_a_small_upserts_shuffles_are_sized_to_its_input(
    users_session: SparkSession, table_uri: str
) -> None:
    spark = users_session
    rows = [(i, f"user-{i % 7}", f"2026-11-0{1 + i % 3}", i) for i in range(200)]
    options = WriteOptions(
        record_key_fields=["id"], partition_fields=["day"], precombine_field="ts"
    )
    tidemark.spark.write(
        local_frame(spark, rows, SCHEMA), table_uri, "bulk_insert", options=options
    )
    cores = spark.sparkContext.defaultParallelism
    sized = upsert_stages(spark, table_uri, 0, 0)
    assert sized and max(sized) <= cores  # no stage of 200 tasks
    ran = [tasks for tasks in sized if tasks]  # skipped stages have none
    assert ran[-1] == min(cores, 3)  # the write's: the three days' files side by side
    assert spark.conf.get(SHUFFLE_PARTITIONS) == "200"  # the session's setting is back
    fixed = upsert_stages(spark, table_uri, 300, 24)
    assert max(fixed) == 24
    assert sum(fixed) > sum(sized)
    snapshot = tidemark.spark.read(spark, table_uri, reader="scan")
    assert snapshot.count() == 210  # 200, 10 updated, 10 new


def test_a_small_merge_on_read_upsert_appends_its_logs_in_one_task(
    users_session: SparkSession, table_uri: str
) -> None:
    """Log appends cost their few rows: one task appends the three days' logs (one
    marker call), where copy-on-write rewrites the three files side by side (above)."""
    spark = users_session
    rows = [(i, f"user-{i % 7}", f"2026-11-0{1 + i % 3}", i) for i in range(200)]
    options = WriteOptions(
        record_key_fields=["id"],
        partition_fields=["day"],
        precombine_field="ts",
        table_type="MERGE_ON_READ",
    )
    tidemark.spark.write(
        local_frame(spark, rows, SCHEMA), table_uri, "bulk_insert", options=options
    )
    ran = [tasks for tasks in upsert_stages(spark, table_uri, 0, 0) if tasks]
    assert ran[-1] == 1


def test_overlapping_writes_put_the_sessions_setting_back_once_the_last_ends(
    users_session: SparkSession,
) -> None:
    spark = users_session
    frame = spark.createDataFrame([(1, "u", "d", 1)], SCHEMA)
    with sized_shuffles(frame) as first:
        assert spark.conf.get(SHUFFLE_PARTITIONS) == str(first)
        with sized_shuffles(frame, 7):  # another thread's write, begun meanwhile
            assert spark.conf.get(SHUFFLE_PARTITIONS) == "7"
        assert spark.conf.get(SHUFFLE_PARTITIONS) != "200"  # the first still runs
    assert spark.conf.get(SHUFFLE_PARTITIONS) == "200"


def test_a_negative_shuffle_parallelism_is_refused() -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        WriteOptions(shuffle_parallelism=-1)
    assert refused.value.field == "shuffle_parallelism"
