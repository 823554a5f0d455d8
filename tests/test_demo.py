"""`tidemark demo` (the README's main command) end to end, in a subprocess: on local disk
as the README runs it (table version 6, the default) and on S3 at version 9 (each run
costs a minute or more of Spark, so the two runs share the versions rather than run once
per version; version 8 goes through the same stages in tests/spark/test_v1x_clustering.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from hudi import HudiTableBuilder
from spark.sparkkit import hudi_rs_table

from tidemark.commands.demo import DemoReport, print_report
from tidemark.table import HoodieTable
from tidemark.table.properties.config import read_properties

DEMO = [sys.executable, "-m", "tidemark.cli", "demo"]
LOCAL_JSON = ["--master", "local[2]", "--json"]


@pytest.mark.spark
def test_demo_shows_all_three_services_on_a_table_hudi_reads(tmp_path: Path) -> None:
    table = tmp_path / "sessions"
    result = subprocess.run(
        [*DEMO, "--rows", "4000", "--table", str(table), *LOCAL_JSON],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},  # a signal prints every thread's stack
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # a plain line per stage as it ends, not a spinner shown only at exit
    assert re.search(r"build record index: \d+\.\d s\n", result.stderr), result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["table_version"] == 6
    assert read_properties(HoodieTable.open(str(table)).storage)["hoodie.table.version"] == "6"
    assert sorted(report["services"]) == ["index", "marker", "planner"]
    markers, index, clustering = report["markers"], report["index"], report["clustering"]
    assert markers["data_files"] == markers["direct_marker_objects"] >= 7
    assert markers["service_marker_file_writes"] > 0
    assert index["upsert_tagging"] == index["delete_tagging"] == "record"
    assert index["upserted_rows"] == 40
    assert index["tagged_keys"] == 40
    erasure = report["erasure"]
    assert erasure["users_requested"] == 5
    assert erasure["rows_deleted"] > 0 < erasure["users_with_events"] <= 5
    # the writes' own lookups: the upsert's and the delete's keys, not the comparison's
    assert index["write_keys_looked_up"] == 40 + erasure["rows_deleted"]
    assert index["comparison_keys_looked_up"] == 2 * 40
    before, after = clustering["before"], clustering["after"]
    assert before["rows_matched"] == after["rows_matched"] > 0
    assert after["files_read"] == 1 < before["files_read"]
    # rows of the row groups Spark's pushdown kept: at least those matched, on both sides
    # (which side reads fewer depends on how the generated sessions fall into row groups)
    assert (
        after["rows_read"] >= after["rows_matched"]
        and before["rows_read"] >= before["rows_matched"]
    )
    point = report["point_query"]
    with_index, without = point["with_index"], point["without_index"]
    assert point["rows_matched"] == with_index["rows_matched"] == without["rows_matched"] == 1
    assert with_index["files_read"] == 1 < point["files_in_table"]
    assert with_index["rows_read"] <= without["rows_read"]
    assert list(report["stage_seconds"])[:3] == [
        "start spark",
        "start services",
        "bulk_insert: prepare",
    ]
    assert report["total_seconds"] >= sum(report["stage_seconds"].values())
    assert not list(table.glob(".hoodie/.temp/*")), "marker dirs must be gone after commit"
    snapshot = pa.Table.from_batches(HudiTableBuilder.from_base_uri(str(table)).build().read())
    assert snapshot.num_rows == report["rows_in_table"] == 4000 - erasure["rows_deleted"]
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
        [*DEMO, "--rows", "1500", "--storage", s3_bucket, "--table-version", "9", *LOCAL_JSON],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["table"] == f"{s3_bucket}/sessions"
    assert report["table_version"] == 9
    assert_layout_two(report["table"], 9)
    snapshot = hudi_rs_table(report["table"])
    assert snapshot is not None
    deleted = report["erasure"]["rows_deleted"]
    assert snapshot.num_rows == report["rows_in_table"] == 1500 - deleted
    assert report["clustering"]["after"]["files_read"] == 1


def assert_layout_two(uri: str, version: int) -> None:
    """The table is at ``version`` with every instant completed on layout 2's timeline."""
    table = HoodieTable.open(uri)
    props = read_properties(table.storage)
    assert (props["hoodie.table.version"], props["hoodie.timeline.layout.version"]) == (
        str(version),
        "2",
    )
    completed = table.timeline.completed()
    assert [i.action for i in completed] == [
        "commit",
        "commit",
        "commit",
        "replacecommit",
    ]  # bulk_insert, upsert, delete, clustering
    assert all(
        i.path == f".hoodie/timeline/{i.timestamp}_{i.completion_time}.{i.action}"
        for i in completed
    )
    assert table.timeline.pending() == []


def _report(marker_requests: int, direct_requests: int) -> DemoReport:
    scan = {"files_read": 1, "rows_read": 40, "rows_matched": 1, "seconds": 0.01}
    return DemoReport(
        table="/t/sessions",
        table_version=9,
        services={"marker": "127.0.0.1:1", "index": "127.0.0.1:2", "planner": "127.0.0.1:3"},
        rows=4000,
        rows_in_table=3980,
        markers={
            "data_files": 1,
            "service_marker_file_writes": 1,
            "service_storage_requests": marker_requests,
            "direct_marker_objects": 1,
            "direct_storage_requests": direct_requests,
        },
        index={
            "write_keys_looked_up": 60,
            "comparison_keys_looked_up": 80,
            "upserted_rows": 40,
            "upsert_tagging": "record",
            "delete_tagging": "record",
            "tagged_keys": 40,
            "tagging_index_s": 0.5,
            "tagging_join_s": 2.0,
            "base_files_joined": 1,
        },
        erasure={"users_requested": 5, "users_with_events": 1, "rows_deleted": 20},
        clustering={
            "plan": "20261127000000000",
            "session_id": "s-1",
            "before": {**scan, "files_read": 8, "rows_read": 800, "rows_matched": 20},
            "after": {**scan, "rows_read": 40, "rows_matched": 20},
        },
        point_query={
            "key": "e-1",
            "rows_matched": 1,
            "files_in_table": 7,
            "with_index": scan,
            "without_index": {**scan, "files_read": 7, "rows_read": 700},
        },
        stage_seconds={"start spark": 2.0, "bulk_insert: write files": 3.0},
        total_seconds=6.5,
    )


def test_the_report_is_one_table_with_labelled_figures_and_one_list_of_stages(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_report(_report(marker_requests=3, direct_requests=3))
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "(a Hudi COW v9 table: Hudi 1.1 and later and hudi-rs read it)" in lines[0]
    assert lines[lines.index("") + 1].split() == ["service", "figure", "with", "without", "ratio"]
    assert "erasure of 5 users, 1 of whom had events: 20 rows deleted" in out
    assert "looked up 60 keys in the index service" in out and "80 more" in out
    assert "the bulk insert's 1 file " in out and "1 files" not in out
    assert "rows read (20 rows matched)" in out and "rows read (1 row matched)" in out
    assert "marker: no saving" in out and "many files per write" in out and "on S3" in out
    assert "index: no saving" not in out  # 4.0x: a gain needs no explanation
    stages = lines[lines.index("stage times, in run order") + 1 :]
    assert [line.split()[0] for line in stages] == ["start", "bulk_insert:", "total"]
    assert stages[-1].split()[-2:] == ["6.50", "s"]


def test_a_saving_is_not_explained_away(capsys: pytest.CaptureFixture[str]) -> None:
    print_report(_report(marker_requests=3, direct_requests=1200))
    assert "no saving" not in capsys.readouterr().out
