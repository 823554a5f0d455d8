"""docs/benchmarks.md's table is what scripts/bench_table.py renders from the recorded
results in docs/benchmarks/, so it cannot drift from what was measured."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "bench_table.py"
PAGE = ROOT / "docs" / "benchmarks.md"
RECORDINGS = ROOT / "docs" / "benchmarks"


def bench_table(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120
    )


def test_the_table_matches_the_recorded_results() -> None:
    result = bench_table("--check")
    assert result.returncode == 0, result.stderr


def test_check_fails_when_a_recorded_result_changes(tmp_path: Path) -> None:
    recordings = tmp_path / "benchmarks"
    shutil.copytree(RECORDINGS, recordings)
    recorded = json.loads((recordings / "index.json").read_text())
    recorded["warm_ms"] = recorded["warm_ms"] * 2 + 1
    (recordings / "index.json").write_text(json.dumps(recorded))

    result = bench_table("--check", "--recordings", str(recordings))

    assert result.returncode == 1
    assert "is stale" in result.stderr


def test_check_fails_when_the_table_is_edited(tmp_path: Path) -> None:
    page = tmp_path / "benchmarks.md"
    text = PAGE.read_text()
    first_row = next(line for line in text.splitlines() if line.startswith("| `bench "))
    page.write_text(text.replace(first_row, first_row.replace(" |", " (edited) |", 1)))

    assert bench_table("--check", "--page", str(page)).returncode == 1
    assert bench_table("--page", str(page)).returncode == 0
    assert page.read_text() == text


def test_references_are_rendered_apart_from_the_rows() -> None:
    block = PAGE.read_text().split("<!-- benchmarks:begin", 1)[1]
    table, references = block.split("References (quoted, not measured)", 1)
    measured_cells = {
        cell.strip()
        for line in table.splitlines()
        if line.startswith("| ")
        for cell in line.split("|")
    }
    for line in references.split("<!-- benchmarks:end -->")[0].splitlines():
        if line.startswith("| ") and not line.startswith("| reference "):
            figure = line.split(" | ")[1]
            assert figure not in measured_cells, figure  # never a measured value or ratio
    assert '"hudi_hfile_ms"' not in (RECORDINGS / "index.json").read_text()
