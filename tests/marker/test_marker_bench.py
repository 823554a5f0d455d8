"""`tidemark bench markers` runs end to end (tiny sizes; the numbers belong to the benchmark)."""

from __future__ import annotations

import json

import pytest

from tidemark.cli import main


def test_bench_markers_reports_both_mechanisms(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "markers", "--markers", "300", "--writers", "8", "--storage", "local"]
    assert main([*argv, "--echo-calls", "100", "--batch-size", "50", "--json"]) == 0

    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["markers"] == 300
    assert report["direct_objects"] == 300
    assert report["service_markers_files"] <= 20
    assert report["service_objects"] == report["service_markers_files"] + 2
    for key in (
        "direct_create_s",
        "service_create_s",
        "service_list_s",
        "service_delete_s",
        "service_p99_ms",
        "service_markers_per_s",
        "echo_calls_per_s",
    ):
        assert report[key] > 0


def test_bench_markers_rejects_bad_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "markers", "--writers", "0", "--storage", "local"])
    assert exit_info.value.code == 2
    assert "--writers: must be > 0, got 0" in capsys.readouterr().err
