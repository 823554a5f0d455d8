"""`python -m benchmarks small-files` runs end to end (tiny sizes; the numbers are the bench's)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import pytest

from benchmarks.__main__ import main
from benchmarks.small_files import readme_rows

BENCH = [sys.executable, "-m", "benchmarks", "small-files"]


@pytest.mark.spark
def test_bench_small_files_compares_direct_and_service_markers() -> None:
    """In a child process: its SparkSession must not become the test session's. Its
    marker service gets an hour's lease, so no renewal adds a write to its count."""
    argv = [*BENCH, "--files", "40", "--storage", "local", "--tasks", "2", "--repeats", "2"]
    argv += ["--master", "local[3]", "--json"]
    env = {**os.environ, "TIDEMARK_MARKER_LEASE_S": "3600"}
    result = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]

    out = result.stdout.strip().splitlines()
    report = json.loads(out[-1])
    assert "direct/service" in out[1]
    assert (report["storage"], report["master"], report["repeats"]) == ("local", "local[3]", 2)
    assert report["files"] >= 40
    assert report["service_files"] >= 40
    assert report["direct_rows"] == report["service_rows"] == report["rows"]
    # counted by the service itself, apart from the write's own file count: the lease,
    # MARKERS.type and at least one MARKERS file, and at most one MARKERS write per marker
    assert 3 <= report["service_marker_writes"] <= report["service_files"] + 2
    for key in ("direct_s", "service_s", "speedup", "latency_ms"):
        assert key in report
    # markers counted by the write result; files counted by listing the committed table
    assert report["direct_marker_objects"] == report["files"]
    assert report["service_marker_writes"] > 0
    assert len(report["direct_runs_s"]) == len(report["service_runs_s"]) == 2
    assert report["direct_s"] == statistics.median(report["direct_runs_s"])
    assert len(report["speedup_runs"]) == 2
    assert report["references"][0]["figure"].startswith("31%")
    [row] = readme_rows(report)
    assert "--repeats 2" in row[0] and row[3].startswith(f"{report['speedup']:.2f}x (rounds ")


def test_bench_small_files_rejects_no_files(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["small-files", "--files", "0", "--storage", "local"])
    assert exit_info.value.code == 2
    assert "--files: must be > 0, got 0" in capsys.readouterr().err
