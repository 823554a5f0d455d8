"""Bounded metadata: archival merges version 6's small archive files and compacts the LSM
history of 8 and 9 as Hudi does, and folds the archived writes' column statistics, so
many writes keep ``.hoodie/`` small while every archived instant is still found and
every read stays exact (Tidemark's reader and hudi-rs)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections import Counter
from dataclasses import asdict

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
from tidemark.faults import EXIT_AT_ENV, EXIT_CODE
from tidemark.retention import RetentionSettings, run_retention
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.files import column_stats
from tidemark.table.files.reader import read_snapshot
from tidemark.table.files.view import earliest_readable
from tidemark.table.maintenance.archival import ArchiveSettings
from tidemark.table.maintenance.clean_plan import CleanSettings
from tidemark.table.maintenance.orphans import find_orphans
from tidemark.table.metadata.actions import CLEAN, WRITE_ACTIONS
from tidemark.table.metadata.clean import CleanMetadata
from tidemark.table.timeline.archive_writer import MERGE_PLAN, MERGED_POINT
from tidemark.table.timeline.archived import last_block, parse_archive_log
from tidemark.table.timeline.lsm import COMPACTED_POINT, LSM_FILE, MANIFEST, LsmTimeline
from tidemark.table.timeline.versions import archived_log
from tidemark.testing.leases import outlive_lease

TIGHT = ArchiveSettings(keep_min=3, keep_max=5, merge_batch_size=3, compaction_batch_size=2)
TIGHT_RETENTION = RetentionSettings(CleanSettings(retain_commits=2), TIGHT)


def write_and_retain(
    people: Writer,
    uri: str,
    count: int,
    start: int = 0,
    archive: ArchiveSettings = TIGHT,
) -> list[str]:
    """Upserts of the eu row (the us row written once, first), each followed by the
    clean and archival every write runs."""
    writes = []
    for n in range(start, start + count):
        batch = [(1, f"e{n}", "eu", float(n))] + ([(2, "b", "us", 0.0)] if n == 0 else [])
        writes.append(people.commit(rows(*batch)))
        run_retention(
            HoodieTable.open(uri), RetentionSettings(CleanSettings(retain_commits=2), archive)
        )
    return writes


def upserts(people: Writer, first: int, last: int) -> list[str]:
    """Upserts of the eu row without retention."""
    return [people.commit(rows((1, f"e{n}", "eu", float(n)))) for n in range(first, last + 1)]


def current_history_files(uri: str) -> list[str]:
    """The files the LSM history's current manifest lists."""
    history = HoodieTable.open(uri).archive
    assert isinstance(history, LsmTimeline)
    version = history.current_version()
    assert version is not None
    return history.manifest_files(version)


def every_write_found(table: HoodieTable, writes: list[str], *, settled: bool = True) -> None:
    """Each write is active or archived, listed once by the archive; not both unless an
    interrupted archival is not ``settled`` yet."""
    active = {i.timestamp for i in table.timeline.completed(WRITE_ACTIONS)}
    archived = Counter(t for t, action in archived_completed(table) if action == "commit")
    assert set(archived) | active == set(writes)
    assert not settled or not set(archived) & active
    assert max(archived.values()) == 1
    assert table.archive.completed_writes() == frozenset(archived)


def oldest_readable_reads_exactly(uri: str, writes: list[str]) -> None:
    """``as_of`` the oldest write the retention keeps readable reads that write's rows."""
    table = HoodieTable.open(uri)
    floor = earliest_readable(table.timeline)
    assert floor is not None
    oldest = next(i for i in table.timeline.completed(WRITE_ACTIONS) if i.completed_at >= floor)
    found = sorted_rows(read_snapshot(HoodieTable.open(uri), as_of=oldest.completed_at))
    assert [(r["id"], r["name"]) for r in found] == expected_rows(writes.index(oldest.timestamp))


def expected_rows(last: int) -> list[tuple[int, str]]:
    return [(1, f"e{last}"), (2, "b")]


def read_rows(uri: str) -> list[tuple[int, str]]:
    return [(r["id"], r["name"]) for r in sorted_rows(read_snapshot(HoodieTable.open(uri)))]


