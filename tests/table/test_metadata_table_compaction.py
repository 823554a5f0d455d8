"""The metadata table's ``files`` partition compacted and cleaned by Tidemark's writes, as
Hudi 1.x does (Hudi 1.1's copy-on-write v9 table with a metadata table, whose ``files``
slice holds six logs after Hudi's own compaction): the write that finds ten logs folds
them into a new base HFile under a compaction instant, hudi-rs reads exactly the model
through it, the partition keeps two slices however many writes follow, and a compaction
killed before its commit is rolled back by the next write."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from table.metadata_testkit import FILES, FIXTURE, METADATA_COMPACTION, TIMELINE, rows, update
from table.table_testkit import hudi_rs_table
from table.v1x_testkit import unzip_fixture
from tidemark.hfile.reader import HFileReader
from tidemark.hfile.style import Style
from tidemark.table import HoodieTable
from tidemark.table.metadata.compaction import read_compaction_plan
from tidemark.table.metadata_table import compaction
from tidemark.table.metadata_table.compaction import MAX_DELTA_COMMITS
from tidemark.table.metadata_table.slices import FilesSlices
from tidemark.table.metadata_table.timeline import last_compaction, metadata_timeline
from tidemark.table.writes.hudi_metadata_table import prepare_hudi_metadata_table
from tidemark.testing.tables import data_columns, rewrite_file_groups

LOGS_AFTER_HUDIS_COMPACTION = 6


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return unzip_fixture(FIXTURE, tmp_path)


def slices(root: Path) -> FilesSlices:
    storage = HoodieTable.open(str(root)).storage
    return FilesSlices.read(storage, metadata_timeline(storage))


def updates_until_compacted(root: Path) -> list[dict[str, object]]:
    """Updates until the slice reaches ``MAX_DELTA_COMMITS`` logs, plus the one that
    compacts it; the model's rows."""
    assert len(slices(root).latest.logs) == LOGS_AFTER_HUDIS_COMPACTION
    model: list[dict[str, object]] = []
    for _ in range(MAX_DELTA_COMMITS - LOGS_AFTER_HUDIS_COMPACTION + 1):
        _, _, model = update(root)
    return model


def test_the_write_that_finds_ten_logs_compacts_them(root: Path) -> None:
    before = slices(root).latest
    model = updates_until_compacted(root)
    compacted = last_compaction(HoodieTable.open(str(root)).storage)
    assert compacted is not None and compacted > METADATA_COMPACTION
    requested = root / TIMELINE / f"{compacted}.compaction.requested"
    [operation] = read_compaction_plan(requested.read_bytes())["operations"]
    assert operation["fileId"] == "files-0000-0"
    assert operation["partitionPath"] == "files"
    assert operation["dataFilePath"] == before.base
    assert len(operation["deltaFilePaths"]) == MAX_DELTA_COMMITS
    assert operation["deltaFilePaths"][: len(before.logs)] == list(before.logs)
    assert (root / TIMELINE / f"{compacted}.compaction.inflight").exists()
    assert len(list((root / TIMELINE).glob(f"{compacted}_*.commit"))) == 1
    latest = slices(root).latest
    assert latest.base == f"files-0000-0_0-0-0_{compacted}.hfile"
    assert len(latest.logs) == 1  # the compacting write's own deltacommit, after it
    assert rows(root) == model
    # hudi-rs lists through the new base file: without the new log, the files of every
    # write but that last one
    [own_log] = latest.logs
    newest = own_log.split("_")[1].split(".")[0]
    assert newest in commit_times(root)
    moved = (root / FILES / own_log).read_bytes()
    (root / FILES / own_log).unlink()
    assert newest not in commit_times(root)
    assert compacted_writes(operation["deltaFilePaths"]) <= commit_times(root)
    (root / FILES / own_log).write_bytes(moved)
    assert rows(root) == model


def commit_times(root: Path) -> set[str]:
    """The commit times of the rows hudi-rs reads."""
    return set(hudi_rs_table(str(root)).column("_hoodie_commit_time").to_pylist())


