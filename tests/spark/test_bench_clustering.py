"""``python -m benchmarks clustering`` at a tiny size: every reported field is there and sane."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import SparkSession

from benchmarks.__main__ import main
from benchmarks.clustering import events, points, readme_rows

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
    "uniform_layouts",
    "references",
)
LAYOUTS = {"linear", "zorder", "hilbert", "zorder-direct", "hilbert-direct", "delta-rs"}


def test_events_are_in_arrival_order_with_sessions_spread_over_time() -> None:
    data = events(4000, seed=1)
    assert data.column("event_id").to_pylist() == list(range(4000))
    sessions = data.column("session_id").to_numpy()
    first_half, second_half = set(sessions[:2000]), set(sessions[2000:])
    assert len(first_half) > 50 and first_half & second_half


def test_bench_reports_every_field(spark: SparkSession, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["clustering", "--rows", "20000", "--files", "16", "--repeats", "2", "--json"]
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
    for layouts, columns in ((result["layouts"], "session_id"), (result["uniform_layouts"], "x")):
        assert set(layouts) == LAYOUTS
        for name, measured in layouts.items():
            assert 0.0 <= measured[f"skipped_{columns}"] <= 1.0
            assert measured["rewrite_s"] > 0 and len(measured["rewrite_runs_s"]) == 2
            assert min(measured["rewrite_runs_s"]) <= measured["rewrite_s"]
            if name != "delta-rs":
                assert measured["speed_vs_deltars"] > 0
        assert layouts["delta-rs"]["stats_checked_files"] == layouts["delta-rs"]["files"] >= 1
    assert result["plan_100k_s"] > 0
    ingestion = result["ingestion_under_clustering"]
    assert ingestion["insert_rows"] == 1000
    assert ingestion["insert_alone_s"] > 0 and ingestion["insert_beside_cluster_run_s"] > 0
    assert ingestion["cluster_run_s"] > 0
    assert result["master"] == str(spark.sparkContext.master) and result["repeats"] == 2
    assert all(set(ref) == {"what", "figure", "source"} for ref in result["references"])
    rows = readme_rows(result)
    assert len(rows) == 7 and all(len(row) == 4 for row in rows)
    assert "hilbert-direct" in rows[1][1] and "delta-rs" in rows[3][2]
    assert "median of 2 rounds" in rows[3][0]
    assert "ingestion latency" in rows[5][0] and rows[5][2].endswith("s alone")
    figures = [reference["figure"] for reference in result["references"]]
    assert not any(figure in cell for figure in figures for row in rows for cell in row)


def test_points_have_two_columns_of_comparable_range() -> None:
    data = points(10_000, seed=1)
    spans = [
        float(data.column(c).to_numpy().max()) - float(data.column(c).to_numpy().min())
        for c in ("x", "y")
    ]
    assert 0.9 < spans[0] / spans[1] < 1.1 and min(spans) > 2**62
