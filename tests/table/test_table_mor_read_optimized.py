"""Hudi's read-optimized query (``query_type="read_optimized"``): each file group's latest
base file, its log files ignored, as hudi-rs reads in ``hoodie.read.use.read_optimized.mode``;
on a copy-on-write table, the snapshot. The merge-on-read tables Apache Hudi wrote
(tests/fixtures/hudi-mor) compared with hudi-rs, latest and ``as_of``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from table.log_testkit import log_paths
from table.table_testkit import FIXTURES, hudi_rs_read_optimized
from tidemark.errors import InvalidArgumentError
from tidemark.index.pruning import plan_snapshot
from tidemark.table import HoodieTable
from tidemark.table.files.query_types import READ_OPTIMIZED
from tidemark.table.files.reader import read_snapshot
from tidemark.table.records.keys import RECORD_KEY

TABLES = ["v6_trips_8i1u", "v8_trips_8i3u1d", "v9_txns_simple_nometa"]
V8_BEFORE_COMPACTION = "20251220210127601"
"""v8_trips_8i3u1d after its second update (a log), before the compaction."""
CHANGED_BY_LOGS = [
    ("v6_trips_8i1u", None),
    ("v8_trips_8i3u1d", None),
    ("v9_txns_simple_nometa", "20260307135839403"),
]
"""Tables and times (None: the latest) where logs change rows of the base files (the
latest v9_txns_simple_nometa is compacted and clustered: no logs)."""


def _rows(rows: pa.Table, columns: list[str]) -> list[tuple]:
    return sorted(tuple(map(repr, row.values())) for row in rows.select(columns).to_pylist())


def _columns(theirs: pa.Table) -> list[str]:
    return [RECORD_KEY, *(n for n in theirs.column_names if not n.startswith("_hoodie_"))]


def _fares(rows: pa.Table) -> dict[str, float]:
    return dict(zip(rows["rider"].to_pylist(), rows["fare"].to_pylist(), strict=True))


@pytest.mark.parametrize("name", TABLES)
def test_read_optimized_is_what_hudi_rs_reads(mor_tables: Path, name: str) -> None:
    uri = str(mor_tables / name)
    ours = read_snapshot(HoodieTable.open(uri), query_type=READ_OPTIMIZED)
    theirs = hudi_rs_read_optimized(uri)
    assert ours.num_rows > 0
    assert _rows(ours, _columns(theirs)) == _rows(theirs, _columns(theirs))


@pytest.mark.parametrize(("name", "as_of"), CHANGED_BY_LOGS)
def test_read_optimized_is_not_the_snapshot_where_logs_changed_rows(
    mor_tables: Path, name: str, as_of: str | None
) -> None:
    uri = str(mor_tables / name)
    table = HoodieTable.open(uri)
    ours = read_snapshot(table, as_of=as_of, query_type=READ_OPTIMIZED)
    theirs = hudi_rs_read_optimized(uri, as_of)
    columns = _columns(theirs)
    assert _rows(ours, columns) == _rows(theirs, columns)
    assert _rows(ours, columns) != _rows(read_snapshot(table, as_of=as_of), columns)


def test_a_read_optimized_plan_reads_every_latest_base_file_as_a_file(mor_tables: Path) -> None:
    table = HoodieTable.open(str(mor_tables / "v6_trips_8i1u"))
    assert [s.file_id for s in plan_snapshot(table).slices] == [
        "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0"
    ]
    plan = plan_snapshot(table, query_type=READ_OPTIMIZED)
    assert plan.slices == [] and plan.deltacommits == {}
    assert [f.path for f in plan.files] == [f.path for f in table.view().latest_base_files()]
    assert len(plan.files) == 3


def test_the_update_in_a_log_is_not_read(mor_tables: Path) -> None:
    """``UPDATE ... SET fare = 25.0 WHERE rider = 'rider-D'`` went to a log: the
    read-optimized query reads rider-D's inserted fare, and finds no row of fare 25.0."""
    table = HoodieTable.open(str(mor_tables / "v6_trips_8i1u"))
    assert _fares(read_snapshot(table))["rider-D"] == 25.0
    assert _fares(read_snapshot(table, query_type=READ_OPTIMIZED))["rider-D"] == 33.9
    updated = [("fare", "=", 25.0)]
    assert read_snapshot(table, filters=updated).num_rows == 1
    assert read_snapshot(table, filters=updated, query_type=READ_OPTIMIZED).num_rows == 0
    partition = read_snapshot(
        table, filters=[("city", "=", "san_francisco")], query_type=READ_OPTIMIZED
    )
    assert set(partition["city"].to_pylist()) == {"san_francisco"} and partition.num_rows == 4


def test_a_file_group_of_logs_only_has_no_rows(mor_tables: Path, tmp_path: Path) -> None:
    """The update's log copied under a new file id: a file group written only to a log,
    which the snapshot reads and the read-optimized query does not."""
    root = Path(shutil.copytree(mor_tables / "v6_trips_8i1u", tmp_path / "t"))
    (log,) = log_paths(root)
    file_id = "00000000-0000-0000-0000-000000000000-0"
    shutil.copy(log, log.with_name(log.name.replace(log.name[1:39], file_id)))
    table = HoodieTable.open(str(root))
    assert [s.base for s in plan_snapshot(table).slices if s.file_id == file_id] == [None]
    assert read_snapshot(table).num_rows == 9
    plan = plan_snapshot(table, query_type=READ_OPTIMIZED)
    assert file_id not in {f.file_id for f in plan.files} and len(plan.files) == 3
    assert read_snapshot(table, query_type=READ_OPTIMIZED).num_rows == 8


def test_as_of_reads_the_base_files_of_that_time(mor_tables: Path) -> None:
    """Before its compaction, v8_trips_8i3u1d's base files are its first inserts: the
    read-optimized query reads all eight riders as inserted, where the snapshot has
    updated two fares and deleted one rider."""
    uri = str(mor_tables / "v8_trips_8i3u1d")
    table = HoodieTable.open(uri)
    ours = read_snapshot(table, as_of=V8_BEFORE_COMPACTION, query_type=READ_OPTIMIZED)
    theirs = hudi_rs_read_optimized(uri, V8_BEFORE_COMPACTION)
    columns = _columns(theirs)
    assert _rows(ours, columns) == _rows(theirs, columns)
    assert len(_fares(ours)) == 8 and _fares(ours)["rider-A"] == 19.1
    assert read_snapshot(table, as_of=V8_BEFORE_COMPACTION).num_rows == 7
    planned = plan_snapshot(table, as_of=V8_BEFORE_COMPACTION, query_type=READ_OPTIMIZED)
    assert {f.instant for f in planned.files} == {"20251220210108078"}


def test_on_a_copy_on_write_table_it_is_the_snapshot() -> None:
    table = HoodieTable.open(str(FIXTURES / "v6_nonpartitioned"))
    snapshot = read_snapshot(table)
    assert snapshot.num_rows > 0
    assert read_snapshot(table, query_type=READ_OPTIMIZED).equals(snapshot)


def test_an_unknown_query_type_is_refused(mor_tables: Path) -> None:
    table = HoodieTable.open(str(mor_tables / "v6_trips_8i1u"))
    for read in (read_snapshot, plan_snapshot):
        with pytest.raises(InvalidArgumentError, match="snapshot, read_optimized") as refused:
            read(table, query_type="incremental")
        assert refused.value.field == "query_type"
