"""``python -m benchmarks stream`` with tiny sizes: recent keys rewrite the one file group
holding them a batch; both sides commit every batch; a report and one JSON line. A batch
holds distinct existing keys, the newest ones or spread over every partition."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from benchmarks.stream import batch, readme_rows, table_rows
from benchmarks.write import PARTITIONS
from spark.sparkkit import run_bench


def test_bench_stream_prints_a_table_and_a_json_line(
    spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["stream", "--rows", "2000", "--batches", "2", "--batch-rows", "20"]
    report, result = run_bench(spark, capsys, *argv)
    assert "upserts of recent keys" in report[0]
    assert (result["rows"], result["batches"], result["keys"]) == (2000, 2, "recent")
    assert result["files"] >= PARTITIONS  # one file group or more a partition
    assert result["files_written_median"] == 1  # the one holding the newest keys
    assert 0 < result["stream_p50_s"] <= result["stream_p99_s"]
    assert 0 < result["one_at_a_time_p50_s"] <= result["one_at_a_time_p99_s"]
    assert [len(row) for row in readme_rows(result)] == [4, 4, 4]
    assert "--keys recent" in readme_rows(result)[0][0]


@pytest.mark.parametrize("keys", ["recent", "spread"])
def test_a_batch_holds_distinct_existing_keys_laid_out_as_the_table(
    spark: SparkSession, keys: str
) -> None:
    rows, size = 5_000, 50
    table = {(r.id, r.part) for r in table_rows(spark, rows, keys).collect()}
    for number in (0, 1, 77):
        updates = [(r.id, r.part) for r in batch(spark, rows, size, number, keys).collect()]
        assert len(set(updates)) == size and set(updates) <= table, (keys, number)
        parts = {part for _, part in updates}
        assert parts == ({PARTITIONS - 1} if keys == "recent" else set(range(PARTITIONS)))
        if keys == "recent":
            assert min(key for key, _ in updates) >= rows - rows // 100
