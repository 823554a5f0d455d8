"""The Spark write job on table versions 6, 8 and 9: a table it creates at each version
takes inserts, upserts and deletes (the last one cleaning inline), and hudi-rs reads what
the model expects after each."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from benchmarks.write import readme_rows
from spark.sparkkit import SCHEMA, assert_readers_agree, local_frame, run_bench
from tidemark.errors import InvalidArgumentError
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions
from tidemark.table import HoodieTable
from tidemark.table.metadata.actions import WRITE_ACTIONS

DATA = ["id", "name", "part", "ts"]


def test_writes_at_each_version_read_by_hudi_rs(
    spark: SparkSession, tmp_path: Path, table_version: int
) -> None:
    version = table_version
    uri = str(tmp_path / f"v{version}")
    layout = WriteOptions(
        record_key_fields=["id"],
        partition_fields=["part"],
        precombine_field="ts",
        table_version=version,
    )
    first = [(k, f"v{k}", "ab"[k % 2], 1) for k in range(6)]
    write(spark, local_frame(spark, first, SCHEMA), uri, "insert", layout)
    model = {str(k): (k, f"v{k}", "ab"[k % 2], 1) for k in range(6)}
    upsert = [(1, "one", "a", 2), (7, "seven", "b", 2)]  # key 1 moves from b to a
    write(spark, local_frame(spark, upsert, SCHEMA), uri, "upsert")
    model |= {str(row[0]): row for row in upsert}
    delete = local_frame(spark, [(2, "", "a", 3)], SCHEMA)
    result = write(spark, delete, uri, "delete", WriteOptions(retain_commits=1))
    del model["2"]
    assert result.retention is not None  # the inline clean runs on every version
    assert result.retention.clean.files_deleted >= 1  # the insert's slices the upsert rewrote
    rows = assert_readers_agree(uri, DATA)
    assert {key: tuple(row[c] for c in DATA) for key, row in rows.items()} == model
    table = HoodieTable.open(uri)
    assert table.config.table_version == version
    completed = table.timeline.completed(WRITE_ACTIONS)
    assert len(completed) == 3
    if version != 6:
        times = [i.completed_at for i in completed]
        assert all(i.completion_time for i in completed) and times == sorted(times)
    with pytest.raises(InvalidArgumentError, match="the table is at version"):
        other = 8 if version == 6 else 6
        options = WriteOptions(table_version=other)
        write(spark, local_frame(spark, [(9, "x", "a", 1)], SCHEMA), uri, "upsert", options)


def test_bench_write_compares_a_table_version_with_6(
    spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["write", "--rows", "2000", "--repeats", "1", "--table-version", "8"]
    report, result = run_bench(spark, capsys, *argv)
    assert any("table version 8 beside 6" in line for line in report)
    assert result["table_version"] == 8
    assert {len(runs) for runs in result["versions_bulk_insert_runs_s"].values()} == {2}
    assert result["version_vs_6_bulk_insert_ratio"] > 0
    assert result["version_vs_6_upsert_ratio"] > 0
    assert readme_rows(result)[-1][0] == "same, `--table-version 8`: upsert at version 8"
