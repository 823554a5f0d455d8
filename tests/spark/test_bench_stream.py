"""``python -m benchmarks stream`` with tiny sizes: recent keys rewrite the one file group
holding them a batch; both sides commit every batch; a report and one JSON line. A batch
holds distinct existing keys, the newest ones or spread over every partition. With
``--table-type both``: merge-on-read beside copy-on-write and delta-rs, the bytes a batch
wrote, reads after the batches, and the ratios the targets compare, consistent with the
figures they come from."""

from __future__ import annotations

import gc
import sys

import pytest
from pyspark.sql import SparkSession

from benchmarks.drift import SAMPLES, Drift
from benchmarks.stream import COW, DELTA, MOR, TARGETS, batch, readme_rows, table_rows
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
    assert (
        0
        < result["drift"]["jvm_heap_mib"]["last_tenth"]
        < result["drift"]["jvm_rss_mib"]["last_tenth"]
    )
    assert 0 < result["drift"]["stage: write files"]["last_tenth"] < result["stream_p99_s"]


def test_the_drift_samples_add_no_python_objects_to_the_blocks_they_count(
    spark: SparkSession,
) -> None:
    """A long stream's Python blocks are counted by the process that keeps the samples: kept
    as Python floats in lists, a batch's nine values here would add nine blocks (900 over
    these 100; about 15 a batch in the stream bench). Each batch's values are new floats, as
    measured ones are; the arrays are checked once with a full collection around them, not
    with a full collection of the driver and of the JVM a batch, as ``batch_done`` samples."""
    drift = Drift(spark)

    def keep_a_batch(number: int) -> None:
        measured = {name: number + 0.5 + index for index, name in enumerate(SAMPLES)}
        drift.keep(measured, {"write files": number / 7, "commit": number / 11})

    for number in range(20):  # the arrays' first growth
        keep_a_batch(number)
    gc.collect()
    before = sys.getallocatedblocks()
    for number in range(20, 120):
        keep_a_batch(number)
    gc.collect()
    assert sys.getallocatedblocks() - before < 100
    assert len(drift.samples["batch_s"]) == len(drift.samples["stage: commit"]) == 120
    assert drift.samples["python_blocks"][-1] == 119 + 0.5 + SAMPLES.index("python_blocks")
    drift.batch_done(1.0, {"write files": 0.5})
    assert drift.samples["python_blocks"][-1] > 0 and drift.samples["stage: commit"][-1] == 0.0
    assert drift.samples["jvm_heap_mib"][-1] < drift.samples["jvm_rss_mib"][-1]
    assert set(drift.stage_medians()) == {"write files", "commit"}


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


def test_bench_stream_table_types_measures_mor_beside_cow_and_delta_rs(
    spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    rows, batch_rows = 2000, 20
    argv = ["stream", "--table-type", "both", "--rows", str(rows), "--batches", "2"]
    sizes = ["--batch-rows", str(batch_rows), "--read-repeats", "1"]
    report, result = run_bench(spark, capsys, *argv, *sizes)
    assert "table types" in report[0]
    assert (result["table_types"], result["keys"]) == ([MOR, COW], "spread")
    for side in (MOR, COW, DELTA):
        assert 0 < result[f"{side}_p50_s"] <= result[f"{side}_p90_s"], side
    parquet = result["batch_parquet_bytes_median"]
    for kind in (MOR, COW):
        assert result[f"{kind}_bytes_per_batch_ratio"] == round(
            result[f"{kind}_bytes_per_batch_median"] / parquet, 2
        )
        assert result[f"{kind}_lookup_rows"] == result["lookup_keys"] == 100
        assert result[f"{kind}_scan_s"] > 0
        assert result[f"{kind}_tagging"] == "record"  # each table has the record index
    assert result["lookups"] == 5  # lookups a scan: their median steadier than of one
    # copy-on-write rewrites every file group a batch touches; MOR appends the batch's rows
    assert result[f"{COW}_bytes_per_batch_median"] > result[f"{MOR}_bytes_per_batch_median"]
    assert result[f"{MOR}_stage_median_s"]
    # spread keys touch every Delta file: a merge copies every row it does not update
    assert result["delta_rows_copied_median"] == rows - batch_rows
    assert result["cow_over_mor_p50"] == round(result[f"{COW}_p50_s"] / result[f"{MOR}_p50_s"], 2)
    assert result["mor_over_cow_scan"] == round(
        result[f"{MOR}_scan_s"] / result[f"{COW}_scan_s"], 2
    )
    assert set(result["targets"]) == set(TARGETS)
    for name, goal in result["targets"].items():
        op, bound = TARGETS[name]
        assert goal["met"] == (result[name] <= bound if op == "<=" else result[name] >= bound)
        assert any(line.startswith(f"{name} = ") for line in report), name
    assert [len(row) for row in readme_rows(result)] == [4, 4, 4]
    assert "--table-type both" in readme_rows(result)[0][0]
