"""`tidemark demo` (the README's main command) end to end, in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from hudi import HudiTableBuilder
from spark.sparkkit import hudi_rs_table

DEMO = [sys.executable, "-m", "tidemark.cli", "demo"]


@pytest.mark.spark
def test_demo_shows_all_three_services_on_a_table_hudi_reads(tmp_path: Path) -> None:
    table = tmp_path / "sessions"
    result = subprocess.run(
        [*DEMO, "--rows", "4000", "--table", str(table), "--master", "local[2]", "--json"],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},  # a signal prints every thread's stack
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert sorted(report["services"]) == ["index", "marker", "planner"]
    markers, index, clustering = report["markers"], report["index"], report["clustering"]
    assert markers["data_files"] == markers["direct_marker_objects"] >= 7
    assert markers["service_marker_file_writes"] > 0
    assert index["upsert_tagging"] == index["delete_tagging"] == "record"
    assert index["upserted_rows"] == 40
    assert index["tagged_keys"] == 40
    assert index["keys_looked_up"] >= 40 + index["deleted_rows"] > 40
    before, after = clustering["before"], clustering["after"]
    assert before["rows_matched"] == after["rows_matched"] > 0
    assert after["files_read"] == 1 < before["files_read"]
    assert after["rows_read"] < before["rows_read"]
    point = report["point_query"]
    assert point["rows"] == 1 and point["files_opened"] == 1 < point["files_in_table"]
    assert not list(table.glob(".hoodie/.temp/*")), "marker dirs must be gone after commit"
    snapshot = pa.Table.from_batches(HudiTableBuilder.from_base_uri(str(table)).build().read())
    assert snapshot.num_rows == report["rows_in_table"] == 4000 - index["deleted_rows"]
    changed = snapshot.filter(pa.compute.equal(snapshot["event_id"], "e-000000000100"))
    assert changed["duration_ms"].to_pylist() == [100 * 104_729 % 600_000 + 1000]
    assert len(pa.compute.unique(snapshot["event_id"])) == snapshot.num_rows


def test_demo_refuses_to_wipe_a_folder_it_did_not_create(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data.txt").write_text("keep me")
    result = subprocess.run(
        [*DEMO, "--rows", "10", "--table", str(precious)], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "not created by `tidemark demo`" in result.stderr
    assert (precious / "data.txt").read_text() == "keep me"


def test_demo_rejects_bad_rows() -> None:
    result = subprocess.run([*DEMO, "--rows", "0"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "rows" in result.stderr


@pytest.mark.spark
def test_demo_runs_against_an_s3_endpoint(s3_bucket: str) -> None:
    """``--storage s3://bucket/prefix``: the table, markers and index on the local S3 server
    (moto), the services and Spark reaching it through the standard AWS settings."""
    result = subprocess.run(
        [*DEMO, "--rows", "1500", "--storage", s3_bucket, "--master", "local[2]", "--json"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["table"] == f"{s3_bucket}/sessions"
    snapshot = hudi_rs_table(report["table"])
    assert snapshot is not None
    assert snapshot.num_rows == report["rows_in_table"] == 1500 - report["index"]["deleted_rows"]
    assert report["clustering"]["after"]["files_read"] == 1
