"""Hudi's metadata table kept on table version 9 (Hudi 1.1's copy-on-write table with a
metadata table): a commit written without Spark (``tidemark.testing.tables``, through
``complete_commit`` as every write) records its files in the ``files`` partition before
it completes, hudi-rs lists through that partition and reads exactly the model, the other
metadata partitions are dropped, and a kill between the metadata deltacommit and the data
commit leaves hudi-rs reading the table as it was until the rollback removes both."""

from __future__ import annotations

from pathlib import Path

import pytest

from table.metadata_testkit import (
    FILES,
    FIXTURE,
    METADATA,
    METADATA_COMPACTION,
    PARTITION,
    TIMELINE,
    files_records,
    instant_log,
    rows,
    update,
)
from table.table_testkit import file_tree, set_property
from table.v1x_testkit import unzip_fixture
from tidemark.errors import FailedPreconditionError
from tidemark.table import HoodieTable
from tidemark.table.maintenance.archival import ArchiveSettings, archive
from tidemark.table.maintenance.clean import clean
from tidemark.table.maintenance.clean_plan import CleanSettings
from tidemark.table.metadata_table import deltacommit
from tidemark.table.metadata_table.files_records import ALL_PARTITIONS, FileChanges
from tidemark.table.metadata_table.partitions import INDEX_DEFS_KEY, INFLIGHT_KEY, PARTITIONS_KEY
from tidemark.table.properties.config import load_table_config, read_properties
from tidemark.table.writes import commit
from tidemark.table.writes.checks import check_writable
from tidemark.table.writes.markers import StorageMarkerReader


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return unzip_fixture(FIXTURE, tmp_path)


def metadata_instants(root: Path, instant: str) -> list[str]:
    return sorted(p.name for p in (root / TIMELINE).iterdir() if p.name.startswith(instant))


def test_a_commit_is_listed_through_the_files_partition(root: Path) -> None:
    before = rows(root)
    table, instant, model = update(root)
    assert model != before
    assert rows(root) == model
    done = HoodieTable.open(str(root)).timeline.find(instant)
    [inflight, requested, completed] = metadata_instants(root, instant)
    assert requested == f"{instant}.deltacommit.requested"
    assert inflight == f"{instant}.deltacommit.inflight"
    assert completed.startswith(f"{instant}_") and completed.endswith(".deltacommit")
    assert completed.split("_")[1].split(".")[0] < str(done.completion_time)
    log = instant_log(root, instant)
    assert log.name.startswith(".files-0000-0_")
    records = files_records(log)
    assert sorted(records) == ["__all_partitions__", PARTITION]
    assert records["__all_partitions__"]["type"] == 1
    assert records["__all_partitions__"]["filesystemMetadata"] == {
        PARTITION: {"size": 0, "isDeleted": False}
    }
    [written] = table.timeline.read_metadata(done).write_stats
    listed = records[PARTITION]["filesystemMetadata"]
    assert listed == {
        written.path.rsplit("/")[-1]: {"size": written.file_size_in_bytes, "isDeleted": False}
    }
    # hudi-rs lists through the partition: without the new log file it misses the commit
    moved = log.read_bytes()
    log.unlink()
    assert rows(root) == before
    log.write_bytes(moved)
    assert rows(root) == model


def test_the_other_partitions_and_index_definitions_are_dropped(root: Path) -> None:
    update(root)
    props = read_properties(HoodieTable.open(str(root)).storage)
    assert props[PARTITIONS_KEY] == "files"
    assert INDEX_DEFS_KEY not in props
    assert not (root / ".hoodie/.index_defs").exists() or not any(
        (root / ".hoodie/.index_defs").iterdir()
    )
    assert sorted(p.name for p in (root / METADATA).iterdir() if any(p.rglob("*"))) == [
        ".hoodie",
        "files",
    ]


def test_a_second_commit_and_a_repeated_deltacommit_change_nothing_twice(root: Path) -> None:
    table, instant, _ = update(root)
    after = file_tree(root)
    deltacommit.write_deltacommit(table.storage, instant, FileChanges({PARTITION: {"x": 1}}))
    assert file_tree(root) == after
    _, second, model = update(root)
    assert rows(root) == model
    assert len(list((root / FILES).glob(f".files-0000-0_{second}.log.*"))) == 1


