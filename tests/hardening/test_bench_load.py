"""``python -m benchmarks load`` for 30 seconds at small counts: the three ``tidemark serve``
processes under load from spawned clients answer every call exactly (no errors, no wrong
answers) and their memory is sampled throughout and stays bounded."""

from __future__ import annotations

import json

import pytest

from benchmarks.__main__ import main
from benchmarks.load import KINDS

DURATION_S = 30
RSS_BOUND_MIB = 1024
"""Far above what these loads take (tens to a few hundred MiB), far below a leak that
grew with every call of a 30-second run."""


def test_thirty_seconds_of_load_without_errors_in_bounded_memory(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [
        "load",
        "--duration-s",
        str(DURATION_S),
        "--marker-writers",
        "24",
        "--markers-per-instant",
        "500",
        "--lookup-streams",
        "4",
        "--lookup-keys",
        "10000",
        "--index-entries",
        "100000",
        "--planner-tables",
        "5",
        "--files-per-table",
        "6",
        "--json",
    ]
    code = main(argv)
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for kind in KINDS:
        load = report[kind]
        assert load["errors"] == 0, load["error_samples"]
        assert load["calls"] > 0 and load["items_per_s"] > 0
        assert 0 < load["p50_ms"] <= load["p99_ms"]
        samples = load["rss_mib"]
        assert len(samples) >= DURATION_S // 2  # sampled every second, throughout
        assert samples[-1][0] >= DURATION_S - 2
        assert all(0 < mib < RSS_BOUND_MIB for _, mib in samples)
        assert load["rss_max_mib"] == max(mib for _, mib in samples)
        assert isinstance(load["rss_flat"], bool)
    assert code == 0
    assert report["lookups"]["items"] == report["lookups"]["calls"] * 10_000
    assert report["markers"]["checked"] > 0  # marker dirs listed back whole
    assert report["planner"]["checked"] > 0  # the triggers planned too
