"""``python -m benchmarks datasource`` with tiny sizes: the key query reads fewer files and rows
than the full scan and returns the same rows (the benchmark checks), one JSON line."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import SparkSession

from benchmarks.__main__ import main
from benchmarks.datasource import readme_rows


def test_bench_datasource_prints_a_table_and_a_json_line(
    spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "datasource",
                "--rows",
                "3000",
                "--keys",
                "5",
                "--runs",
                "1",
                "--input-tasks",
                "4",
                "--json",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.strip().splitlines()
    result = json.loads(lines[-1])
    assert "files read" in "\n".join(lines[:-1])
    assert (result["rows"], result["keys"], result["rows_returned"]) == (3000, 5, 5)
    assert result["full_scan_files_read"] == result["files"] == 40  # 4 tasks x 10 partitions
    assert 1 <= result["datasource_files_read"] <= 5
    assert result["full_scan_rows_read"] == 3000 > result["datasource_rows_read"]
    assert result["datasource_s"] > 0 and result["full_scan_s"] > 0
    rows = readme_rows(result)
    assert [len(row) for row in rows] == [4, 4, 4]
    assert rows[1][1:3] == (
        str(result["datasource_files_read"]),
        str(result["full_scan_files_read"]),
    )


def test_bench_datasource_refuses_more_keys_than_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["datasource", "--rows", "10", "--keys", "20"]) == 2
    assert "keys: must be at most --rows (10)" in capsys.readouterr().err
