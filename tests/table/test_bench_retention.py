"""``python -m benchmarks retention`` at a tiny size: both runs measured, and cleaning
keeps each touched file group within retained commits + 1 slices."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.retention import format_report, measure


def test_bench_retention_reports_both_runs(tmp_path: Path) -> None:
    args = argparse.Namespace(
        commits=12, file_groups=4, partitions=2, upsert_percent=25.0, retain_commits=2, seed=1
    )
    report = measure(args, tmp_path)
    on, off = report["on"], report["off"]
    assert on["max_slices_per_touched_group"] <= args.retain_commits + 1
    assert off["max_slices_per_touched_group"] > on["max_slices_per_touched_group"]
    assert on["bytes_on_storage"] < off["bytes_on_storage"]
    assert on["clean_ms_per_commit"] > 0 and off["clean_ms_per_commit"] == 0
    (point,) = report["metadata"]  # only the last: 12 commits is before the first checkpoint
    assert point["commits"] == args.commits
    assert 0 < point["column_stats_files"] <= args.commits + 1
    assert point["hoodie_files"] > point["column_stats_files"] + point["archive_files"]
    assert point["hoodie_bytes"] > point["column_stats_bytes"] > 0
    text = format_report(report)
    assert "clean+archive on" in text and f"{args.commits:>20,} commits" in text
