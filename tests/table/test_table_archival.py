"""Archival as Hudi's (table version 6's archived log, 8 and 9's LSM history), orphan
removal, retention after every write on each version and on tables Hudi 1.x wrote, and
both retention services killed mid-way (local storage and the local S3 server), with
hudi-rs reading every row afterwards."""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from table.table_testkit import (
    Writer,
    archived_completed,
    hudi_rs_rows,
    people_config,
    rows,
    sorted_rows,
)
from table.v1x_testkit import unzip_fixture
from tidemark.cli import main
from tidemark.errors import FailedPreconditionError, InvalidArgumentError
from tidemark.faults import EXIT_AT_ENV, EXIT_CODE
from tidemark.retention import RetentionSettings, run_retention
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.files.file_names import base_file_name, join_path, new_file_id
from tidemark.table.files.reader import read_snapshot
from tidemark.table.files.view import earliest_readable
from tidemark.table.maintenance.archival import ARCHIVED_POINT, ArchiveSettings, archive
from tidemark.table.maintenance.clean import DELETED_SOME_POINT, clean
from tidemark.table.maintenance.clean_plan import CleanSettings
from tidemark.table.maintenance.orphans import find_orphans, remove_orphans
from tidemark.table.metadata.actions import CLEAN, REPLACE_COMMIT, WRITE_ACTIONS
from tidemark.table.metadata.clean import CleanPlan
from tidemark.table.metadata.commit_avro import commit_metadata_from_avro
from tidemark.table.records.keys import META_COLUMNS
from tidemark.table.timeline.archived import (
    MAGIC,
    archive_cache,
    parse_archive_log,
)
from tidemark.table.timeline.archived_writes import ArchivedWrites
from tidemark.table.timeline.layout1 import metadata_cache
from tidemark.table.timeline.lsm import (
    AVRO_SCHEMA,
    HistoryInstant,
    LsmTimeline,
    append_history,
    history_cache,
)
from tidemark.testing.tables import data_columns, rewrite_file_groups

SMALL = ArchiveSettings(keep_min=3, keep_max=5)
SMALL_RETENTION = RetentionSettings(CleanSettings(retain_commits=2), SMALL)
VERSIONS = [6, 8, 9]


@pytest.fixture(params=VERSIONS)
def versioned(request: pytest.FixtureRequest, table_uri: str) -> Writer:
    """The people table at each table version Tidemark writes."""
    return Writer(HoodieTable.create(table_uri, people_config(table_version=request.param)))


def upserts(people: Writer, count: int) -> list[str]:
    return [people.commit(rows((1, f"v{n}", "eu", float(n)))) for n in range(count)]


def archived_instants(table: HoodieTable) -> list[str]:
    """Requested times of the completed instants the table's archive lists (with repeats)."""
    return [timestamp for timestamp, _ in archived_completed(table)]


def test_archival_keeps_keep_min_writes_and_the_cleaners_instants(
    versioned: Writer, table_uri: str
) -> None:
    writes = [versioned.commit(rows((2, "b", "us", 0.0))), *upserts(versioned, 9)]
    clean(HoodieTable.open(table_uri), CleanSettings(retain_commits=2))
    before = hudi_rs_rows(table_uri)

    result = archive(HoodieTable.open(table_uri), SMALL)

    assert [a.split(".")[0] for a in result.archived] == writes[:7]
    table = HoodieTable.open(table_uri)
    assert [i.timestamp for i in table.timeline.completed(WRITE_ACTIONS)] == writes[7:]
    assert table.timeline.completed(frozenset({CLEAN}))  # the last clean stays active
    assert set(table.archive.completed_writes()) == set(writes[:7])
    assert hudi_rs_rows(table_uri) == before  # the us row's write is archived
    assert {r["id"] for r in sorted_rows(read_snapshot(HoodieTable.open(table_uri)))} == {1, 2}
    assert archive(HoodieTable.open(table_uri), SMALL).archived == []  # until keep_max again
    assert result.archive_file is not None
    if table.config.table_version != 6:
        _check_history_file(table, result.archive_file, writes[:7])
        return
    # Hudi's entry per instant file, the commit's write stats in Avro under the block's schema
    data = open_storage(table_uri).read(result.archive_file)
    entries = parse_archive_log(data, result.archive_file)
    assert len(entries) == 3 * 7
    assert {e.state for e in entries} == {"REQUESTED", "INFLIGHT", "COMPLETED"}
    records = _records(data)
    assert len(records) == len(entries)
    first = next(r for r in records if r["hoodieCommitMetadata"] is not None)
    assert first["actionState"] == "COMPLETED"
    assert first["hoodieCommitMetadata"]["partitionToWriteStats"]["us"][0]["numWrites"] == 1