def test_a_kill_before_the_data_commit_leaves_the_table_as_it_was(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The metadata deltacommit completed, the data instant did not: hudi-rs reads the
    table as before; the rollback removes the metadata deltacommit and its log file, and
    the next write is read."""
    before = rows(root)

    def killed(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(commit, "_publish", killed)
    with pytest.raises(KeyboardInterrupt):
        update(root)
    monkeypatch.undo()
    table = HoodieTable.open(str(root))
    [pending] = table.timeline.pending()
    assert len(metadata_instants(root, pending.timestamp)) == 3
    assert rows(root) == before
    # a retry of the metadata step carries on, idempotent
    deltacommit.write_deltacommit(table.storage, pending.timestamp, FileChanges({}))
    assert len(metadata_instants(root, pending.timestamp)) == 3
    commit.rollback(table, pending.timestamp, StorageMarkerReader(table.storage))
    assert metadata_instants(root, pending.timestamp) == []
    assert not list((root / FILES).glob(f".files-0000-0_{pending.timestamp}.*"))
    assert rows(root) == before
    _, _, model = update(root)
    assert rows(root) == model


def test_a_pending_metadata_deltacommit_is_carried_on(root: Path) -> None:
    """An attempt that stopped before completing its metadata deltacommit is finished by
    the next attempt at the same instant, with one log file."""
    table, instant, model = update(root)
    [completed] = list((root / TIMELINE).glob(f"{instant}_*.deltacommit"))
    completed.unlink()
    changes = FileChanges.of_commit(table.timeline.read_metadata(table.timeline.find(instant)))
    deltacommit.write_deltacommit(table.storage, instant, changes)
    assert len(metadata_instants(root, instant)) == 3
    assert len(list((root / FILES).glob(f".files-0000-0_{instant}.log.*"))) == 1
    assert rows(root) == model


def refusal(root: Path) -> FailedPreconditionError:
    """What refuses a write (without the option) to the table as it now is."""
    config = load_table_config(HoodieTable.open(str(root)).storage)
    with pytest.raises(FailedPreconditionError) as refused:
        check_writable(config, disable_hudi_metadata_table=False)
    return refused.value


def test_a_write_is_refused_while_hudi_builds_a_metadata_partition(root: Path) -> None:
    set_property(root, INFLIGHT_KEY, "record_index")
    refused = refusal(root)
    assert refused.field == INFLIGHT_KEY
    assert "record_index" in str(refused)


def test_a_metadata_table_without_files_is_still_refused(root: Path) -> None:
    set_property(root, PARTITIONS_KEY, "column_stats")
    assert refusal(root).field == INDEX_DEFS_KEY
    set_property(root, INDEX_DEFS_KEY, "")
    refused = refusal(root)
    assert refused.field == PARTITIONS_KEY
    assert "--disable-hudi-metadata-table" in str(refused)


def test_an_unpartitioned_table_is_listed_under_a_dot() -> None:
    changes = FileChanges({"": {"a.parquet": 10}}, {"": ["b.parquet"]})
    assert changes.records() == [
        (".", 2, {"a.parquet": (10, False), "b.parquet": (0, True)}),
        ("__all_partitions__", 1, {".": (0, False)}),
    ]


def test_a_clean_records_tombstones(root: Path) -> None:
    """Cleaning refuses a table whose metadata table has partitions Tidemark does not keep;
    after a write dropped them, the clean records its deleted files as tombstones before
    it completes, and hudi-rs still reads the model."""
    table = HoodieTable.open(str(root))
    retain_one = CleanSettings(retain_commits=1)
    with pytest.raises(FailedPreconditionError) as refused:
        clean(table, retain_one)
    assert refused.value.field == PARTITIONS_KEY
    _, _, model = update(root)
    table = HoodieTable.open(str(root))
    result = clean(table, retain_one)
    [instant] = result.instants
    assert result.deleted
    records = files_records(instant_log(root, instant))
    assert ALL_PARTITIONS not in records
    assert {
        partition: sorted(record["filesystemMetadata"]) for partition, record in records.items()
    } == {
        partition: sorted(path.rsplit("/")[-1] for path in paths)
        for partition, paths in result.deleted.items()
    }
    assert all(
        info == {"size": 0, "isDeleted": True}
        for record in records.values()
        for info in record["filesystemMetadata"].values()
    )
    assert rows(root) == model


@pytest.mark.parametrize("compacted", [True, False])
def test_archival_stops_at_the_metadata_tables_last_compaction(root: Path, compacted: bool) -> None:
    """As Hudi's archiver: no data instant after the metadata table's last compaction is
    archived, and none at all before its first."""
    settings = ArchiveSettings(keep_min=2, keep_max=3)
    if not compacted:
        for path in (root / TIMELINE).glob(f"{METADATA_COMPACTION}*"):
            path.unlink()
        assert archive(HoodieTable.open(str(root)), settings).archived == []
        return
    _, _, model = update(root)
    result = archive(HoodieTable.open(str(root)), settings)
    archived = sorted(name.split(".")[0] for name in result.archived)
    assert archived and archived[-1] < METADATA_COMPACTION
    assert rows(root) == model
