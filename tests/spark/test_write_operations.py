"""Each write operation against expected rows, read back by our reader and by hudi-rs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from spark.sparkkit import SCHEMA, assert_readers_agree, data_files, files_in_view, local_frame
from tidemark.jobs.write import WriteResult, write
from tidemark.jobs.write_options import WriteOptions
from tidemark.storage import open_storage
from tidemark.table import HoodieTable

DATA = ["id", "name", "part", "ts"]


def _write(
    spark: SparkSession, uri: str, op: str, rows: list[tuple], **options: Any
) -> WriteResult:
    return write(spark, local_frame(spark, rows, SCHEMA), uri, op, WriteOptions(**options))


def _names(uri: str) -> dict[str, str]:
    return {key: row["name"] for key, row in assert_readers_agree(uri, DATA).items()}


CREATE: dict[str, Any] = {
    "record_key_fields": ["id"],
    "partition_fields": ["part"],
    "precombine_field": "ts",
}
ONE_FILE: dict[str, Any] = {"sort_mode": "global_sort"}
"""A small bulk_insert as one file (sort mode none writes one per input partition)."""


def test_bulk_insert_then_upsert_insert_delete_overwrite(
    spark: SparkSession, table_uri: str, table_version: int
) -> None:
    first = _write(
        spark,
        table_uri,
        "bulk_insert",
        [(i, f"n{i}", "a" if i < 5 else "b", 0) for i in range(10)],
        **CREATE,
        table_version=table_version,
    )
    assert (first.rows_inserted, first.operation) == (10, "bulk_insert")
    assert _names(table_uri) == {str(i): f"n{i}" for i in range(10)}

    upsert = _write(
        spark,
        table_uri,
        "upsert",
        [(1, "late", "a", 5), (1, "newest", "a", 9), (2, "moved", "b", 1), (20, "new", "c", 1)],
    )
    assert (upsert.rows_updated, upsert.rows_deleted) == (1, 1)
    expected = {str(i): f"n{i}" for i in range(10)} | {"1": "newest", "2": "moved", "20": "new"}
    rows = assert_readers_agree(table_uri, DATA)
    assert {k: r["name"] for k, r in rows.items()} == expected
    assert rows["2"]["_hoodie_partition_path"] == "b"
    assert rows["1"]["_hoodie_commit_time"] == upsert.instant
    assert rows["3"]["_hoodie_commit_time"] == first.instant

    _write(spark, table_uri, "delete", [(3, None, "a", 0), (99, None, "a", 0)])
    expected.pop("3")
    assert _names(table_uri) == expected

    _write(spark, table_uri, "insert", [(30, "ins", "c", 0)])
    expected["30"] = "ins"
    assert _names(table_uri) == expected

    overwrite = _write(spark, table_uri, "insert_overwrite", [(40, "ow", "b", 0)])
    assert overwrite.replaced_file_groups >= 1
    expected = {k: v for k, v in expected.items() if k in {"0", "1", "4", "20", "30"}} | {
        "40": "ow"
    }
    assert _names(table_uri) == expected
    table = HoodieTable.open(table_uri)
    instant = table.timeline.last_completed()
    assert instant is not None and instant.action == "replacecommit"
    assert table.config.table_version == table_version


def test_meta_columns_and_file_layout(spark: SparkSession, table_uri: str) -> None:
    result = _write(
        spark,
        table_uri,
        "bulk_insert",
        [(i, f"n{i}", "p", 0) for i in range(5)],
        **CREATE,
        **ONE_FILE,
    )
    storage = open_storage(table_uri)
    assert storage.exists("p/.hoodie_partition_metadata")
    (path,) = files_in_view(table_uri)
    with storage.open_input(path) as stream:
        parquet = pq.ParquetFile(stream)
        table = parquet.read()
        footer = parquet.metadata.metadata
    assert table.column_names[:5] == [
        "_hoodie_commit_time",
        "_hoodie_commit_seqno",
        "_hoodie_record_key",
        "_hoodie_partition_path",
        "_hoodie_file_name",
    ]
    assert "part" in table.column_names
    seqnos = table.column("_hoodie_commit_seqno").to_pylist()
    assert all(s.startswith(f"{result.instant}_") for s in seqnos)
    assert len(set(seqnos)) == 5
    assert set(table.column("_hoodie_file_name").to_pylist()) == {path.split("/")[-1]}
    assert footer[b"hoodie_min_record_key"] == b"0"
    assert footer[b"hoodie_max_record_key"] == b"4"


def test_small_files_are_topped_up_and_large_inputs_split(
    spark: SparkSession, table_uri: str
) -> None:
    _write(
        spark, table_uri, "bulk_insert", [(i, "x", "p", 0) for i in range(4)], **CREATE, **ONE_FILE
    )
    (small,) = files_in_view(table_uri)
    result = _write(spark, table_uri, "insert", [(i, "y", "p", 0) for i in range(4, 8)])
    (topped_up,) = files_in_view(table_uri)
    assert topped_up.split("_")[0] == small.split("_")[0]
    assert result.rows_written == 8
    assert len(_names(table_uri)) == 8
    # with a tiny target every new file group holds about one record's estimated size
    split = _write(
        spark,
        table_uri,
        "insert",
        [(i, "z", "q", 0) for i in range(100, 130)],
        target_file_bytes=2_000,
        small_file_limit_bytes=1,
    )
    assert split.files_written > 1
    assert len(_names(table_uri)) == 38


def test_bulk_insert_rolls_over_at_a_small_target_file_size(
    spark: SparkSession, table_uri: str
) -> None:
    target = 16_384
    rows = [(i, f"name-{i:06d}-{'x' * (i % 40)}", "p", i) for i in range(6_000)]
    result = _write(
        spark, table_uri, "bulk_insert", rows, **CREATE, **ONE_FILE, target_file_bytes=target
    )
    sizes = [Path(table_uri, path).stat().st_size for path in files_in_view(table_uri)]
    assert result.files_written == len(sizes) > 4
    # a file is closed once one more row would pass the target; its footer comes on top
    assert max(sizes) < 2 * target
    assert len(_names(table_uri)) == 6_000


def test_upsert_of_every_row_into_one_file_group_keeps_no_orphans(
    spark: SparkSession, table_uri: str
) -> None:
    _write(
        spark, table_uri, "bulk_insert", [(i, "v1", "p", 1) for i in range(6)], **CREATE, **ONE_FILE
    )
    _write(spark, table_uri, "upsert", [(i, "v2", "p", 2) for i in range(6)])
    _write(spark, table_uri, "delete", [(i, None, "p", 0) for i in range(6)])
    assert _names(table_uri) == {}
    assert files_in_view(table_uri) <= data_files(table_uri)
    assert len(files_in_view(table_uri)) == 1


@pytest.mark.parametrize("hive_style", [False, True])
def test_complex_keys_and_hive_style(
    spark: SparkSession, table_uri: str, hive_style: bool, table_version: int
) -> None:
    rows = [(1, "a", "x", 0), (1, "b", "x", 0), (2, "a", "y", 0)]
    _write(
        spark,
        table_uri,
        "upsert",
        rows,
        record_key_fields=["id", "name"],
        partition_fields=["part"],
        hive_style=hive_style,
        table_version=table_version,
    )
    keys = set(assert_readers_agree(table_uri, DATA))
    assert keys == {"id:1,name:a", "id:1,name:b", "id:2,name:a"}
    partitions = {p.partition_path for p in HoodieTable.open(table_uri).view().latest_base_files()}
    assert partitions == ({"part=x", "part=y"} if hive_style else {"x", "y"})