def _check_history_file(table: HoodieTable, path: str, writes: list[str]) -> None:
    """Hudi 1.x's layout: ``<first>_<last>_0.parquet`` of HoodieLSMTimelineInstant rows
    (completion times, the completed file as metadata), the manifest naming it and
    ``_version_`` pointing at that manifest."""
    assert path == f"{table.archive.folder}/{writes[0]}_{writes[-1]}_0.parquet"
    parquet = pq.read_table(table.storage.open_input(path))
    assert parquet.schema.names == [f["name"] for f in AVRO_SCHEMA["fields"]]
    assert b"parquet.avro.schema" in (parquet.schema.metadata or {})
    records = parquet.to_pylist()
    assert [r["instantTime"] for r in records] == writes
    assert all(r["completionTime"] > r["instantTime"] and r["version"] == 1 for r in records)
    metadata = commit_metadata_from_avro(records[0]["metadata"])
    assert metadata.partition_to_write_stats["us"][0].num_writes == 1
    assert all(r["action"] == "commit" and r["plan"] is None for r in records)
    folder = table.archive.folder
    assert table.storage.read(f"{folder}/_version_") == b"1"
    manifest = json.loads(table.storage.read(f"{folder}/manifest_1"))
    assert manifest == {
        "files": [{"fileName": path.rpartition("/")[2], "fileLen": table.storage.size(path)}]
    }


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
    versioned: Writer, table_uri: str
) -> None:
    writes = upserts(versioned, 3)
    pending = versioned.begin()
    writes += upserts(versioned, 5)
    assert archive(HoodieTable.open(table_uri), SMALL).archived == [
        f"{w}.commit" for w in writes[:3]
    ]
    assert pending in {i.timestamp for i in HoodieTable.open(table_uri).timeline.pending()}
    table = HoodieTable.open(table_uri)
    table.timeline.delete_pending(table.timeline.find(pending))
    writes += upserts(versioned, 1)
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


@pytest.mark.parametrize("version", VERSIONS)
def test_a_clean_killed_after_some_deletes_is_finished_by_the_next(
    any_table_uri: str, version: int
) -> None:
    people = Writer(HoodieTable.create(any_table_uri, people_config(table_version=version)))
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
    *_, older, floor, _ = table.timeline.completed(WRITE_ACTIONS)
    assert table.view(as_of=floor.completed_at).latest_base_files()  # its slices are kept
    with pytest.raises(FailedPreconditionError, match=f"still readable is {floor.completed_at}"):
        table.view(as_of=older.completed_at)

    result = clean(HoodieTable.open(any_table_uri), CleanSettings(retain_commits=1))

    assert result.instants == [pending.timestamp]
    table = HoodieTable.open(any_table_uri)
    assert not table.timeline.pending()
    assert len(table.view().committed_base_files()) == 4  # two slices per file group
    assert hudi_rs_rows(any_table_uri) == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_an_archival_killed_before_removing_active_files_is_rolled_forward(
    any_table_uri: str, version: int
) -> None:
    people = Writer(HoodieTable.create(any_table_uri, people_config(table_version=version)))
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
    archived = archived_instants(table)
    assert len(archived) == len(set(archived)) == 4
    assert not active & set(archived)
    assert active | set(archived) >= set(writes)
    assert hudi_rs_rows(any_table_uri) == expected


