"""Deletes by key (issue 15): an input with only the record key columns (and optionally the
partition columns, or any others) deletes those keys wherever the table holds them; no
instant is left pending. Read back by hudi-rs and our reader against a dict model, on the
local filesystem and on the local S3 server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark.sparkkit import SCHEMA, assert_readers_agree, cli_write, local_frame, table_bytes
from tidemark.errors import InvalidArgumentError
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions
from tidemark.table import HoodieTable

DATA = ["id", "name", "part", "ts"]
ROWS = [(i, f"n{i}", "a" if i % 2 else "b", 0) for i in range(6)]


def model(*deleted: int) -> dict[str, dict[str, Any]]:
    return {str(row[0]): dict(zip(DATA, row, strict=True)) for row in ROWS if row[0] not in deleted}


def data_of(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {key: {name: row[name] for name in DATA} for key, row in rows.items()}


@pytest.fixture
def table(spark: SparkSession, local_or_s3_uri: str) -> str:
    options: dict[str, Any] = {"record_key_fields": ["id"], "partition_fields": ["part"]}
    write(
        spark,
        local_frame(spark, ROWS, SCHEMA),
        local_or_s3_uri,
        "bulk_insert",
        WriteOptions(precombine_field="ts", **options),
    )
    return local_or_s3_uri


def test_a_csv_of_keys_alone_deletes_them(spark: SparkSession, table: str, tmp_path: Path) -> None:
    keys = tmp_path / "keys.csv"
    keys.write_text("id\n1\n4\n99\n")
    assert cli_write(table, keys, "delete") == 0
    assert data_of(assert_readers_agree(table, DATA)) == model(1, 4)
    assert HoodieTable.open(table).timeline.pending() == []


def test_partition_and_other_columns_are_ignored(spark: SparkSession, table: str) -> None:
    """The key is found where the table holds it, whatever partition value the input says;
    a column whose type differs from the table's does not matter to a delete."""
    df = local_frame(
        spark, [(2, "b", 7), (3, "b", 8), (3, "a", 9)], "id int, part string, name int"
    )
    result = write(spark, df, table, "delete")
    assert result.rows_deleted == 2
    assert data_of(assert_readers_agree(table, DATA)) == model(2, 3)
    assert HoodieTable.open(table).timeline.pending() == []


def test_an_empty_delete_deletes_nothing(spark: SparkSession, table: str) -> None:
    """No rows, by key alone or with every column: nothing deleted, nothing left pending
    (an empty input once failed in validation's sum of no rows)."""
    for schema in ("id int", SCHEMA):
        result = write(spark, local_frame(spark, [], schema), table, "delete")
        assert result.rows_deleted == 0
    assert data_of(assert_readers_agree(table, DATA)) == model()
    assert HoodieTable.open(table).timeline.pending() == []


def test_composite_keys_are_deleted_by_their_key_columns(
    spark: SparkSession, table_uri: str
) -> None:
    write(
        spark,
        local_frame(spark, ROWS, SCHEMA),
        table_uri,
        "bulk_insert",
        WriteOptions(record_key_fields=["id", "name"], partition_fields=["part"]),
    )
    keys = local_frame(spark, [(0, "n0"), (5, "n5"), (5, "other")], "id int, name string")
    assert write(spark, keys, table_uri, "delete").rows_deleted == 2
    rows = assert_readers_agree(table_uri, DATA)
    assert {row["id"] for row in rows.values()} == {1, 2, 3, 4}


def test_a_delete_without_the_key_column_is_refused_and_changes_nothing(
    spark: SparkSession, table: str
) -> None:
    before = table_bytes(table)
    with pytest.raises(InvalidArgumentError) as raised:
        write(spark, local_frame(spark, [("a",)], "part string"), table, "delete")
    assert raised.value.field == "record_key_fields"
    assert "'id'" in str(raised.value)
    assert table_bytes(table) == before


def test_a_delete_creating_the_table_needs_its_layout_columns(
    spark: SparkSession, table_uri: str
) -> None:
    """Keys alone cannot describe a new partitioned table: refused, nothing created."""
    with pytest.raises(InvalidArgumentError) as raised:
        write(
            spark,
            local_frame(spark, [(1,)], "id int"),
            table_uri,
            "delete",
            WriteOptions(record_key_fields=["id"], partition_fields=["part"]),
        )
    assert raised.value.field == "partition_fields"
    assert not Path(table_uri).exists()
