"""Archival as Hudi's, orphan removal, and both retention services killed mid-way (local
storage and the local S3 server), with hudi-rs reading every row afterwards."""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import time
from typing import Any

import fastavro
import pytest

from table.table_testkit import Writer, hudi_rs_rows, people_config, rows, sorted_rows
from tidemark.errors import FailedPreconditionError, InvalidArgumentError
from tidemark.faults import EXIT_AT_ENV, EXIT_CODE
from tidemark.retention import RetentionSettings
from tidemark.storage import open_storage
from tidemark.table.archival import ARCHIVED_POINT, ArchiveSettings, archive
from tidemark.table.archived_timeline import MAGIC, parse_archive_log
from tidemark.table.clean import DELETED_SOME_POINT, clean
from tidemark.table.clean_planner import CleanSettings
from tidemark.table.instant import CLEAN
from tidemark.table.naming import base_file_name, join_path, new_file_id
from tidemark.table.orphans import find_orphans, remove_orphans
from tidemark.table.reader import read_snapshot
from tidemark.table.table import HoodieTable
from tidemark.table.table_versions import archived_log
from tidemark.table.timeline import WRITE_ACTIONS

SMALL = ArchiveSettings(keep_min=3, keep_max=5)


def upserts(people: Writer, count: int) -> list[str]:
    return [people.commit(rows((1, f"v{n}", "eu", float(n)))) for n in range(count)]


def test_archival_keeps_keep_min_writes_and_the_cleaners_instants(
    people: Writer, table_uri: str
) -> None:
    writes = [people.commit(rows((2, "b", "us", 0.0))), *upserts(people, 9)]
    clean(HoodieTable.open(table_uri), CleanSettings(retain_commits=2))
    before = hudi_rs_rows(table_uri)

    result = archive(HoodieTable.open(table_uri), SMALL)

    assert [a.split(".")[0] for a in result.archived] == writes[:7]
    table = HoodieTable.open(table_uri)
    assert [i.timestamp for i in table.timeline.completed(WRITE_ACTIONS)] == writes[7:]
    assert table.timeline.completed(frozenset({CLEAN}))  # the last clean stays active
    assert set(table.archive.completed_writes()) == set(writes[:7])
    assert hudi_rs_rows(table_uri) == before
    assert {r["id"] for r in sorted_rows(read_snapshot(table_uri))} == {1, 2}
    # Hudi's entry per instant file, the commit's write stats in Avro under the block's schema
    assert result.archive_file is not None
    data = open_storage(table_uri).read(result.archive_file)
    entries = parse_archive_log(data, result.archive_file)
    assert len(entries) == 3 * 7
    assert {e.state for e in entries} == {"REQUESTED", "INFLIGHT", "COMPLETED"}
    records = _records(data)
    assert len(records) == len(entries)
    first = next(r for r in records if r["hoodieCommitMetadata"] is not None)
    assert first["actionState"] == "COMPLETED"
    assert first["hoodieCommitMetadata"]["partitionToWriteStats"]["us"][0]["numWrites"] == 1
    # nothing more to archive until keep_max is passed again
    assert archive(HoodieTable.open(table_uri), SMALL).archived == []


def _records(data: bytes) -> list[Any]:
    """The HoodieArchivedMetaEntry records of a log file's first block, decoded with the
    schema its header carries."""
    position = len(MAGIC) + 8 + 8  # size, version, type
    (count,) = struct.unpack_from(">i", data, position)
    assert count == 1
    _, length = struct.unpack_from(">ii", data, position + 4)
    schema = fastavro.parse_schema(json.loads(data[position + 12 : position + 12 + length]))
    position += 12 + length + 8 + 4  # content length, block version
    (records,) = struct.unpack_from(">i", data, position)
    position += 4
    decoded = []
    for _ in range(records):
        (size,) = struct.unpack_from(">i", data, position)
        body = io.BytesIO(data[position + 4 : position + 4 + size])
        decoded.append(fastavro.schemaless_reader(body, schema))
        position += 4 + size
    return decoded


def test_archival_stops_before_pending_instants_and_unfolded_index_deltas(
    people: Writer, table_uri: str
) -> None:
    writes = upserts(people, 3)
    pending = people.begin()
    writes += upserts(people, 5)
    assert archive(HoodieTable.open(table_uri), SMALL).archived == [
        f"{w}.commit" for w in writes[:3]
    ]
    assert pending in {i.timestamp for i in HoodieTable.open(table_uri).timeline.pending()}
    table = HoodieTable.open(table_uri)
    table.timeline.delete_pending(table.timeline.find(pending))
    writes += upserts(people, 1)
    result = archive(HoodieTable.open(table_uri), SMALL, keep_from=lambda: writes[4])
    assert result.archived == [f"{writes[3]}.commit"]


def test_keep_min_must_exceed_the_cleaners_retained_commits(table_uri: str) -> None:
    with pytest.raises(InvalidArgumentError, match="must be greater than the cleaner"):
        RetentionSettings(CleanSettings(retain_commits=20), ArchiveSettings(20, 30))
    with pytest.raises(InvalidArgumentError, match="keep_max"):
        ArchiveSettings(5, 5)
    run = _cli("archive", "--table", table_uri, "--keep-min-commits", "5", "--retain-commits", "9")
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1].startswith("tidemark archive: error: keep_min")