def test_small_archive_files_are_merged_as_hudi_merges_them(table_uri: str) -> None:
    people = Writer(HoodieTable.create(table_uri, people_config(table_version=6)))
    writes = write_and_retain(people, table_uri, 40)

    table = HoodieTable.open(table_uri)
    archive = archived_log(table.archive)
    files = archive.files()
    assert len(files) < TIGHT.merge_batch_size  # each merge leaves one file of many
    assert max(f.size for f in files) > 3 * min(f.size for f in files)  # one was merged
    assert not table.storage.exists(f"{archive.folder}/{MERGE_PLAN}")
    merged = max(files, key=lambda f: f.size)
    whole = parse_archive_log(table.storage.read(merged.path), merged.path)
    newest = last_block(table.storage, merged)  # what an interrupted archival left
    assert 0 < len(newest) < len(whole) and whole[-len(newest) :] == newest
    every_write_found(table, writes)
    oldest_readable_reads_exactly(table_uri, writes)
    assert read_rows(table_uri) == expected_rows(39)
    assert [(r["id"], r["name"]) for r in hudi_rs_rows(table_uri)] == expected_rows(39)


@pytest.mark.parametrize("version", [8, 9])
def test_the_lsm_history_is_compacted_and_old_manifests_cleaned(
    table_uri: str, version: int
) -> None:
    people = Writer(HoodieTable.create(table_uri, people_config(table_version=version)))
    writes = write_and_retain(people, table_uri, 40)

    table = HoodieTable.open(table_uri)
    history = table.archive
    assert isinstance(history, LsmTimeline)
    names = [info.path.rpartition("/")[2] for info in table.storage.list_dir(history.folder).files]
    manifests = sorted(int(m.group(1)) for n in names if (m := MANIFEST.fullmatch(n)))
    assert len(manifests) <= 3 + 4  # the newest three, and one per level compacted last
    kept = {f for version in manifests for f in history.manifest_files(version)}
    assert {n for n in names if LSM_FILE.fullmatch(n)} == kept  # merged files deleted
    levels = Counter(_level(n) for n in current_history_files(table_uri))
    assert max(levels) >= 2  # level 0 compacted into 1, and 1 into 2
    assert max(levels.values()) < TIGHT.compaction_batch_size
    every_write_found(table, writes)
    oldest_readable_reads_exactly(table_uri, writes)
    assert read_rows(table_uri) == expected_rows(39)
    assert [(r["id"], r["name"]) for r in hudi_rs_rows(table_uri)] == expected_rows(39)


def _archive_killed_at(uri: str, point: str, settings: ArchiveSettings) -> None:
    """One archival with ``settings`` in a child process killed at ``point``; then its
    table lock's lease is outlived, so the next writer or archival takes the lock."""
    script = (
        "import sys\n"
        "from tidemark.table.maintenance.archival import ArchiveSettings, archive\n"
        "from tidemark.table import HoodieTable\n"
        f"settings = ArchiveSettings(**{asdict(settings)!r})\n"
        "archive(HoodieTable.open(sys.argv[1]), settings)\n"
    )
    killed = subprocess.run(
        [sys.executable, "-c", script, uri],
        env={**os.environ, EXIT_AT_ENV: point},
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard: a child at load 70 took over 120 s
        check=False,
    )
    assert killed.returncode == EXIT_CODE, killed.stderr[-2000:]
    outlive_lease(open_storage(uri))


@pytest.mark.parametrize("deleted_some", [False, True])
def test_a_merge_killed_before_deleting_the_small_files_loses_nothing(
    table_uri: str, deleted_some: bool
) -> None:
    """Killed once the merged file is written: with every small file left Hudi's rule
    undoes the merge, with some deleted (a kill among the deletes) it finishes it."""
    people = Writer(HoodieTable.create(table_uri, people_config(table_version=6)))
    loose = ArchiveSettings(keep_min=3, keep_max=5, merge_small_files=False)
    writes = write_and_retain(people, table_uri, 20, archive=loose) + upserts(people, 20, 21)
    archive = archived_log(HoodieTable.open(table_uri).archive)
    small = archive.files()
    assert len(small) >= TIGHT.merge_batch_size

    _archive_killed_at(table_uri, MERGED_POINT, TIGHT)
    if deleted_some:
        archive.storage.delete(small[0].path)

    table = HoodieTable.open(table_uri)
    assert table.storage.exists(f"{archive.folder}/{MERGE_PLAN}")
    assert len(archived_log(table.archive).files()) == len(small) + 2 - deleted_some
    every_write_found(table, writes, settled=False)  # the killed archival's still active
    assert [(r["id"], r["name"]) for r in hudi_rs_rows(table_uri)] == expected_rows(21)

    run_retention(HoodieTable.open(table_uri), TIGHT_RETENTION)  # settles the merge from its plan

    table = HoodieTable.open(table_uri)
    assert not table.storage.exists(f"{archive.folder}/{MERGE_PLAN}")
    assert len(archived_log(table.archive).files()) < TIGHT.merge_batch_size
    every_write_found(table, writes)
    assert read_rows(table_uri) == expected_rows(21)


