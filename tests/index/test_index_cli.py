"""``tidemark index lookup|stats|compact`` as a user runs them: through an embedded service or a
``tidemark serve index`` process, plain and JSON output, one-line errors with exit 2."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from tidemark.index.record_index import RecordIndex
from tidemark.rpc.process import ServeProcess
from tidemark.storage import open_storage

from .indexkit import Commits
from .servicekit import BUILT_AS_OF, KEYS, SHARDS, create_table, location_of

REPO = Path(__file__).resolve().parents[2]


def tidemark(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tidemark.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def served_index() -> Iterator[ServeProcess]:
    process = ServeProcess("index", args=("--log-level", "error"))
    yield process
    process.close()


def test_lookup_prints_each_key_location_or_absent(indexed_table: str) -> None:
    result = tidemark("index", "lookup", "--table", indexed_table, KEYS[0], "nope", KEYS[220])

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "\t".join([KEYS[0], *location_of(KEYS[0]), BUILT_AS_OF]),
        "nope\tabsent",
        "\t".join([KEYS[220], *location_of(KEYS[220]), BUILT_AS_OF]),
    ]


def test_lookup_json_from_a_keys_file_through_a_served_index(
    indexed_table: str, served_index: ServeProcess, tmp_path: Path
) -> None:
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text("".join(f"{key}\r\n" for key in ["🔑", "absent", KEYS[-1]]))

    result = tidemark(
        "index",
        "lookup",
        "--table",
        indexed_table,
        "--keys-file",
        str(keys_file),
        "--json",
        "--index-service",
        served_index.address,
    )

    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 1
    partition, file_id = location_of("🔑")
    assert json.loads(result.stdout) == {
        "🔑": {"partition": partition, "file_id": file_id, "instant": BUILT_AS_OF},
        "absent": None,
        KEYS[-1]: {
            "partition": location_of(KEYS[-1])[0],
            "file_id": location_of(KEYS[-1])[1],
            "instant": BUILT_AS_OF,
        },
    }


def test_stats_prints_one_json_object(indexed_table: str) -> None:
    result = tidemark("index", "stats", "--table", indexed_table, "--json")

    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert (stats["entries"], stats["shards"]) == (len(KEYS), SHARDS)
    assert stats["bytes"] > 0
    assert "block_cache_hit_rate" not in stats, "an embedded service's cache is not the table's"


def test_stats_report_a_running_services_block_cache(
    indexed_table: str, served_index: ServeProcess
) -> None:
    lookup = tidemark("index", "lookup", "--table", indexed_table, "--index-service",
                      served_index.address, KEYS[0])  # fmt: skip
    result = tidemark("index", "stats", "--table", indexed_table, "--index-service",
                      served_index.address, "--json")  # fmt: skip

    assert lookup.returncode == result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats["block_cache_bytes"] > 0
    assert 0 <= stats["block_cache_hit_rate"] <= 1


def test_stats_count_what_lookups_see_and_compact_folds_the_deltas(indexed_table: str) -> None:
    storage = open_storage(indexed_table)
    index, commits = RecordIndex.open(storage), Commits(storage)
    for changes in [
        {"new-1": ("p", "f"), "new-2": ("p", "f"), KEYS[0]: None, KEYS[1]: ("q", "g")},
        {"new-1": None, "new-3": ("p", "f"), KEYS[2]: None},
    ]:
        instant = commits.start()
        index.stage(instant, as_changes(changes))
        commits.complete(instant)
    pending = commits.start()  # staged, never completed: neither counted nor folded
    index.stage(pending, as_changes({"new-4": ("p", "f"), KEYS[3]: None}))
    expected = len(KEYS) + 2 - 2  # new-2, new-3 in; KEYS[0], KEYS[2] deleted

    before = json.loads(tidemark("index", "stats", "--table", indexed_table, "--json").stdout)
    compacted = tidemark("index", "compact", "--table", indexed_table, "--json")
    after = json.loads(tidemark("index", "stats", "--table", indexed_table, "--json").stdout)

    assert compacted.returncode == 0, compacted.stderr
    done = json.loads(compacted.stdout)
    assert before["entries"] == after["entries"] == expected
    assert done["deltas_folded"] == before["delta_files"] > 0
    assert done["manifests_deleted"] == 2
    assert (after["delta_files"], after["max_shard_deltas"]) == (0, 0)


def test_compact_refuses_bad_input_and_changes_nothing(indexed_table: str) -> None:
    storage = open_storage(indexed_table)
    index, commits = RecordIndex.open(storage), Commits(storage)
    instant = commits.start()
    index.stage(instant, as_changes({"new-1": ("p", "f")}))
    commits.complete(instant)
    files = sorted((f.path, f.size) for f in storage.list(".hoodie/"))

    result = tidemark("index", "compact", "--table", indexed_table, "--min-deltas", "0")

    assert "min_deltas" in one_line_error(result)
    assert sorted((f.path, f.size) for f in storage.list(".hoodie/")) == files


def as_changes(changes: dict[str, tuple[str, str] | None]) -> pa.Table:
    return pa.table(
        {
            "key": pa.array(list(changes), pa.string()),
            "partition": pa.array([c and c[0] for c in changes.values()], pa.string()),
            "file_id": pa.array([c and c[1] for c in changes.values()], pa.string()),
        }
    )


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_errors_are_one_line_and_exit_2(indexed_table: str, tmp_path: Path) -> None:
    plain = create_table(str(tmp_path / "plain")).uri
    blank_line = tmp_path / "blank.txt"
    blank_line.write_text("a\n\nb\n")
    cases = [
        (["lookup", "--table", plain, "a"], "has no record index"),
        (["lookup", "--table", str(tmp_path / "missing"), "a"], "not a Hudi table"),
        (["lookup", "--table", indexed_table, "a", ""], "keys[1]: must not be empty"),
        (["lookup", "--table", indexed_table, "--keys-file", str(blank_line)], "line 2"),
        (["stats", "--table", plain], "has no record index"),
    ]
    for args, fragment in cases:
        line = one_line_error(tidemark("index", *args))
        assert line.startswith("tidemark index: error: ")
        assert fragment in line
    address = f"127.0.0.1:{closed_port()}"
    unreachable = tidemark(
        *("index", "lookup", "--table", indexed_table, "--index-service", address, "a"),
        env={"TIDEMARK_CLIENT_MAX_ATTEMPTS": "1", "TIDEMARK_CLIENT_TIMEOUT_S": "2"},
    )
    assert f"index service at {address} is unreachable" in one_line_error(unreachable)
    assert not (Path(plain) / ".hoodie" / ".tidemark").exists()
