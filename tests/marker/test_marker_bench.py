"""`python -m benchmarks markers` runs end to end (tiny sizes; the numbers are the bench's)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest

from benchmarks.__main__ import main
from benchmarks.markers import process_cpu_s, readme_rows, storage_server

TINY = ["--markers", "300", "--writers", "8", "--echo-calls", "100", "--batch-size", "50"]


def bench_output(
    capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[list[str], dict[str, Any]]:
    """The table's lines and the JSON line of one ``bench markers --json`` run."""
    assert main(["markers", *TINY, *args, "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    return lines[:-1], json.loads(lines[-1])


def test_bench_markers_reports_both_mechanisms(capsys: pytest.CaptureFixture[str]) -> None:
    table, report = bench_output(capsys, "--storage", "local")

    assert "direct/service" in table[1]
    assert report["markers"] == 300
    assert report["storage_server"] == "local disk"
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
    # each writer waits for its create's flush: at most one create per writer per tick
    assert report["batch_interval_ms"] == 50
    assert report["batch_bound_calls_per_s"] == pytest.approx(8 * 1000 / 50)
    assert report["service_markers_per_s"] <= 1.1 * report["batch_bound_calls_per_s"]
    assert report["service_vs_ceiling"] >= report["service_vs_echo"]
    assert any(line.startswith("batching bound: 8 writers") for line in table)
    # CPU is counted in clock ticks: a tiny run may round to none
    assert report["service_cpu_ms_per_create"] >= 0 and report["echo_cpu_ms_per_call"] >= 0
    assert any(line.startswith("server CPU: ") for line in table)
    # local storage counts one request per listing, not per page: no S3 model from it
    assert report["model_latency_ms"] is None
    assert report["direct_list_model_s"] is None
    rows = readme_rows(report)
    assert not any("modelled" in row[0] for row in rows)
    assert all(len(row) == 4 and all(isinstance(cell, str) for cell in row) for row in rows)
    wall_rows = [row for row in rows if "wall time" in row[0]]
    assert wall_rows and all("local disk" in row[0] for row in wall_rows)


def test_bench_markers_on_s3_counts_requests_and_models_s3(
    s3_server: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Per-operation request counts of every phase, the S3 model built from them, and the
    quoted figures kept apart. A lease of an hour: no renewal lands among the counts."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)  # the bench re-points it at its proxy
    monkeypatch.setenv("TIDEMARK_MARKER_LEASE_S", "3600")
    _, report = bench_output(capsys, "--storage", "s3", "--latency-ms", "5")

    assert report["storage_server"] == s3_server
    assert report["direct_create_requests"] == {"conditional_put": 300}
    # one LIST page (< 1,000 keys); deletion lists the marker dir and the (empty) lease dir
    assert report["direct_list_requests"] == {"list": 1}
    assert report["direct_delete_requests"] == {"list": 2, "delete": 1}
    assert report["service_list_requests"] == {"list": 1}
    assert report["service_delete_requests"] == {"list": 2, "delete": 2}
    # creating: the lease (LIST, conditional PUT), the dir's load (LIST), MARKERS.type,
    # then exactly one PUT of one MARKERS file per flush and nothing else (an attempt the
    # S3 server failed under load is retried: counted, and counted apart)
    flushes = report["service_flushes"]
    retries = report["service_create_retries"]
    assert flushes >= report["service_markers_files"] > 0
    assert report["service_create_requests"] == {
        "conditional_put": 1 + retries.get("conditional_put", 0),
        # the marker dir, the lease's generations, and again once claimed (StorageLease)
        "list": 3 + retries.get("list", 0),
        "put": flushes + 1 + retries.get("put", 0),
    }
    puts = report["service_create_requests"]["put"]
    assert report["service_requests_per_flush"]["put"] == pytest.approx(puts / flushes)
    assert report["model_latency_ms"] == 5
    assert report["direct_list_model_s"] == pytest.approx(0.005)
    assert report["direct_delete_model_s"] == pytest.approx(0.015)
    assert report["service_delete_model_s"] == pytest.approx(0.020)
    assert report["references"]
    assert all(set(reference) == {"what", "figure", "source"} for reference in report["references"])
    quoted = {reference["figure"] for reference in report["references"]}
    rows = readme_rows(report)
    assert any("modelled" in row[0] and "x 5 ms" in row[0] for row in rows)
    assert not any(cell in quoted for row in rows for cell in row[1:])


def test_storage_server_names_the_emulator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    assert storage_server("s3") == "moto"
    monkeypatch.setenv("AWS_ENDPOINT_URL", "https://s3.eu-west-1.amazonaws.com")
    assert storage_server("s3") == "https://s3.eu-west-1.amazonaws.com"
    assert storage_server("local") == "local disk"


def test_bench_markers_rejects_bad_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["markers", "--writers", "0", "--storage", "local"])
    assert exit_info.value.code == 2
    assert "--writers: must be > 0, got 0" in capsys.readouterr().err


def test_process_cpu_seconds_are_the_process_own_user_and_system_time() -> None:
    """The field the bench reads per server process is its own user + system time (not
    its children's, not wall time): for this process it matches ``process_time``."""
    began = time.process_time()
    while time.process_time() - began < 0.3:
        sum(range(10_000))
    assert abs(process_cpu_s(os.getpid()) - time.process_time()) < 0.05