def test_retention_after_every_write_bounds_the_timeline_and_keeps_reads_exact(
    versioned: Writer, table_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Clean and archive after each write as a write's auto-clean does: the us row's
    file group is last written early and its write archived; every snapshot inside the
    retention reads as the model had it, older ones are refused in one line."""
    model: dict[int, dict[str, Any]] = {}
    snapshots: dict[str, list[dict[str, Any]]] = {}
    for n in range(12):
        batch = [(1, f"e{n}", "eu", float(n))] + ([(2, f"u{n}", "us", 0.0)] if n % 4 == 0 else [])
        instant = versioned.commit(rows(*batch))
        model.update({r["id"]: r for r in rows(*batch).to_pylist()})
        snapshots[instant] = sorted(model.values(), key=lambda r: r["id"])
        run_retention(HoodieTable.open(table_uri), SMALL_RETENTION)

    assert [_data(r) for r in hudi_rs_rows(table_uri)] == snapshots[instant]
    assert [_data(r) for r in sorted_rows(read_snapshot(HoodieTable.open(table_uri)))] == snapshots[
        instant
    ]
    table = HoodieTable.open(table_uri)
    active = table.timeline.completed(WRITE_ACTIONS)
    assert len(active) <= SMALL.keep_max
    assert len(table.timeline.instants()) <= 2 * SMALL.keep_max  # writes and their cleans
    archived = archived_instants(table)
    assert len(archived) == len(set(archived))
    assert set(table.archive.completed_writes()) | {i.timestamp for i in active} == set(snapshots)
    assert not set(archived) & {i.timestamp for i in table.timeline.instants()}
    floor = earliest_readable(table.timeline)
    assert floor is not None
    readable = [i for i in active if i.completed_at >= floor]
    # the retained commits and the write before them, whose slices the cleaner keeps
    assert len(readable) == SMALL_RETENTION.clean.retain_commits + 1
    for write in readable:
        as_of = sorted_rows(read_snapshot(HoodieTable.open(table_uri), as_of=write.completed_at))
        assert [_data(r) for r in as_of] == snapshots[write.timestamp]
    assert main(["read", "--table", table_uri, "--as-of", readable[0].completed_at]) == 0
    capsys.readouterr()
    assert main(["read", "--table", table_uri, "--as-of", min(snapshots)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("tidemark read: error: as_of") and f"readable is {floor}" in line


def _data(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in META_COLUMNS}


@pytest.mark.parametrize(
    ("name", "field"),
    [("v8_simplekeygen_nonhivestyle", "name"), ("v9_txns_simple_nometa", "merchant_name")],
)
def test_tables_hudi_1x_wrote_are_cleaned_and_archived_into_their_history(
    tmp_path: Path, name: str, field: str
) -> None:
    """Every live file group rewritten eight times, retention after each write: Hudi's own
    instants (v9: an insert_overwrite and a clustering replacecommit) move to the LSM
    history with their plans, replaced and superseded slices are deleted, and hudi-rs
    reads exactly the model's rows."""
    uri = str(unzip_fixture(name, tmp_path))
    hudi_written = [i.timestamp for i in HoodieTable.open(uri).timeline.completed()]
    model = [_data(r) for r in hudi_rs_rows(uri)]
    for n in range(8):
        table = HoodieTable.open(uri)
        files = [
            (f, data_columns(pq.read_table(table.storage.open_input(f.path))))
            for f in table.view().latest_base_files()
        ]
        rewrite_file_groups(
            table, [(f, data.set_column(data.schema.get_field_index(field), field,
                                        pa.array([f"r{n}"] * data.num_rows))) for f, data in files]
        )  # fmt: skip
        run_retention(HoodieTable.open(uri), SMALL_RETENTION)
        model = [{**r, field: f"r{n}"} for r in model]
        assert sorted((_data(r) for r in hudi_rs_rows(uri)), key=str) == sorted(model, key=str)

    assert sorted(
        (_data(r) for r in read_snapshot(HoodieTable.open(uri)).to_pylist()), key=str
    ) == sorted(model, key=str)
    table = HoodieTable.open(uri)
    assert set(hudi_written) <= set(archived_instants(table))
    assert len(table.timeline.completed(WRITE_ACTIONS)) <= SMALL.keep_max
    assert len(table.view().committed_base_files()) <= 3 * len(files)  # retain 2, +1 before
    history = [
        row
        for file in _history_files(table)
        for row in pq.read_table(
            table.storage.open_input(f"{table.archive.folder}/{file}")
        ).to_pylist()
    ]
    assert sorted(r["instantTime"] for r in history) == sorted(archived_instants(table))
    replaced = [r for r in history if r["action"] == REPLACE_COMMIT]
    assert len(replaced) == (2 if name.startswith("v9") else 0)
    assert all(r["plan"] and r["metadata"] for r in replaced)  # the clustering plan kept
    cleans = [r for r in history if r["action"] == CLEAN]
    assert cleans and all(CleanPlan.from_avro(r["plan"]).file_count for r in cleans)


def _history_files(table: HoodieTable) -> list[str]:
    assert isinstance(table.archive, LsmTimeline)
    version = table.archive.current_version()
    assert version is not None
    return [e["fileName"] for e in table.archive.manifest_entries(version)]


T1, T2, T3 = "20260101000100001", "20260101000200001", "20260101000300001"


def test_a_history_append_cut_short_before_its_version_switch_is_invisible_and_redone(
    local_root: str,
) -> None:
    """Hudi's rule: readers follow ``_version_`` only; a manifest written without its
    switch is overwritten by the next append, and a file the current manifest lists is
    never written twice."""
    storage = open_storage(local_root)
    history = LsmTimeline(storage, ".hoodie/timeline/history")
    first = append_history(history, [HistoryInstant(t, t, "commit") for t in (T1, T2)])
    storage.write(f"{history.folder}/manifest_2", b'{"files": [{"fileName": "1_2_0.parquet"}]}')
    storage.write(f"{history.folder}/{T3}_{T3}_0.parquet", b"cut short")
    assert [i.timestamp for i in LsmTimeline(storage, history.folder).instants()] == [T1, T2]

    second = append_history(history, [HistoryInstant(T3, T3, "clean")])

    assert second == f"{T3}_{T3}_0.parquet" and first == f"{T1}_{T2}_0.parquet"
    reader = LsmTimeline(storage, history.folder)
    assert [(i.timestamp, i.action) for i in reader.instants()] == [
        (T1, "commit"), (T2, "commit"), (T3, "clean"),
    ]  # fmt: skip
    assert reader.completed_writes() == {T1, T2}
    assert append_history(history, [HistoryInstant(T3, T3, "clean")]) == second
    assert storage.read(f"{history.folder}/_version_") == b"2"
    assert [i.timestamp for i in reader.newest_file_instants(after=T3)] == [T3]
    assert reader.newest_file_instants(after="20300101000000000") == ()


def test_archived_commits_leave_the_process_wide_metadata_cache(people: Writer) -> None:
    """A long-running writer keeps the parsed metadata of the active timeline only: what
    archival moved out is forgotten at the next listing (a 1,000-batch stream grew by one
    commit's metadata a batch until the cache's 1,024 entries)."""
    writes = upserts(people, 10)
    table = HoodieTable.open(people.table.uri)
    for instant in table.timeline.completed(WRITE_ACTIONS):
        table.timeline.read_metadata(instant)
    assert set(writes) <= cached_instants(table)
    result = archive(table, SMALL)
    assert result.archived
    table.timeline.reload()
    active = {i.timestamp for i in table.timeline.instants()}
    assert cached_instants(table) <= active
    assert not {name.split(".")[0] for name in result.archived} & cached_instants(table)


def cached_instants(table: HoodieTable) -> set[str]:
    """Requested times of ``table``'s commits in the process-wide metadata cache."""
    return {key[1].rpartition("/")[2].split(".")[0] for key in metadata_cache.keys(table.uri)}


def test_a_table_opened_again_parses_only_the_archive_files_new_since(
    versioned: Writer,
) -> None:
    """A stream opens its table each batch and a file older than the active timeline makes
    the view ask the archive: each archive file is parsed once per process, so a batch
    parses what archival added since the last one, not the whole history (a 1,000-batch
    stream's file listing grew by 0.03 s every 50 batches re-reading it)."""
    upserts(versioned, 8)
    archive(HoodieTable.open(versioned.table.uri), SMALL)
    first = HoodieTable.open(versioned.table.uri)
    writes_then = first.archive.completed_writes()
    held_then = parsed_archive_files(first)
    assert writes_then and held_then

    upserts(versioned, 4)
    assert archive(HoodieTable.open(versioned.table.uri), SMALL).archived
    again = HoodieTable.open(versioned.table.uri)

    assert again.archive.completed_writes() > writes_then
    held_now = parsed_archive_files(again)
    assert set(held_now) - set(held_then), "the new archive file is parsed"
    kept = set(held_now) & set(held_then)
    assert all(held_now[key] is held_then[key] for key in kept), "parsed again"


def parsed_archive_files(table: HoodieTable) -> dict[tuple[str, str, int], ArchivedWrites | None]:
    """The process-wide parsed content of ``table``'s archive files, by cache key."""
    cache = history_cache if table.config.table_version > 6 else archive_cache
    return {key: cache.get(key) for key in cache.keys(table.uri)}


def test_a_writer_keeps_of_its_archive_the_writes_only(versioned: Writer) -> None:
    """A long-running writer keeps what it read of its table's archive for its life, more
    with each archival: of each archive or history file, the times of its completed
    writes, not its every entry (cleans, rollbacks, the instants' actions)."""
    uri = versioned.table.uri
    for _ in range(2):  # the first clean is archived, the last stays active
        upserts(versioned, 5)
        clean(HoodieTable.open(uri), CleanSettings(retain_commits=2))
    archive(HoodieTable.open(uri), SMALL)
    table = HoodieTable.open(uri)
    writes = table.archive.completed_writes()
    held = [parsed for parsed in parsed_archive_files(table).values() if parsed is not None]
    assert ArchivedWrites.union(held).writes == writes
    listed = archived_completed(table)
    assert CLEAN in {action for _, action in listed}
    assert writes == {timestamp for timestamp, action in listed if action in WRITE_ACTIONS}
