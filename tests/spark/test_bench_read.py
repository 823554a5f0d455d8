"""``python -m benchmarks read`` with tiny sizes: every query answered alike by Tidemark,
``spark.read.parquet`` and hudi-rs (the benchmark checks), key queries opening fewer files
than the snapshot has, a report and one JSON line."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from benchmarks.__main__ import main
from benchmarks.read import readme_rows
from spark.sparkkit import run_bench

QUERIES = {"full scan", "count", "partition", "range", "point", "keys"}


def test_bench_read_prints_a_table_and_a_json_line(
    spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["read", "--rows", "2000", "--files", "20", "--clustered-files", "2", "--keys", "3"]
    report, result = run_bench(spark, capsys, *argv, "--runs", "1")
    assert "parquet/tidemark" in "\n".join(report)
    assert (result["rows"], result["keys"], result["files"]) == (2000, 3, 20)
    plain, clustered = result["tables"]["table"], result["tables"]["clustered"]
    assert set(plain) - {"files"} == set(clustered) - {"files"} == QUERIES
    assert plain["point"]["files_read"] == 1
    assert plain["keys"]["files_read"] <= 3 < plain["full scan"]["files_read"] == 20
    assert plain["keys"]["in_driver"] and "read in the driver" in readme_rows(result)[1][1]
    assert plain["partition"]["files_read"] == 2  # one partition of ten
    assert clustered["files"] < plain["files"]
    assert all(plain[q]["tidemark_s"] > 0 and plain[q]["hudi_rs_s"] > 0 for q in QUERIES)
    rows = readme_rows(result)
    assert [len(row) for row in rows] == [4, 4, 4]
    assert plain["point"]["in_driver"] and "read in the driver" in rows[2][1]


def test_bench_read_refuses_more_keys_than_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["read", "--rows", "10", "--keys", "20"]) == 2
    assert "keys: must be at most --rows (10)" in capsys.readouterr().err