def compacted_writes(logs: list[str]) -> set[str]:
    """The instants of the compacted logs whose files are still the latest of their group
    (the updates rewrite one file group, so only the newest compacted one is)."""
    return {max(log.split("_")[1].split(".")[0] for log in logs)}


def test_the_partition_keeps_two_slices_and_the_instants_they_need(root: Path) -> None:
    updates_until_compacted(root)
    first = slices(root)
    for _ in range(MAX_DELTA_COMMITS):
        _, _, model = update(root)
    second = slices(root)
    assert [piece.base_instant for piece in second.slices] == [
        first.latest.base_instant,
        str(last_compaction(HoodieTable.open(str(root)).storage)),
    ]
    names = {path.name for path in (root / FILES).iterdir()}
    kept = {n for piece in second.slices for n in [piece.base, *piece.logs] if n}
    assert names - {".hoodie_partition_metadata"} == kept
    timeline = metadata_timeline(HoodieTable.open(str(root)).storage)
    assert min(i.timestamp for i in timeline) > METADATA_COMPACTION
    assert rows(root) == model


def test_a_compaction_killed_before_its_commit_is_rolled_back_by_the_next_write(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = rows(root)
    for _ in range(MAX_DELTA_COMMITS - LOGS_AFTER_HUDIS_COMPACTION):
        _, _, before = update(root)

    def killed(*args: object) -> bytes:
        raise KeyboardInterrupt

    monkeypatch.setattr(compaction, "commit_metadata_to_avro", killed)
    with pytest.raises(KeyboardInterrupt):
        update(root)
    monkeypatch.undo()
    [stuck] = {path.name.split(".")[0] for path in (root / TIMELINE).glob("*.compaction.*")} - {
        METADATA_COMPACTION
    }
    assert list((root / FILES).glob(f"*_{stuck}.hfile"))
    assert rows(root) == before  # the uncommitted base file is read by nobody
    _, _, model = update(root)
    assert not list((root / TIMELINE).glob(f"{stuck}*"))
    assert not list((root / FILES).glob(f"*_{stuck}.hfile"))
    assert str(last_compaction(HoodieTable.open(str(root)).storage)) > stuck
    assert rows(root) == model


def test_a_slice_with_a_pending_data_instant_waits(root: Path) -> None:
    """A deltacommit whose data instant has not completed is never folded: the compaction
    waits for it to complete or be rolled back."""
    for _ in range(MAX_DELTA_COMMITS - LOGS_AFTER_HUDIS_COMPACTION):
        _, instant, model = update(root)
    storage = HoodieTable.open(str(root)).storage
    assert compaction.compact_if_due(storage, [instant], after=instant) is None
    assert last_compaction(storage) == METADATA_COMPACTION
    assert compaction.compact_if_due(storage, [], after=instant) is not None
    assert rows(root) == model


def test_hudi_1_0s_merge_on_read_table_is_compacted_in_its_own_layout(
    mor_tables: Path, tmp_path: Path
) -> None:
    """Hudi 1.0's v8 merge-on-read table (HBase-layout HFiles with checksums): the writes
    compact its ``files`` partition in that layout, and hudi-rs reads the newest write
    through the new base file and the log after it."""
    root = Path(shutil.copytree(mor_tables / "v8_trips_8i3u1d", tmp_path / "v8"))
    written = []
    for _ in range(MAX_DELTA_COMMITS + 2):
        table = HoodieTable.open(str(root))
        prepare_hudi_metadata_table(table, disable=False)
        [first, *_] = [piece.base for piece in table.view().latest_file_slices() if piece.base]
        data = data_columns(pq.read_table(root / first.path))
        written.append(rewrite_file_groups(table, [(first, data)]))
    storage = HoodieTable.open(str(root)).storage
    compacted = last_compaction(storage)
    assert compacted is not None and compacted > written[0]
    base = root / FILES / f"files-0000-0_0-0-0_{compacted}.hfile"
    assert HFileReader(base.read_bytes()).options.style is Style.HBASE
    assert written[-1] in commit_times(root)
