"""Tidemark's file-system view lists through Hudi's metadata table where it keeps its
``files`` partition (table versions 8 and 9): on every table Hudi 1.x wrote with one, and
after Tidemark's own updates, cleans and metadata compactions, the view through the
partition is the view by listing storage; and it is the partition that is read (a file
the partition does not name is not seen)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from table.metadata_testkit import FILES, FIXTURE, instant_log, update
from table.v1x_testkit import ZIPS, unzip_fixture
from tidemark.table import HoodieTable
from tidemark.table.files.view import FileSystemView
from tidemark.table.maintenance.clean import clean
from tidemark.table.maintenance.clean_plan import CleanSettings
from tidemark.table.metadata_table.compaction import MAX_DELTA_COMMITS
from tidemark.table.metadata_table.partitions import FILES as FILES_PARTITION
from tidemark.table.metadata_table.partitions import PARTITIONS_KEY

MOR_WITH_METADATA = ("v8_trips_8i3u1d", "v9_txns_simple_meta", "v9_txns_complex_meta")
COW_WITH_METADATA = sorted(name for name in ZIPS if name.endswith("_meta"))

Slices = list[tuple[str, str | None, tuple[tuple[str, int], ...]]]


def slices(view: FileSystemView) -> Slices:
    """(file group, base file path, log paths and sizes) of every latest slice."""
    return [
        (
            piece.file_id,
            piece.base.path if piece.base else None,
            tuple((log.path, log.size) for log in piece.logs),
        )
        for piece in view.latest_file_slices()
    ]


def by_storage(table: HoodieTable) -> Slices:
    return slices(FileSystemView(table.storage, table.timeline, archive=table.archive))


def through_metadata(root: Path) -> Slices:
    table = HoodieTable.open(str(root))
    assert table.metadata_listing() is not None
    return slices(table.view())


@pytest.mark.parametrize("name", COW_WITH_METADATA)
def test_hudis_copy_on_write_tables_list_the_same_through_it(name: str, tmp_path: Path) -> None:
    root = unzip_fixture(name, tmp_path)
    table = HoodieTable.open(str(root))
    assert FILES_PARTITION in dict(table.config.properties)[PARTITIONS_KEY].split(",")
    assert through_metadata(root) == by_storage(table) != []


@pytest.mark.parametrize("name", MOR_WITH_METADATA)
def test_hudis_merge_on_read_tables_list_the_same_through_it(
    name: str, mor_tables: Path, tmp_path: Path
) -> None:
    root = tmp_path / name
    shutil.copytree(mor_tables / name, root)
    found = through_metadata(root)
    assert found == by_storage(HoodieTable.open(str(root)))
    assert found != []


def test_tidemarks_writes_cleans_and_compactions_list_the_same(tmp_path: Path) -> None:
    root = unzip_fixture(FIXTURE, tmp_path)
    for _ in range(MAX_DELTA_COMMITS + 2):
        update(root)
        assert through_metadata(root) == by_storage(HoodieTable.open(str(root)))
    table = HoodieTable.open(str(root))
    assert clean(table, CleanSettings(retain_commits=1)).deleted
    assert through_metadata(root) == by_storage(HoodieTable.open(str(root)))


def test_the_view_reads_the_partition_not_storage(tmp_path: Path) -> None:
    """Without the newest metadata log, the view lists the file group's previous file, as
    hudi-rs does; a file of a pending metadata deltacommit is not listed either."""
    root = unzip_fixture(FIXTURE, tmp_path)
    _, first, _ = update(root)
    _, second, _ = update(root)
    table = HoodieTable.open(str(root))
    newest = by_storage(table)
    log = instant_log(root, second)
    moved = log.read_bytes()
    log.unlink()
    listed = through_metadata(root)
    assert listed != newest
    assert any(base and first in base for _, base, _ in listed)
    assert not any(base and second in base for _, base, _ in listed)
    log.write_bytes(moved)
    assert through_metadata(root) == newest
    assert (root / FILES).is_dir()
