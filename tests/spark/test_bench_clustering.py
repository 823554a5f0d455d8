"""``tidemark bench clustering`` at a tiny size: every reported field is there and sane."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import SparkSession

from tidemark.cli import main
from tidemark.commands.bench_clustering import events

FIELDS = (
    "rows",
    "files_before",
    "files_after",
    "rows_read_before",
    "rows_read_after",
    "query_speedup",
    "zorder_skipped",
    "hilbert_skipped",
    "deltars_skipped",
    "plan_100k_s",
)


def test_events_are_in_arrival_order_with_sessions_spread_over_time() -> None:
    data = events(4000, seed=1)
    assert data.column("event_id").to_pylist() == list(range(4000))
    sessions = data.column("session_id").to_numpy()
    first_half, second_half = set(sessions[:2000]), set(sessions[2000:])
    assert len(first_half) > 50 and first_half & second_half


def test_bench_reports_every_field(spark: SparkSession, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "clustering", "--rows", "20000", "--files", "16", "--json"]
    assert main([*argv, "--master", str(spark.sparkContext.master)]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(FIELDS) <= result.keys()
    assert result["rows"] == 20000
    assert result["files_before"] == 16
    assert 1 <= result["files_after"] < result["files_before"]
    assert result["rows_read_after"] < result["rows_read_before"] <= 20000
    assert result["query_speedup"] > 0
    for name in ("zorder_skipped", "hilbert_skipped", "deltars_skipped"):
        assert 0.0 <= result[name] <= 1.0
    assert set(result["layouts"]) == {"linear", "zorder", "hilbert", "delta-rs"}
    assert result["plan_100k_s"] > 0
    ingestion = result["ingestion_under_clustering"]
    assert ingestion["insert_rows"] == 1000
    assert ingestion["insert_alone_s"] > 0 and ingestion["insert_beside_cluster_run_s"] > 0
    assert ingestion["cluster_run_s"] > 0
