"""`tidemark demo` (the README's main command) end to end, in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
from hudi import HudiTableBuilder

DEMO = [sys.executable, "-m", "tidemark.cli", "demo"]


def test_demo_writes_upserts_and_reads_back(tmp_path: Path) -> None:
    table = tmp_path / "sessions"
    result = subprocess.run(
        [*DEMO, "--rows", "3000", "--table", str(table), "--master", "local[2]", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["rows"] == 3000
    assert report["rows_read"] == 3000
    assert report["upserted_rows"] == 30
    assert report["marker_objects_written"] > 0
    assert report["data_files"] >= 7
    assert not list(table.glob(".hoodie/.temp/*")), "marker dirs must be gone after commit"
    snapshot = pa.Table.from_batches(HudiTableBuilder.from_base_uri(str(table)).build().read())
    assert snapshot.num_rows == 3000
    changed = snapshot.filter(pa.compute.equal(snapshot["session_id"], "s-000000000100"))
    assert changed["duration_ms"].to_pylist() == [100 * 104_729 % 600_000 + 1000]


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
