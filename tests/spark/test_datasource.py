"""The ``tidemark`` PySpark data source (the compatibility path): the snapshot hudi-rs reads
(meta columns included), exact answers from a DataFrame or SQL view reused across filtered
and unfiltered queries, timestamps, files packed into few tasks, PySpark's own discovery,
and clear errors."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.datasource import DataSource

import pyspark_tidemark
import tidemark.spark
from spark.indexkit import indexed_table, rows
from spark.sparkkit import files_in_view, hudi_rs_table, local_frame, rows_by_key, snapshot
from tidemark.errors import NotFoundError
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions
from tidemark.table import HoodieTable
from tidemark.table.records.keys import META_COLUMNS

DATA_COLUMNS = ["id", "name", "part", "ts"]
MODEL = {k: (k, f"v{k}", "abc"[k % 3], 1) for k in range(12)}
"""The rows ``indexed_table`` writes, by key."""


def data_rows(frame: DataFrame) -> set[tuple[int, str, str, int]]:
    return {tuple(r) for r in frame.select(*DATA_COLUMNS).collect()}


def source_table(spark: SparkSession, uri: str) -> DataFrame:
    tidemark.spark.register(spark)
    return spark.read.format("tidemark").load(uri)


def test_rows_equal_hudi_rs_meta_columns_included(spark: SparkSession, table_uri: str) -> None:
    indexed_table(spark, table_uri)
    first = HoodieTable.open(table_uri).timeline.last_completed()
    assert first is not None
    moves = rows(spark, (1, "updated", "b", 2), (3, "moved", "b", 2))  # 3 leaves partition a
    write(spark, moves, table_uri, "upsert")
    frame = source_table(spark, table_uri)
    assert frame.columns == snapshot(table_uri).column_names
    assert frame.columns[: len(META_COLUMNS)] == list(META_COLUMNS)
    columns = [*META_COLUMNS, *DATA_COLUMNS]
    ours = rows_by_key(frame.toArrow(), columns)
    assert ours == rows_by_key(hudi_rs_table(table_uri), columns)
    assert ours["1"]["name"] == "updated" and len(ours) == len(MODEL)
    assert ours["3"]["_hoodie_partition_path"] == "b"
    old = spark.read.format("tidemark").option("as_of", first.timestamp).load(table_uri)
    assert data_rows(old.where("id IN (1, 3)")) == {MODEL[1], MODEL[3]}


def test_a_reused_dataframe_and_view_answer_every_query(
    spark: SparkSession, table_uri: str
) -> None:
    """PySpark keeps a reader's planned partitions on the DataFrame: filters taken by one
    query must never narrow the next one's rows."""
    indexed_table(spark, table_uri)
    frame = source_table(spark, table_uri)
    assert frame.count() == 12
    assert frame.where("id IN (1, 4)").count() == 2
    assert frame.where("part = 'b'").count() == 4
    assert frame.count() == 12
    assert data_rows(frame.where(sf.col("id") == 7)) == {MODEL[7]}
    assert len(frame.collect()) == 12
    frame.createOrReplaceTempView("source_events")
    counts = [
        spark.sql(f"SELECT * FROM source_events {where}").count()
        for where in ("WHERE id = 3", "", "WHERE part IN ('a', 'c')", "")
    ]
    assert counts == [1, 12, 8, 12]


def test_files_are_packed_into_few_tasks(spark: SparkSession, table_uri: str) -> None:
    indexed_table(spark, table_uri)
    files = len(files_in_view(table_uri))
    assert files > 2
    tidemark.spark.register(spark)
    packed = spark.read.format("tidemark").option("tasks", "2").load(table_uri)
    assert packed.rdd.getNumPartitions() == 2
    assert data_rows(packed) == set(MODEL.values())
    with pytest.raises(AnalysisException, match="tasks: must be a positive integer"):
        spark.read.format("tidemark").option("tasks", "0").load(table_uri).count()


def test_timestamps_are_read(spark: SparkSession, table_uri: str) -> None:
    moments = [datetime.datetime(2026, 11, d, 12, tzinfo=datetime.UTC) for d in (1, 2)]
    frame = local_frame(
        spark, [(1, moments[0], "a"), (2, moments[1], "b")], "id long, at timestamp, part string"
    )
    write(
        spark,
        frame,
        table_uri,
        "bulk_insert",
        WriteOptions(record_key_fields=["id"], partition_fields=["part"], precombine_field="id"),
    )
    read = source_table(spark, table_uri).select("id", "at").toArrow().to_pylist()
    assert {r["id"]: r["at"] for r in read} == dict(zip([1, 2], moments, strict=True))
    theirs = hudi_rs_table(table_uri)
    assert theirs is not None
    assert sorted(theirs.column("at").to_pylist()) == moments


def test_the_module_pyspark_discovers_exports_the_source() -> None:
    """Discovery itself needs an installed wheel (test_packaging reads through it); the
    editable install here imports the module but does not list it as a top-level one."""
    assert issubclass(pyspark_tidemark.DefaultSource, DataSource)
    assert pyspark_tidemark.DefaultSource.name() == "tidemark"


def test_a_bad_path_is_one_clear_error(spark: SparkSession, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-table")
    with pytest.raises(NotFoundError) as raised:
        tidemark.spark.read(spark, missing)
    assert raised.value.field == "table"
    assert "not a Hudi table" in str(raised.value)
    tidemark.spark.register(spark)
    with pytest.raises(AnalysisException, match="not a Hudi table"):
        spark.read.format("tidemark").load(missing)
    with pytest.raises(AnalysisException, match="path: give the table's path"):
        spark.read.format("tidemark").load()
