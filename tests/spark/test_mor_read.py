"""Merge-on-read tables Apache Hudi wrote, read through Spark: ``tidemark.spark.read`` (the
merged slices in Python tasks beside Spark's scan of the other base files), ``lookup`` and
the data source return the rows hudi-rs reads; a change to such a table is refused."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from table.log_testkit import extract_mor_fixtures

import tidemark.spark
from spark.sparkkit import hudi_rs_table
from tidemark.errors import FailedPreconditionError
from tidemark.table.records.keys import RECORD_KEY

TABLES = ["v6_trips_8i1u", "v6_trips_8i3d", "v8_trips_8i3u1d", "v9_txns_simple_nometa"]


@pytest.fixture(scope="module")
def mor_tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return extract_mor_fixtures(tmp_path_factory.mktemp("hudi-mor"))


def _rows(rows: list[dict], columns: list[str]) -> list[tuple]:
    return sorted(tuple(repr(row[c]) for c in columns) for row in rows)


def _spark_rows(frame: DataFrame) -> list[dict]:
    return frame.toArrow().to_pylist()


def _data_columns(theirs: pa.Table) -> list[str]:
    return [RECORD_KEY, *(n for n in theirs.column_names if not n.startswith("_hoodie_"))]


@pytest.mark.parametrize("name", TABLES)
def test_read_and_the_data_source_merge_as_hudi_rs(
    spark: SparkSession, mor_tables: Path, name: str
) -> None:
    uri = str(mor_tables / name)
    theirs = hudi_rs_table(uri)
    assert theirs is not None
    columns = _data_columns(theirs)
    expected = _rows(theirs.to_pylist(), columns)
    assert _rows(_spark_rows(tidemark.spark.read(spark, uri)), columns) == expected
    tidemark.spark.register(spark)
    source = spark.read.format("tidemark").load(uri)
    assert _rows(_spark_rows(source), columns) == expected


def test_a_lookup_returns_the_merged_row(spark: SparkSession, mor_tables: Path) -> None:
    uri = str(mor_tables / "v6_trips_8i1u")
    theirs = hudi_rs_table(uri)
    assert theirs is not None
    key = next(r[RECORD_KEY] for r in theirs.to_pylist() if r["rider"] == "rider-D")
    found = _spark_rows(tidemark.spark.lookup(spark, uri, [key]))
    assert [(r["rider"], r["fare"]) for r in found] == [("rider-D", 25.0)]


def test_a_filter_on_an_updated_value_finds_the_merged_row(
    spark: SparkSession, mor_tables: Path
) -> None:
    uri = str(mor_tables / "v6_trips_8i1u")
    frame = tidemark.spark.read(spark, uri, filters=[("fare", "=", 25.0)])
    assert [r["rider"] for r in _spark_rows(frame)] == ["rider-D"]


def test_a_write_to_a_merge_on_read_table_is_refused(spark: SparkSession, mor_tables: Path) -> None:
    uri = str(mor_tables / "v9_txns_simple_nometa")
    frame = tidemark.spark.read(spark, uri).limit(1)
    with pytest.raises(FailedPreconditionError) as refused:
        tidemark.spark.write(
            frame.drop(*[c for c in frame.columns if c.startswith("_hoodie_")]), uri, "upsert"
        )
    assert refused.value.field == "hoodie.table.type"
