"""A write the record index tags through a service already serving (an address given, as
a stream writer's) validates its input in the tagging's Spark job: one job fewer than the
same write with the service started embedded, and the same outcomes: a bad input refused
naming the column and the rows, the table untouched; duplicate keys reduced to the latest
row; an empty input writes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from pyspark.sql import DataFrame, SparkSession

import tidemark.spark
from spark.indexkit import assert_index_agrees, indexed_table, rows
from spark.sparkkit import SCHEMA, assert_readers_agree, local_frame, timeline_listing
from tidemark.errors import InvalidArgumentError
from tidemark.jobs.write.result import WriteResult
from tidemark.jobs.write_options import WriteOptions
from tidemark.rpc.embedded import start_embedded_service

DATA = ["id", "name", "part", "ts"]


@pytest.fixture
def served(spark: SparkSession, table_uri: str) -> Iterator[WriteOptions]:
    """The indexed table and the options of a write through a running index service."""
    indexed_table(spark, table_uri)
    with start_embedded_service("index") as index:
        yield WriteOptions(index_service_address=index.address)


def _jobs(spark: SparkSession) -> set[int]:
    return set(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def _upsert(df: DataFrame, uri: str, options: WriteOptions) -> tuple[WriteResult, int]:
    """The write's result and the Spark jobs it ran."""
    before = _jobs(df.sparkSession)
    result = tidemark.spark.write(df, uri, "upsert", options=options)
    return result, len(_jobs(df.sparkSession) - before)


def test_a_served_index_tags_and_validates_in_one_job(
    spark: SparkSession, table_uri: str, served: WriteOptions
) -> None:
    """Both writes keep their input's partitions (``shuffle_parallelism``), so that the
    jobs differ by the validation pass alone, not by how the input was read after it."""
    kept = WriteOptions(shuffle_parallelism=4)
    _, embedded = _upsert(rows(spark, (1, "x", "b", 2), (20, "new", "a", 2)), table_uri, kept)
    served = replace(served, shuffle_parallelism=4)
    result, jobs = _upsert(rows(spark, (2, "y", "c", 2), (21, "new", "b", 2)), table_uri, served)
    assert jobs == embedded - 1
    assert result.rows_written > 0
    names = {key: row["name"] for key, row in assert_readers_agree(table_uri, DATA).items()}
    assert (names["1"], names["2"], names["20"], names["21"]) == ("x", "y", "new", "new")
    assert_index_agrees(table_uri)


def test_a_served_index_write_refuses_and_reduces_as_any_write(
    spark: SparkSession, table_uri: str, served: WriteOptions
) -> None:
    listing = timeline_listing(table_uri)
    null_key = local_frame(spark, [(None, "n", "a", 3), (3, "z", "a", 3)], SCHEMA)
    with pytest.raises(InvalidArgumentError, match="record key is null in 1 rows") as refused:
        tidemark.spark.write(null_key, table_uri, "upsert", options=served)
    assert refused.value.field == "id"
    null_order = local_frame(spark, [(3, "z", "a", None)], SCHEMA)
    with pytest.raises(InvalidArgumentError, match="precombine value is null in 1 rows"):
        tidemark.spark.write(null_order, table_uri, "upsert", options=served)
    empty = tidemark.spark.write(
        local_frame(spark, [], SCHEMA), table_uri, "upsert", options=served
    )
    assert empty.empty_input and empty.instant == ""
    assert timeline_listing(table_uri) == listing

    duplicates = rows(spark, (4, "old", "b", 1), (4, "latest", "b", 5), (30, "n", "a", 1))
    result = tidemark.spark.write(duplicates, table_uri, "upsert", options=served)
    assert result.rows_written > 0
    names = {key: row["name"] for key, row in assert_readers_agree(table_uri, DATA).items()}
    assert (names["4"], names["30"], len(names)) == ("latest", "n", 13)
    assert_index_agrees(table_uri)
