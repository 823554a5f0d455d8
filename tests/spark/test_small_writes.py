"""A small write's shuffles are sized to its input, not to the session's
``spark.sql.shuffle.partitions``, which is set back afterwards; ``shuffle_parallelism``
fixes them (Hudi's ``hoodie.upsert.shuffle.parallelism``). The files are written by as many
tasks, at most one a file group, though adaptive execution would coalesce so small a
shuffle into one task. An input Spark sizes small is read by one task a few megabytes, and
one it cannot size too once its validation pass measured it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

import tidemark.spark
from benchmarks.small_writes import stage_tasks
from spark.sparkkit import local_frame
from tidemark.errors import InvalidArgumentError
from tidemark.jobs.shuffles import SHUFFLE_PARTITIONS, coalesced_input, sized_shuffles
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


def create_table(spark: SparkSession, table_uri: str, table_type: str = "COPY_ON_WRITE") -> None:
    """200 rows over three days, bulk inserted."""
    rows = [(i, f"user-{i % 7}", f"2026-11-0{1 + i % 3}", i) for i in range(200)]
    options = WriteOptions(
        record_key_fields=["id"],
        partition_fields=["day"],
        precombine_field="ts",
        table_type=table_type,
    )
    tidemark.spark.write(
        local_frame(spark, rows, SCHEMA), table_uri, "bulk_insert", options=options
    )


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
    create_table(spark, table_uri)
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
    create_table(spark, table_uri, "MERGE_ON_READ")
    ran = [tasks for tasks in upsert_stages(spark, table_uri, 0, 0) if tasks]
    assert ran[-1] == 1


def test_a_small_input_spark_sizes_is_keyed_and_looked_up_by_one_task(
    users_session: SparkSession, table_uri: str
) -> None:
    """Each task of the write's first stages starts its Python runners (keying, the index
    lookup) before its first row: 20 rows in four partitions, which Spark sizes, are read
    by one task; ``shuffle_parallelism`` keeps the input's partitions, as does an input
    Spark cannot size (``local_frame``: Python rows)."""
    spark = users_session
    create_table(spark, table_uri)
    sized = spark.range(0, 20, numPartitions=4).select(
        "id",
        sf.lit("u").alias("user"),
        sf.concat(sf.lit("2026-11-0"), (sf.col("id") % 3 + 1).cast("string")).alias("day"),
        sf.lit(500).cast("long").alias("ts"),
    )
    assert coalesced_input(sized).rdd.getNumPartitions() == 1
    assert coalesced_input(sized, 24).rdd.getNumPartitions() == 4
    unsized = local_frame(spark, [(k, "u", "2026-11-01", 1) for k in range(8)], SCHEMA)
    assert coalesced_input(unsized.repartition(4)).rdd.getNumPartitions() == 4
    jobs_before = set(spark.sparkContext.statusTracker().getJobIdsForGroup(None))
    tidemark.spark.write(sized, table_uri, "upsert")
    assert stage_tasks(spark, jobs_before)[0] == 1
    snapshot = tidemark.spark.read(spark, table_uri, reader="scan")
    assert snapshot.where("ts = 500").count() == 20


def test_an_input_spark_cannot_size_is_read_by_one_task_once_its_validation_measured_it(
    users_session: SparkSession, table_uri: str
) -> None:
    """Python rows in four partitions (``local_frame``: no size before a job reads them):
    the validation pass reads the four partitions and caches them, which measures them;
    the rest of the write (keying, the lookup, the rows to write) reads them in one task.
    With ``shuffle_parallelism`` the input keeps its partitions throughout."""
    spark = users_session
    create_table(spark, table_uri)
    tidemark.spark.index_build(spark, table_uri)  # tagged by lookups: no join's shuffle
    rows = [(k, "u", f"2026-11-0{1 + k % 3}", 700) for k in range(8)]

    def input_stages(parallelism: int) -> list[int]:
        """Tasks of the stages that read the four-partition input (4) or it coalesced (1)."""
        unsized = local_frame(spark, rows, SCHEMA).repartition(4).localCheckpoint()
        jobs_before = set(spark.sparkContext.statusTracker().getJobIdsForGroup(None))
        options = WriteOptions(shuffle_parallelism=parallelism)
        tidemark.spark.write(unsized, table_uri, "upsert", options=options)
        return [tasks for tasks in stage_tasks(spark, jobs_before) if tasks in (1, 4)]

    measured = input_stages(0)
    validation = measured.index(1)
    assert validation and set(measured[:validation]) == {4}, measured
    assert 4 not in measured[validation:], measured
    kept = input_stages(24)
    assert 4 in kept[kept.index(1) :], kept
    snapshot = tidemark.spark.read(spark, table_uri, reader="scan")
    assert snapshot.where("ts = 700").count() == 8


def test_a_stream_sizes_a_batch_spark_cannot_by_the_batch_before(
    users_session: SparkSession, table_uri: str
) -> None:
    """A micro-batch of Kafka or ``rate`` has no size until it is read: the stream writer
    reads each batch in as many tasks as the batch before it needed (one, for 20 rows)."""
    spark = users_session
    create_table(spark, table_uri)
    first_stages = []
    with tidemark.spark.stream_writer(table_uri, query_id="sized") as writer:
        for batch_id in range(2):
            batch = [(k, "u", "2026-11-01", 600 + batch_id) for k in range(20)]
            frame = local_frame(spark, batch, SCHEMA)
            assert frame.rdd.getNumPartitions() == 4
            jobs_before = set(spark.sparkContext.statusTracker().getJobIdsForGroup(None))
            writer(frame, batch_id)
            first_stages.append(stage_tasks(spark, jobs_before)[0])
    assert first_stages == [4, 1]
    snapshot = tidemark.spark.read(spark, table_uri, reader="scan")
    assert snapshot.where("ts = 601").count() == 20


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
