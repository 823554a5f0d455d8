"""`python -m benchmarks index --scale` runs end to end (tiny sizes; the numbers belong to the
benchmark): every size measured, the upsert curve, and the README rows of its JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.__main__ import main
from benchmarks.index_scale import readme_rows


def test_scale_bench_reports_each_size_and_lookups_over_upserts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["index", "--scale", "--sizes", "30000,3000", "--upserts", "12,1"]
    assert main([*argv, "--batch", "1000", "--repeat", "1", "--json"]) == 0

    output = capsys.readouterr().out.strip().splitlines()
    report = json.loads(output[-1])
    assert "3,000" in output[1] and "30,000" in output[1]  # the table, one column per size
    sizes = report["sizes"]
    assert [row["entries"] for row in sizes] == [3000, 30000]  # ascending
    for row in sizes:
        assert (row["shards"], row["found"]) == (10, 500)  # half of the batch is present
        assert row["entries"] // 10 < row["largest_shard_entries"] < row["entries"] // 5
        assert 0 < row["build_peak_rss_mb"] <= row["build_rss_bound_mb"]
        for key in ("build_s", "bytes_per_entry", "warm_ms", "cold_ms", "service_keys_per_s"):
            assert row[key] > 0, key
    assert sizes[0]["warm_growth_vs_log"] == sizes[0]["cold_growth_vs_log"] == 1.0
    after = report["upserts"]["after"]
    assert report["upserts"]["entries"] == 3000  # the smallest size
    assert [point["upserts"] for point in after] == [1, 12]
    assert after[0]["delta_files"] >= 1  # the first upsert's deltas are visible
    assert all(point["lookup_ms"] > 0 and point["first_lookup_ms"] > 0 for point in after)
    assert all(point["settle_s"] >= 0 for point in after)

    rows = readme_rows(report)
    assert [row[0].split(",")[0] for row in rows] == [
        "warm 1",
        "cold 1",
        "lookup after 12 vs 1 upserts (3",
    ]
    larger, smaller = sizes[1], sizes[0]
    expected = [
        larger["warm_ms"] / smaller["warm_ms"],
        larger["cold_ms"] / smaller["cold_ms"],
        after[-1]["lookup_ms"] / after[0]["lookup_ms"],
    ]
    for (_, measured, baseline, ratio), raw in zip(rows, expected, strict=True):
        assert measured.endswith(" ms") and baseline.endswith(" ms")
        assert ratio == f"{raw:.2f}x"  # both sides of the ratio from the same run


def test_keep_builds_once_and_reuses_the_index_with_its_build_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["index", "--scale", "--sizes", "3000", "--batch", "1000", "--repeat", "1"]
    kept = ["--upserts", "none", "--keep", str(tmp_path / "kept"), "--json"]
    reports = []
    for _ in range(2):
        assert main([*argv, *kept]) == 0
        reports.append(json.loads(capsys.readouterr().out.strip().splitlines()[-1])["sizes"][0])

    first, second = reports
    assert (first["build_reused"], second["build_reused"]) == (False, True)
    assert second["build_s"] == first["build_s"]  # the figures of the one build
    assert first["found"] == second["found"] == 500

    assert main([*argv, "--keep", str(tmp_path / "other")]) == 2  # upserts change the table
    assert "keep: needs --upserts none" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()
