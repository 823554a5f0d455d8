"""``python -m benchmarks compaction`` with tiny sizes: every file group compacted against a
bulk_insert, scans after, and in ``--long`` mode inline compactions, the storage against
the snapshot's Parquet and the first against the last tenth; a report and one JSON line,
its ratios consistent with the figures they come from."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from benchmarks.compaction import TARGETS
from benchmarks.stream import COW, MOR
from spark.sparkkit import run_bench

TINY = ["--rows", "2000", "--batch-rows", "20", "--read-repeats", "1"]


def test_bench_compaction_compacts_every_group_beside_a_bulk_insert(
    spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    report, result = run_bench(spark, capsys, "compaction", *TINY, "--batches", "2")
    assert "compaction bench (default)" in report[0]
    assert (result["rows"], result["batches"], result["long"]) == (2000, 2, False)
    # the one plan compacts every file group the spread keys landed in
    assert 0 < result["compacted_file_groups"] == result["file_groups_with_logs"]
    assert result["file_groups_with_logs"] <= result["file_groups"]
    assert 0 < result["compacted_rows"] <= 2000
    assert result["compaction_over_bulk_insert"] == round(
        result["compaction_s"] / result["bulk_insert_s"], 2
    )
    assert result["mor_over_cow_scan"] == round(
        result[f"{MOR}_scan_s"] / result[f"{COW}_scan_s"], 2
    )
    assert result["snapshot_parquet_bytes"] > 0
    assert set(result["targets"]) == {"compaction_over_bulk_insert", "mor_over_cow_scan"}
    for name, goal in result["targets"].items():
        assert TARGETS[name][0] == "<="
        assert goal["met"] == (result[name] <= TARGETS[name][1])
        assert any(line.startswith(f"{name} = ") for line in report), name
    assert len(result["load_average_before"]) == len(result["load_average_after"]) == 3


def test_bench_compaction_long_compacts_inline(
    spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compaction", *TINY, "--long", "--batches", "4", "--compact-every", "2"]
    argv += ["--compaction-target-io-mb", "0.001"]  # one file group each
    report, result = run_bench(spark, capsys, *argv)
    assert "--long, compacting every 2" in report[0]
    assert (result["batches"], result["compact_every"]) == (4, 2)
    assert result["compactions_inline"] == 2  # after the 2nd and the 4th batch
    assert result["storage_over_snapshot"] == round(
        result["storage_max_bytes"] / result["snapshot_parquet_bytes"], 2
    )
    assert result["storage_max_bytes"] >= result["storage_median_bytes"] > 0
    assert result["storage_max_bytes"] >= result["storage_bytes"] > 0
    assert result["retain_commits"] == 10
    assert (result["compaction_target_io_mb"], result["compacted_file_groups_median"]) == (0.001, 1)
    assert result["p50_last_over_first_tenth"] == round(
        result["p50_last_tenth_s"] / result["p50_first_tenth_s"], 2
    )
    assert f"{COW}_p50_s" not in result  # the merge-on-read table alone
    assert set(result["targets"]) == {"storage_over_snapshot"}
