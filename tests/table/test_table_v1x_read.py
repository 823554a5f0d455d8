"""Tables Hudi 1.x wrote (table versions 8 and 9, timeline layout 2) read exactly as
hudi-rs reads them: snapshots, time travel by completion time, the LSM history."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hudi import HudiReadOptions, HudiTableBuilder

from table.table_testkit import file_tree, hudi_rs_table, set_property, sorted_rows
from table.v1x_testkit import LANCE, LIVE_ROWS, PARQUET_TABLES, unzip_fixture
from tidemark.cli import main
from tidemark.errors import FailedPreconditionError, InvalidArgumentError
from tidemark.table import HoodieTable
from tidemark.table.files.reader import read_snapshot
from tidemark.table.metadata.actions import CLUSTERING, REPLACE_COMMIT
from tidemark.table.plans.clustering import pending_plans
from tidemark.table.timeline.instant import State
from tidemark.table.timeline.lsm import HistoryInstant, write_history
from tidemark.table.writes.checks import check_writable


def hudi_rs_as_of(uri: Path, as_of: str) -> pa.Table:
    options = HudiReadOptions().with_as_of_timestamp(as_of)
    batches = HudiTableBuilder.from_base_uri(str(uri)).build().read(options)
    return pa.Table.from_batches(batches) if batches else pa.table({})


def same_rows(ours: pa.Table, theirs: pa.Table) -> bool:
    """hudi-rs leaves the (null) meta columns out of virtual-key tables: compare its columns."""
    columns = theirs.column_names or None
    return sorted_rows(ours, columns) == sorted_rows(theirs) if columns else ours.num_rows == 0


@pytest.mark.parametrize("name", PARQUET_TABLES)
def test_snapshot_equals_hudi_rs(name: str, tmp_path: Path) -> None:
    root = unzip_fixture(name, tmp_path)
    ours = read_snapshot(HoodieTable.open(str(root)))
    assert same_rows(ours, hudi_rs_table(str(root)))
    assert ours.num_rows == LIVE_ROWS.get(name, 4)


@pytest.mark.parametrize(
    "name", ["v8_simplekeygen_nonhivestyle", "v9_txns_simple_meta", "v9_txns_simple_overwrite"]
)
def test_time_travel_to_each_completion_equals_hudi_rs(name: str, tmp_path: Path) -> None:
    root = unzip_fixture(name, tmp_path)
    completed = HoodieTable.open(str(root)).timeline.completed()
    assert completed and all(instant.completion_time for instant in completed)
    for instant in completed:
        assert instant.completion_time is not None
        ours = read_snapshot(HoodieTable.open(str(root)), as_of=instant.completion_time)
        assert same_rows(ours, hudi_rs_as_of(root, instant.completion_time)), instant


def test_a_write_is_visible_from_its_completion_time_or_as_of_its_own_instant(
    tmp_path: Path,
) -> None:
    """A time while the write ran does not show it; its completion time and its own
    requested instant (issue 53: ``as_of=result.instant``) do, as in hudi-rs."""
    root = unzip_fixture("v8_simplekeygen_nonhivestyle", tmp_path)
    first, second = HoodieTable.open(str(root)).timeline.completed()
    assert second.completion_time is not None and first.completion_time is not None
    while_running = str(int(second.timestamp) + 1)
    assert while_running < second.completion_time
    running = read_snapshot(HoodieTable.open(str(root)), as_of=while_running)
    before = read_snapshot(HoodieTable.open(str(root)), as_of=first.completion_time)
    assert sorted_rows(running) == sorted_rows(before)
    assert set(running.column("_hoodie_commit_time").to_pylist()) == {first.timestamp}
    after = read_snapshot(HoodieTable.open(str(root)), as_of=second.completion_time)
    assert second.timestamp in set(after.column("_hoodie_commit_time").to_pylist())
    own = read_snapshot(HoodieTable.open(str(root)), as_of=second.timestamp)
    assert sorted_rows(own) == sorted_rows(after)
    assert same_rows(own, hudi_rs_as_of(root, second.timestamp))


def test_clustering_is_pending_as_clustering_and_completes_as_replacecommit(
    tmp_path: Path,
) -> None:
    root = unzip_fixture("v9_txns_simple_meta", tmp_path)
    timeline = HoodieTable.open(str(root)).timeline
    clustered = timeline.find("20260307162454799")
    assert (clustered.action, clustered.state) == (REPLACE_COMMIT, State.COMPLETED)
    assert clustered.completion_time == "20260307162456102"
    assert clustered.path == ".hoodie/timeline/20260307162454799_20260307162456102.replacecommit"
    replaced = timeline.read_metadata(clustered).partition_to_replace_file_ids
    assert replaced["region=apac"] == (
        "7dcb7583-60a5-4c3e-b173-87f1d23ee9e0-0",
        "07838327-b037-4532-a9df-3c5b05dd823d-0",
    )
    live = {f.file_id for f in HoodieTable.open(str(root)).view().latest_base_files()}
    assert live.isdisjoint(replaced["region=apac"])
    (root / ".hoodie/timeline" / clustered.file_name).unlink()
    pending = HoodieTable.open(str(root)).timeline.find("20260307162454799")
    assert (pending.action, pending.state) == (CLUSTERING, State.INFLIGHT)
    (plan,) = pending_plans(HoodieTable.open(str(root)))
    assert plan.timestamp == "20260307162454799"
    assert ("region=apac", "7dcb7583-60a5-4c3e-b173-87f1d23ee9e0-0") in plan.plan.file_groups()


def _archive_oldest(root: Path, count: int) -> list[str]:
    """Move the ``count`` oldest completed instants into an LSM history as Hudi 1.x's
    archiver lays it out (one level-0 Parquet file, manifest_1, _version_)."""
    table = HoodieTable.open(str(root))
    moved = table.timeline.completed()[:count]
    for instant in moved:
        for path in (root / ".hoodie/timeline").glob(f"{instant.timestamp}*"):
            path.unlink()
    history = [HistoryInstant(i.timestamp, i.completed_at, i.action) for i in moved]
    write_history(table.storage, ".hoodie/timeline/history", history)
    return [instant.timestamp for instant in moved]


def test_archived_writes_are_read_through_the_lsm_history(tmp_path: Path) -> None:
    root = unzip_fixture("v9_txns_simple_nometa", tmp_path)
    first = HoodieTable.open(str(root)).timeline.completed()[0]
    assert first.completion_time is not None
    latest = sorted_rows(read_snapshot(HoodieTable.open(str(root))))
    oldest = sorted_rows(read_snapshot(HoodieTable.open(str(root)), as_of=first.completion_time))
    archived = _archive_oldest(root, 3)
    table = HoodieTable.open(str(root))
    assert not {i.timestamp for i in table.timeline.instants()} & set(archived)
    assert set(archived) <= table.archive.completed_writes()
    assert sorted_rows(read_snapshot(HoodieTable.open(str(root)))) == latest
    assert (
        sorted_rows(read_snapshot(HoodieTable.open(str(root)), as_of=first.completion_time))
        == oldest
    )
    (root / ".hoodie/timeline/history/manifest_1").write_text('{"files": []}')
    with pytest.raises(InvalidArgumentError, match="before the table's first commit"):
        read_snapshot(HoodieTable.open(str(root)), as_of=first.completion_time)


def test_an_unreadable_history_is_one_error_naming_the_file(tmp_path: Path) -> None:
    root = unzip_fixture("v9_txns_simple_nometa", tmp_path)
    _archive_oldest(root, 1)
    (root / ".hoodie/timeline/history/_version_").write_text("one")
    with pytest.raises(FailedPreconditionError, match="history/_version_"):
        read_snapshot(HoodieTable.open(str(root)), as_of="20260307162440000")


def _refused_in_one_line(
    root: Path, key: str, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    before = file_tree(root)
    for command in ("read", "show"):
        assert main([command, "--table", str(root)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1
        assert err[0].startswith(f"tidemark {command}: error: {key}: value {value!r}")
    assert file_tree(root) == before


def test_lance_base_files_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = unzip_fixture(LANCE, tmp_path)
    _refused_in_one_line(root, "hoodie.table.base.file.format", capsys, "LANCE")


@pytest.mark.parametrize("name", ["v8_nonpartitioned", "v9_txns_nonpart_nometa"])
def test_merge_on_read_reads_and_cleans(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cleaner handles merge-on-read tables (tests/table/test_table_mor_services.py);
    a change that does not still refuses them (test_table_mor_slices.py)."""
    root = unzip_fixture(name, tmp_path)
    set_property(root, "hoodie.table.type", "MERGE_ON_READ")
    before = file_tree(root)
    assert main(["read", "--table", str(root)]) == 0
    read = capsys.readouterr().out
    assert main(["clean", "--table", str(root)]) == 0
    assert "deleted 0 files" in capsys.readouterr().out
    assert file_tree(root) == before
    assert main(["read", "--table", str(root)]) == 0
    assert capsys.readouterr().out == read


