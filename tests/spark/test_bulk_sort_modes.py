"""bulk_insert's three sort modes write the same rows with Hudi's file layouts."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from spark.sparkkit import assert_readers_agree, local_frame
from tidemark.errors import InvalidArgumentError, NotFoundError
from tidemark.jobs.bulk import SORT_MODES
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions
from tidemark.table import HoodieTable

ROWS = 400
INPUT_PARTITIONS = 4
PARTS = ("a", "b", "c")
KEYS: dict[str, Any] = {"record_key_fields": ["id"], "partition_fields": ["part"]}


def _bulk_insert(spark: SparkSession, table_uri: str, sort_mode: str) -> None:
    """Keys and partitions interleaved over four input partitions."""
    rows = [(i, f"n{i}", PARTS[i % len(PARTS)], 0) for i in range(ROWS)]
    data = local_frame(spark, rows, "id int, name string, part string, ts long")
    write(
        spark,
        data.repartition(INPUT_PARTITIONS),
        table_uri,
        "bulk_insert",
        WriteOptions(**KEYS, sort_mode=sort_mode),
    )


def _files_per_partition(table_uri: str) -> Counter[str]:
    return Counter(f.partition_path for f in HoodieTable.open(table_uri).view().latest_base_files())


@pytest.mark.parametrize("sort_mode", SORT_MODES)
def test_every_sort_mode_writes_every_row_once(
    spark: SparkSession, table_uri: str, sort_mode: str
) -> None:
    _bulk_insert(spark, table_uri, sort_mode)
    rows = assert_readers_agree(table_uri, ["id", "name", "part"])
    assert {int(key) for key in rows} == set(range(ROWS))
    assert all(row["part"] == PARTS[int(key) % len(PARTS)] for key, row in rows.items())


def test_none_writes_one_file_per_partition_path_and_input_partition(
    spark: SparkSession, table_uri: str
) -> None:
    _bulk_insert(spark, table_uri, "none")
    assert _files_per_partition(table_uri) == dict.fromkeys(PARTS, INPUT_PARTITIONS)


@pytest.mark.parametrize("sort_mode", ["global_sort", "partition_sort"])
def test_sorted_modes_write_keys_in_order(
    spark: SparkSession, table_uri: str, sort_mode: str
) -> None:
    _bulk_insert(spark, table_uri, sort_mode)
    table = HoodieTable.open(table_uri)
    files = table.view().latest_base_files()
    for base in files:
        with table.storage.open_input(base.path) as stream:
            ids = pq.read_table(stream, columns=["id"]).column("id").to_pylist()
        assert ids == sorted(ids)
    if sort_mode == "global_sort":
        assert _files_per_partition(table_uri) == dict.fromkeys(PARTS, 1)


def test_an_unknown_sort_mode_is_rejected_before_anything_is_written(
    spark: SparkSession, table_uri: str
) -> None:
    with pytest.raises(InvalidArgumentError) as error:
        _bulk_insert(spark, table_uri, "random")
    assert error.value.field == "sort_mode"
    with pytest.raises(NotFoundError):
        HoodieTable.open(table_uri)
