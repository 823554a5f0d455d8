"""read_dataframe (pruned, through storage), the rollback job and ``python -m benchmarks write``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from benchmarks.write import readme_rows
from spark.sparkkit import SCHEMA, local_frame, run_bench, snapshot
from tidemark.errors import InvalidArgumentError
from tidemark.jobs.read import read_dataframe
from tidemark.jobs.rollback import rollback_table
from tidemark.jobs.write import write
from tidemark.jobs.write_options import WriteOptions
from tidemark.table import HoodieTable
from tidemark.table.metadata.actions import COMMIT
from tidemark.table.timeline.instant import new_instant_time

CREATE: dict[str, Any] = {
    "record_key_fields": ["id"],
    "partition_fields": ["part"],
    "precombine_field": "ts",
}


def test_read_dataframe_filters_prunes_and_time_travels(
    spark: SparkSession, table_uri: str
) -> None:
    first = write(
        spark,
        local_frame(spark, [(1, "a", "p", 0), (2, "b", "q", 0)], SCHEMA),
        table_uri,
        "bulk_insert",
        WriteOptions(**CREATE),
    )
    write(spark, local_frame(spark, [(1, "a2", "p", 1)], SCHEMA), table_uri, "upsert")
    everything = read_dataframe(spark, HoodieTable.open(table_uri))
    assert sorted(r["name"] for r in everything.collect()) == ["a2", "b"]
    assert everything.columns == snapshot(table_uri).column_names
    only_q = read_dataframe(
        spark, HoodieTable.open(table_uri), where={"part": "q"}, columns=["id", "name"]
    )
    assert [tuple(r) for r in only_q.collect()] == [(2, "b")]
    old = read_dataframe(spark, HoodieTable.open(table_uri), as_of=first.instant, where={"id": 1})
    assert [r["name"] for r in old.collect()] == ["a"]
    with pytest.raises(InvalidArgumentError) as raised:
        read_dataframe(spark, HoodieTable.open(table_uri), columns=["nope"])
    assert raised.value.field == "nope"


def test_rollback_job_rolls_back_a_pending_write(spark: SparkSession, table_uri: str) -> None:
    write(
        spark,
        local_frame(spark, [(1, "a", "p", 0)], SCHEMA),
        table_uri,
        "bulk_insert",
        WriteOptions(**CREATE),
    )
    timeline = HoodieTable.open(table_uri).timeline
    pending = new_instant_time(after=timeline.latest_timestamp())
    timeline.create_requested(pending, COMMIT)
    (result,) = rollback_table(HoodieTable.open(table_uri))
    assert result.rolled_back.timestamp == pending
    assert not HoodieTable.open(table_uri).timeline.pending()


def test_bench_write_prints_a_json_line(
    spark: SparkSession, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["write", "--rows", "2000", "--repeats", "2", "--cold-first", "plain"]
    report, result = run_bench(spark, capsys, *argv)
    assert any("partitionBy" in line for line in report)
    master = str(spark.sparkContext.master)
    assert result["rows"] == 2000
    assert (result["master"], result["cold_first"], result["partitions"]) == (master, "plain", 10)
    assert len(result["plain_parquet_runs_s"]) == len(result["bulk_insert_runs_s"]) == 3
    assert result["plain_parquet_cold_s"] == result["plain_parquet_runs_s"][0]
    assert result["upsert_rows"] == 20
    assert result["bulk_vs_plain_ratio"] > 0
    assert {"write files", "commit"} <= result["bulk_insert_stage_s"].keys()
    rows = readme_rows(result)
    assert [len(row) for row in rows] == [4, 4, 4, 4]
    assert rows[1][0] == "same, cold round (plain first)"