def test_a_version_without_its_timeline_layout_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = unzip_fixture("v8_nonpartitioned", tmp_path)
    set_property(root, "hoodie.timeline.layout.version", "1")
    _refused_in_one_line(root, "hoodie.timeline.layout.version", capsys, "1")


@pytest.mark.parametrize(
    ("name", "key", "value", "message"),
    [
        ("v9_txns_simple_meta", None, None, "hoodie.table.index.defs.path: value "),
        (
            "v9_txns_simple_nometa",
            "hoodie.table.ordering.fields",
            "",
            "hoodie.record.merge.mode: value 'EVENT_TIME_ORDERING' needs an ordering field",
        ),
    ],
)
def test_writes_tidemark_cannot_honour_are_refused_in_one_line(
    name: str, key: str | None, value: str | None, message: str, tmp_path: Path
) -> None:
    """Hudi's secondary indexes (kept in its metadata table) are not maintained; event-time
    ordering needs the ordering field it orders by."""
    root = unzip_fixture(name, tmp_path)
    if key is not None and value is not None:
        set_property(root, key, value)
    table = HoodieTable.open(str(root))
    with pytest.raises(FailedPreconditionError) as refused:
        check_writable(table.config, disable_hudi_metadata_table=True)
    assert str(refused.value).startswith(message)


def test_show_lists_completion_times_and_read_travels_by_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = unzip_fixture("v8_simplekeygen_nonhivestyle", tmp_path)
    assert main(["show", "--table", str(root)]) == 0
    out = capsys.readouterr().out
    assert "table version: 8" in out
    assert "20250713011316909" in out and "20250713011317225" in out
    assert main(["read", "--table", str(root), "--as-of", "20250713011316231"]) == 0
    assert "3 rows" in capsys.readouterr().out