def test_orphans_are_uncommitted_base_files_past_the_grace_period(
    people: Writer, table_uri: str
) -> None:
    committed = people.commit(rows((1, "a", "eu", 0.0)))
    storage = open_storage(table_uri)
    old_failed = join_path("eu", base_file_name(new_file_id(), "0-1-0", "20200101000000000"))
    extra_attempt = join_path("eu", base_file_name(new_file_id(), "0-1-1", committed))
    young = join_path("eu", base_file_name(new_file_id(), "0-1-0", people.begin()))
    copied = join_path("eu", "part-00000-copied-by-hand.snappy.parquet")
    hidden = (join_path("eu", "_SUCCESS"), join_path("eu", ".part-00000.crc"))
    for path in (old_failed, extra_attempt, young, copied, *hidden):
        storage.write(path, b"x" * 10)
    table = HoodieTable.open(table_uri)

    assert [o.path for o in find_orphans(table, grace_s=0)] == sorted(
        [old_failed, extra_attempt, copied]
    )
    assert [o.path for o in find_orphans(table)] == [old_failed]  # 24 h grace; copied just now
    day_old = time.time() - 25 * 3600
    os.utime(table_uri + "/" + copied, (day_old, day_old))
    assert [o.path for o in find_orphans(table)] == sorted([old_failed, copied])

    dry = _cli("clean", "--table", table_uri, "--orphans", "--dry-run", "--grace-hours", "0")
    assert dry.returncode == 0, dry.stderr
    assert f"orphan {old_failed} 10 bytes" in dry.stdout
    assert storage.exists(old_failed)
    remove_orphans(table, find_orphans(table, grace_s=0))
    assert not any(storage.exists(path) for path in (old_failed, extra_attempt, copied))
    assert storage.exists(young) and all(storage.exists(path) for path in hidden)
    assert [r["name"] for r in hudi_rs_rows(table_uri)] == ["a"]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tidemark.cli", *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_clean_killed_after_some_deletes_is_finished_by_the_next(any_table_uri: str) -> None:
    people = Writer(HoodieTable.create(any_table_uri, people_config()))
    people.commit(rows((1, "a", "eu", 0.0), (2, "b", "us", 0.0)))
    for n in range(3):
        people.commit(rows((1, f"e{n}", "eu", 1.0), (2, f"u{n}", "us", 1.0)))
    expected = hudi_rs_rows(any_table_uri)

    killed = _cli(
        "clean", "--table", any_table_uri, "--retain-commits", "1",
        env={EXIT_AT_ENV: DELETED_SOME_POINT},
    )  # fmt: skip
    assert killed.returncode == EXIT_CODE, killed.stderr[-2000:]
    table = HoodieTable.open(any_table_uri)
    (pending,) = table.timeline.pending()
    assert pending.action == CLEAN
    assert hudi_rs_rows(any_table_uri) == expected
    assert len(table.view().committed_base_files()) == 6  # eu cleaned, us not yet
    retained = table.timeline.completed(WRITE_ACTIONS)[-1].timestamp
    with pytest.raises(FailedPreconditionError, match=f"still readable is {retained}"):
        table.view(as_of=table.timeline.completed(WRITE_ACTIONS)[-2].timestamp)

    result = clean(HoodieTable.open(any_table_uri), CleanSettings(retain_commits=1))

    assert result.instants == [pending.timestamp]
    table = HoodieTable.open(any_table_uri)
    assert not table.timeline.pending()
    assert len(table.view().committed_base_files()) == 4  # two slices per file group
    assert hudi_rs_rows(any_table_uri) == expected


def test_an_archival_killed_before_removing_active_files_is_rolled_forward(
    any_table_uri: str,
) -> None:
    people = Writer(HoodieTable.create(any_table_uri, people_config()))
    writes = upserts(people, 7)
    clean(HoodieTable.open(any_table_uri), CleanSettings(retain_commits=2))
    expected = hudi_rs_rows(any_table_uri)

    killed = _cli(
        "archive", "--table", any_table_uri, "--keep-min-commits", "3",
        "--keep-max-commits", "5", "--retain-commits", "2",
        env={EXIT_AT_ENV: ARCHIVED_POINT},
    )  # fmt: skip
    assert killed.returncode == EXIT_CODE, killed.stderr[-2000:]
    table = HoodieTable.open(any_table_uri)
    assert set(table.archive.completed_writes()) == set(writes[:4])
    assert len(table.timeline.completed(WRITE_ACTIONS)) == 7  # still active too
    assert hudi_rs_rows(any_table_uri) == expected

    result = archive(HoodieTable.open(any_table_uri), SMALL)

    assert result.rolled_forward == [f"{w}.commit" for w in writes[:4]]
    assert result.archived == []
    table = HoodieTable.open(any_table_uri)
    active = {i.timestamp for i in table.timeline.instants()}
    archived = [
        i.timestamp for i in archived_log(table.archive).instants() if i.state == "COMPLETED"
    ]
    assert len(archived) == len(set(archived)) == 4
    assert not active & set(archived)
    assert active | set(archived) >= set(writes)
    assert hudi_rs_rows(any_table_uri) == expected
