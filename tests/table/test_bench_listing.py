"""``python -m benchmarks listing`` at a tiny size on the session's moto server: both views
list the same slices, and the view through the metadata table sends fewer LIST requests
than one per partition."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.listing import format_report, measure


def test_bench_listing_counts_the_list_requests_saved(s3_server: str, tmp_path: Path) -> None:
    args = argparse.Namespace(partitions=12, per_commit=4, repeats=2, latency_ms=0.0)
    report = measure(args, tmp_path)
    assert report["same_slices"]
    assert report["partitions"] == 12 + 3
    assert report["storage_list_requests"] >= report["partitions"]
    assert report["metadata_table_list_requests"] < report["storage_list_requests"]
    assert report["list_requests_saved"] == (
        report["storage_list_requests"] - report["metadata_table_list_requests"]
    )
    assert "LIST requests saved" in format_report(report)