@pytest.mark.parametrize("version", [8, 9])
def test_a_compaction_killed_before_its_manifest_is_invisible_and_redone(
    table_uri: str, version: int
) -> None:
    people = Writer(HoodieTable.create(table_uri, people_config(table_version=version)))
    loose = ArchiveSettings(keep_min=3, keep_max=5, compaction_batch_size=100)
    writes = write_and_retain(people, table_uri, 12, archive=loose) + upserts(people, 12, 14)

    _archive_killed_at(table_uri, COMPACTED_POINT, TIGHT)

    assert all(n.endswith("_0.parquet") for n in current_history_files(table_uri))
    assert [(r["id"], r["name"]) for r in hudi_rs_rows(table_uri)] == expected_rows(14)
    every_write_found(HoodieTable.open(table_uri), writes, settled=False)

    writes += upserts(people, 15, 15)
    run_retention(HoodieTable.open(table_uri), TIGHT_RETENTION)

    assert any(not n.endswith("_0.parquet") for n in current_history_files(table_uri))
    every_write_found(HoodieTable.open(table_uri), writes)
    assert read_rows(table_uri) == expected_rows(15)


@pytest.mark.parametrize("version", [6, 9])
def test_column_statistics_of_archived_writes_are_folded_and_still_prune_exactly(
    table_uri: str, version: int
) -> None:
    people = Writer(HoodieTable.create(table_uri, people_config(table_version=version)))
    write_and_retain(people, table_uri, 25)

    table = HoodieTable.open(table_uri)
    storage = table.storage
    recorded = column_stats.recorded_instants(storage)
    active = {i.timestamp for i in table.timeline.completed(WRITE_ACTIONS)}
    assert set(recorded) <= active  # one file per active write, the rest folded
    assert storage.exists(column_stats.FOLDED)
    live = table.view().latest_base_files()
    us = next(f for f in live if f.partition_path == "us")
    assert us.instant not in active  # written first, archived since
    stats = column_stats.load(storage, live)
    assert set(stats) == {f.path for f in live}  # the archived write's file still has stats
    folded = set(pq.read_table(io.BytesIO(storage.read(column_stats.FOLDED)))["file"].to_pylist())
    assert us.path in folded
    gone = {path for path in folded if not storage.exists(path)}
    active_cleans = table.timeline.completed(frozenset({CLEAN}))
    deleted_lately = {
        path
        for clean in active_cleans
        for files in CleanMetadata.from_avro(storage.read(clean.path)).deleted_by_partition.values()
        for path in files
    }
    assert gone <= deleted_lately  # left out once the clean that deleted them is archived
    for value, expected in ((1, [(1, "e24")]), (2, [(2, "b")]), (3, [])):
        found = read_snapshot(HoodieTable.open(table_uri), filters=[("id", "=", value)])
        assert [(r["id"], r["name"]) for r in sorted_rows(found)] == expected
    assert not [o for o in find_orphans(table, grace_s=0) if "column-stats" in o.path]


def test_column_statistics_of_a_write_on_no_timeline_are_orphans(table_uri: str) -> None:
    people = Writer(HoodieTable.create(table_uri, people_config(table_version=6)))
    people.commit(rows((1, "a", "eu", 0.0)))
    storage = open_storage(table_uri)
    stray = column_stats.stats_path("20200101000000000")
    storage.write(
        stray, storage.read(column_stats.stats_path(column_stats.recorded_instants(storage)[0]))
    )

    orphans = [o.path for o in find_orphans(HoodieTable.open(table_uri), grace_s=0)]

    assert orphans == [stray]


@pytest.mark.parametrize("version", [6, 9])
def test_many_writes_keep_the_metadata_folder_bounded(table_uri: str, version: int) -> None:
    """The files under ``.hoodie/`` after 60 and after 180 writes: the same bound."""
    people = Writer(HoodieTable.create(table_uri, people_config(table_version=version)))
    storage = open_storage(table_uri)
    counts = []
    writes: list[str] = []
    for start, count in ((0, 60), (60, 120)):
        writes += write_and_retain(people, table_uri, count, start)
        counts.append(Counter(_group(info.path) for info in storage.list(".hoodie/")))
    early, late = counts
    assert sum(late.values()) <= sum(early.values()) + 3, (early, late)
    assert late["column-stats"] <= TIGHT.keep_max + 2
    assert late["archive"] <= early["archive"] + 3
    every_write_found(HoodieTable.open(table_uri), writes)
    assert read_rows(table_uri) == expected_rows(179)
    assert [(r["id"], r["name"]) for r in hudi_rs_rows(table_uri)] == expected_rows(179)


def _level(name: str) -> int:
    return int(name.removesuffix(".parquet").rpartition("_")[2])


def _group(path: str) -> str:
    if "/column-stats/" in path:
        return "column-stats"
    if "/archived/" in path or "/history/" in path:
        return "archive"
    return "other"
