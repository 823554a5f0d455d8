"""The ``tidemark`` PySpark data source: the snapshot hudi-rs reads (meta columns included),
``=``/``IN`` on the record key answered through the record index, partition filters pruning
partitions, other filters left to Spark, PySpark's own discovery, and clear errors."""

from __future__ import annotations

import pkgutil
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.datasource import DataSource, EqualTo, GreaterThan, In
from structlog.testing import capture_logs
from table.table_testkit import people_config

import pyspark_tidemark
import tidemark.spark
from spark.indexkit import indexed_table, rows
from spark.sparkkit import files_in_view, hudi_rs_table, rows_by_key, snapshot
from tidemark.errors import NotFoundError
from tidemark.jobs.datasource import FilePartition, PushdownReader, TidemarkDataSource
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions
from tidemark.table.keys import META_COLUMNS
from tidemark.table.table import HoodieTable

DATA_COLUMNS = ["id", "name", "part", "ts"]
MODEL = {k: (k, f"v{k}", "abc"[k % 3], 1) for k in range(12)}
"""The rows ``indexed_table`` writes, by key."""


def data_rows(frame: DataFrame) -> set[tuple[int, str, str, int]]:
    return {tuple(r) for r in frame.select(*DATA_COLUMNS).collect()}


def tidemark_table(spark: SparkSession, uri: str) -> DataFrame:
    tidemark.spark.register(spark)
    return spark.read.format("tidemark").load(uri)


def test_rows_equal_hudi_rs_meta_columns_included(spark: SparkSession, table_uri: str) -> None:
    indexed_table(spark, table_uri)
    first = HoodieTable.open(table_uri).timeline.last_completed()
    assert first is not None
    moves = rows(spark, (1, "updated", "b", 2), (3, "moved", "b", 2))  # 3 leaves partition a
    write(spark, moves, table_uri, "upsert")
    frame = tidemark_table(spark, table_uri)
    assert frame.columns == snapshot(table_uri).column_names
    assert frame.columns[: len(META_COLUMNS)] == list(META_COLUMNS)
    columns = [*META_COLUMNS, *DATA_COLUMNS]
    ours = rows_by_key(frame.toArrow(), columns)
    assert ours == rows_by_key(hudi_rs_table(table_uri), columns)
    assert ours["1"]["name"] == "updated" and len(ours) == len(MODEL)
    assert ours["3"]["_hoodie_partition_path"] == "b"
    # The index places key 3 in partition b now; the snapshot before the move is not pruned by it.
    old = tidemark.spark.read(spark, table_uri, as_of=first.timestamp).where("id IN (1, 3)")
    assert data_rows(old) == {MODEL[1], MODEL[3]}


def test_key_in_reads_only_the_files_holding_the_keys(spark: SparkSession, table_uri: str) -> None:
    located = indexed_table(spark, table_uri)
    keys = [1, 4, 6]
    holders = {located[str(k)][1] for k in keys}
    assert len(files_in_view(table_uri)) > len(holders)
    frame = tidemark_table(spark, table_uri)
    by_keys = frame.where(sf.col("id").isin(keys))
    assert by_keys.rdd.getNumPartitions() == len(holders)
    assert data_rows(by_keys) == {MODEL[k] for k in keys}
    one = frame.where("id = 7")
    assert one.rdd.getNumPartitions() == 1
    assert data_rows(one) == {MODEL[7]}
    # The same planning in this process: which files, and what Spark is left with.
    source = TidemarkDataSource({"path": table_uri})
    reader = source.reader(source.schema())
    assert isinstance(reader, PushdownReader)
    later = GreaterThan(("ts",), 0)
    assert reader.pushFilters([In(("id",), tuple(keys)), later]) == [later]
    with capture_logs() as logs:
        partitions = reader.partitions()
    assert [e["files"] for e in logs if e["event"] == "read.files_opened"] == [len(holders)]
    opened = {p.plan.paths[0] for p in partitions if isinstance(p, FilePartition)}
    files = HoodieTable.open(table_uri).view().latest_base_files()
    assert {f.file_id for f in files if f.path in opened} == holders


def test_partition_filter_prunes_and_other_filters_stay_with_spark(
    spark: SparkSession, table_uri: str
) -> None:
    located = indexed_table(spark, table_uri)
    frame = tidemark_table(spark, table_uri)
    in_b = frame.where("part = 'b'")
    assert in_b.rdd.getNumPartitions() == len({f for p, f in located.values() if p == "b"})
    assert data_rows(in_b) == {r for r in MODEL.values() if r[2] == "b"}
    above = frame.where("id > 3 AND name != 'v5'")
    assert above.rdd.getNumPartitions() == len(files_in_view(table_uri))
    assert data_rows(above) == {r for k, r in MODEL.items() if k > 3 and k != 5}
    mixed = frame.where(sf.col("id").isin([2, 5, 8]) & (sf.col("name") > "v2"))
    assert data_rows(mixed) == {MODEL[5], MODEL[8]}
    none = frame.where("id = 100")
    assert none.count() == 0


def test_a_table_without_an_index_reads_every_file(spark: SparkSession, table_uri: str) -> None:
    write(
        spark,
        rows(spark, *MODEL.values()),
        table_uri,
        "bulk_insert",
        WriteOptions(record_key_fields=["id"], partition_fields=["part"], precombine_field="ts"),
    )
    by_keys = tidemark_table(spark, table_uri).where(sf.col("id").isin([1, 2]))
    assert by_keys.rdd.getNumPartitions() == len(files_in_view(table_uri))
    assert data_rows(by_keys) == {MODEL[1], MODEL[2]}


def test_pyspark_discovers_the_source_without_register(spark: SparkSession, table_uri: str) -> None:
    indexed_table(spark, table_uri)
    found = {m.name for m in pkgutil.iter_modules() if m.name.startswith("pyspark_")}
    assert "pyspark_tidemark" in found
    assert issubclass(pyspark_tidemark.DefaultSource, DataSource)
    assert pyspark_tidemark.DefaultSource.name() == "tidemark"
    fresh = spark.newSession()  # its own registrations and confs: pushdown off
    assert fresh.conf.get("spark.sql.python.filterPushdown.enabled") == "false"
    frame = fresh.read.format("tidemark").load(table_uri).where("id = 3")
    assert data_rows(frame) == {MODEL[3]}
    assert frame.rdd.getNumPartitions() == len(files_in_view(table_uri))


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


def test_equal_to_a_null_or_nested_column_is_left_to_spark(table_uri: str) -> None:
    """Only filters read_file applies with SQL's meaning are taken (no Spark needed to
    plan: the reader runs here as in PySpark's planning worker)."""
    HoodieTable.create(table_uri, people_config())
    source = TidemarkDataSource({"path": table_uri})
    reader = source.reader(source.schema())
    assert isinstance(reader, PushdownReader)
    left = [
        EqualTo(("region",), ""),
        EqualTo(("id",), None),
        EqualTo(("nested", "id"), 1),
        In(("id",), (1, None)),
    ]
    taken = EqualTo(("id",), 3)
    assert reader.pushFilters([*left, taken, In(("id",), (3, 4))]) == [*left, In(("id",), (3, 4))]
    assert reader.where == {"id": 3}
    (empty,) = reader.partitions()
    assert isinstance(empty, FilePartition)
    assert list(reader.read(empty)) == []
