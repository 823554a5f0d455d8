"""Merge-on-read tables Apache Hudi wrote, read through Spark: ``tidemark.spark.read`` (the
merged slices in the driver, or in Python tasks beside Spark's scan of the other base
files), ``lookup`` and the data source return the rows hudi-rs reads; such a table takes
upserts and deletes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import tidemark.spark
from spark.morkit import comparable, data_columns, spark_rows, upsert_and_delete
from spark.sparkkit import hudi_rs_table
from tidemark.jobs.write_options import WriteOptions
from tidemark.table.records.keys import RECORD_KEY

TABLES = ["v6_trips_8i1u", "v6_trips_8i3d", "v8_trips_8i3u1d", "v9_txns_simple_nometa"]


@pytest.mark.parametrize("name", TABLES)
def test_read_and_the_data_source_merge_as_hudi_rs(
    spark: SparkSession, mor_tables: Path, name: str
) -> None:
    uri = str(mor_tables / name)
    theirs = hudi_rs_table(uri)
    assert theirs is not None
    columns = data_columns(theirs)
    expected = comparable(theirs.to_pylist(), columns)
    for reader in ("driver", "spark"):  # merged in the driver, and in Spark tasks
        read = tidemark.spark.read(spark, uri, reader=reader)
        assert comparable(spark_rows(read), columns) == expected
    tidemark.spark.register(spark)
    source = spark.read.format("tidemark").load(uri)
    assert comparable(spark_rows(source), columns) == expected


def test_a_lookup_returns_the_merged_row(spark: SparkSession, mor_tables: Path) -> None:
    uri = str(mor_tables / "v6_trips_8i1u")
    theirs = hudi_rs_table(uri)
    assert theirs is not None
    key = next(r[RECORD_KEY] for r in theirs.to_pylist() if r["rider"] == "rider-D")
    found = spark_rows(tidemark.spark.lookup(spark, uri, [key]))
    assert [(r["rider"], r["fare"]) for r in found] == [("rider-D", 25.0)]


def test_a_filter_on_an_updated_value_finds_the_merged_row(
    spark: SparkSession, mor_tables: Path
) -> None:
    uri = str(mor_tables / "v6_trips_8i1u")
    frame = tidemark.spark.read(spark, uri, filters=[("fare", "=", 25.0)])
    assert [r["rider"] for r in spark_rows(frame)] == ["rider-D"]


@pytest.mark.parametrize("name", ["v6_trips_8i1u", "v6_nonpartitioned", "v9_txns_simple_nometa"])
def test_a_table_hudi_wrote_takes_an_upsert_and_a_delete_as_logs(
    spark: SparkSession, mor_tables: Path, tmp_path: Path, name: str
) -> None:
    """Hudi's own merge-on-read tables (its metadata table dropped, as every write does
    with ``disable_hudi_metadata_table``) take updates and deletes that hudi-rs merges."""
    uri = str(shutil.copytree(mor_tables / name, tmp_path / name))
    options = WriteOptions(disable_hudi_metadata_table=True, markers="direct")
    changed = upsert_and_delete(spark, uri, options)
    assert changed.upserted.files_written == 1
    columns = changed.columns
    expected = comparable(list(changed.rows.values()), columns)
    after = hudi_rs_table(uri)
    assert after is not None
    assert comparable(after.to_pylist(), columns) == expected
    assert comparable(spark_rows(tidemark.spark.read(spark, uri)), columns) == expected
