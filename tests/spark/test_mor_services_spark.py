"""The table services on merge-on-read tables Apache Hudi wrote (versions 6, 8 and 9): the
record index built from merged slices (a key a log deleted is not indexed), and clustering
of merged slices, after which hudi-rs and ``tidemark.spark.read`` read the rows they read
before and the replaced file groups are gone from the snapshot."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from table.log_testkit import MOR_FIXTURES
from table.table_testkit import set_property

import tidemark.spark
from spark.sparkkit import hudi_rs_table
from tidemark.errors import FailedPreconditionError
from tidemark.index.record_index import RecordIndex
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.files.view import FileSlice
from tidemark.table.leases.table_lock import changing
from tidemark.table.plans.clustering import (
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    SliceInfo,
    plan_of,
    save_plan,
)
from tidemark.table.records.keys import FILE_NAME, PARTITION_PATH, RECORD_KEY
from tidemark.table.writes.hudi_metadata_table import remove_hudi_metadata_table

pytestmark = pytest.mark.spark

INDEX_DEFS = "hoodie.table.index.defs.path"

INDEXED = ["v6_trips_8i3d", "v8_trips_8i3u1d", "v9_txns_simple_nometa"]
"""Version 9's slices with logs are in ``v9_timebasedkeygen_nonhivestyle`` only, which
holds a key in two file groups (Hudi's inserts allow it), so no index can be built."""
ONE_GROUP_PER_PARTITION = ["v8_trips_8i3u1d", "v9_timebasedkeygen_nonhivestyle"]
"""Tables whose slices with logs are alone in their partitions."""


def _copy(tmp_path: Path, name: str) -> str:
    """A private copy of fixture ``name`` without Hudi's metadata table (as a write with
    --disable-hudi-metadata-table leaves it: clustering refuses a table that has one) nor
    the definitions of the indexes that lived in it."""
    with zipfile.ZipFile(MOR_FIXTURES / f"{name}.zip") as archive:
        archive.extractall(tmp_path, [m for m in archive.namelist() if m.startswith(f"{name}/")])
    set_property(tmp_path / name, INDEX_DEFS, "")
    uri = str(tmp_path / name)
    table = HoodieTable.open(uri)
    with changing(table, "test", merge_on_read=True):
        remove_hudi_metadata_table(table, disable=True)
    return uri


def _sorted_rows(table: pa.Table | None, columns: list[str]) -> list[tuple]:
    assert table is not None
    return sorted(tuple(repr(row[c]) for c in columns) for row in table.select(columns).to_pylist())


def _data_columns(theirs: pa.Table) -> list[str]:
    return [RECORD_KEY, *(n for n in theirs.column_names if not n.startswith("_hoodie_"))]


def _keys_in_base_files(uri: str) -> set[str]:
    """Every key any base file of the table holds (deleted ones included)."""
    return {
        key
        for path in Path(uri).rglob("*.parquet")
        if ".hoodie" not in path.parts
        for key in pq.read_table(path, columns=[RECORD_KEY]).column(RECORD_KEY).to_pylist()
    }


def _file_groups_read(rows: pa.Table) -> set[str]:
    """The file ids hudi-rs's rows say they come from (``<fileId>_<token>_<instant>``)."""
    return {name.split("_")[0] for name in rows.column(FILE_NAME).to_pylist()}


@pytest.mark.parametrize("name", INDEXED)
def test_the_index_holds_the_merged_snapshots_keys_and_no_deleted_key(
    spark: SparkSession, tmp_path: Path, name: str
) -> None:
    uri = _copy(tmp_path, name)
    theirs = hudi_rs_table(uri)
    assert theirs is not None
    live = set(theirs.column(RECORD_KEY).to_pylist())
    deleted = _keys_in_base_files(uri) - live
    assert deleted, "the fixture deleted keys its base files held"

    tidemark.spark.index_build(spark, uri)

    located = RecordIndex.open(open_storage(uri)).lookup(pa.array(sorted(live | deleted)))
    found_in = {row["key"]: row["partition"] for row in located.to_pylist() if row["file_id"]}
    partitions = theirs.column(PARTITION_PATH).to_pylist()
    assert found_in == dict(zip(theirs.column(RECORD_KEY).to_pylist(), partitions, strict=True))
    found = tidemark.spark.lookup(spark, uri, sorted(live | deleted)).toArrow()
    columns = _data_columns(theirs)
    assert _sorted_rows(found, columns) == _sorted_rows(theirs, columns)


def _plan_at(uri: str, instant: str) -> ClusteringPlan:
    table = HoodieTable.open(uri)
    plan = plan_of(table, table.timeline.find(instant))
    assert plan is not None
    return plan


def _scheduled_with_logs(uri: str) -> tuple[str, ClusteringPlan]:
    """The plan the planner schedules, which names a slice with log files."""
    instant = tidemark.spark.cluster_schedule(uri)
    assert instant is not None
    plan = _plan_at(uri, instant)
    assert any(piece.logs for group in plan.groups for piece in group.slices)
    return instant, plan


def _run_and_compare(spark: SparkSession, uri: str, instant: str) -> None:
    """Run plan ``instant``; hudi-rs and ``tidemark.spark.read`` read what they read
    before, and none of the plan's file groups is in the snapshot."""
    theirs = hudi_rs_table(uri)
    assert theirs is not None
    columns = _data_columns(theirs)
    before = _sorted_rows(theirs, columns)
    assert _sorted_rows(tidemark.spark.read(spark, uri).toArrow(), columns) == before
    replaced = {file_id for _, file_id in _plan_at(uri, instant).file_groups()}

    results = tidemark.spark.cluster_run(spark, uri, instant)

    assert [r.instant for r in results] == [instant]
    after = hudi_rs_table(uri)
    assert _sorted_rows(after, columns) == before
    assert _sorted_rows(tidemark.spark.read(spark, uri).toArrow(), columns) == before
    assert after is not None and not _file_groups_read(after) & replaced
    live = HoodieTable.open(uri).view().latest_file_slices()
    assert not {s.file_id for s in live} & replaced


def test_a_scheduled_plan_clusters_merged_slices(spark: SparkSession, tmp_path: Path) -> None:
    """Version 6's non-partitioned table: two file groups, one with a Parquet-block log."""
    uri = _copy(tmp_path, "v6_nonpartitioned")
    instant, _ = _scheduled_with_logs(uri)
    _run_and_compare(spark, uri, instant)


def _slice_info(piece: FileSlice) -> SliceInfo:
    assert piece.base is not None
    log_bytes = sum(log.size for log in piece.logs)
    return SliceInfo(
        piece.partition_path,
        piece.file_id,
        piece.base.path,
        piece.base.size + log_bytes,
        tuple(log.path for log in piece.logs),
        log_bytes,
    )


@pytest.mark.parametrize("name", ONE_GROUP_PER_PARTITION)
def test_a_plan_of_one_slice_per_group_rewrites_its_merged_rows(
    spark: SparkSession, tmp_path: Path, name: str
) -> None:
    """These tables' slices with logs are alone in their partitions, which the planner
    leaves alone (a group of one gains nothing); a plan naming each, as Hudi's sort
    clustering can, rewrites them with their logs' updates and deletes."""
    uri = _copy(tmp_path, name)
    table = HoodieTable.open(uri)
    slices = table.view().latest_file_slices()
    assert any(piece.logs for piece in slices)
    strategy = ClusteringStrategy(sort_columns=(), layout="linear", target_file_bytes=1 << 30)
    plan = ClusteringPlan(tuple(ClusteringGroup((_slice_info(s),), 1) for s in slices), strategy)
    with changing(table, "test", merge_on_read=True):
        instant = save_plan(table, plan).timestamp
    saved = _plan_at(uri, instant)
    assert {p.logs for g in saved.groups for p in g.slices} == {
        p.logs for g in plan.groups for p in g.slices
    }
    _run_and_compare(spark, uri, instant)


def test_a_plan_whose_slice_changed_its_logs_is_stale(spark: SparkSession, tmp_path: Path) -> None:
    """A slice whose log files changed since the plan was made would lose what the new
    log holds: the run refuses the plan."""
    uri = _copy(tmp_path, "v6_nonpartitioned")
    instant, plan = _scheduled_with_logs(uri)
    piece = next(p for g in plan.groups for p in g.slices if p.logs)
    dropped = Path(uri) / piece.logs[-1]
    dropped.unlink()  # the slice no longer has the logs the plan named
    with pytest.raises(FailedPreconditionError) as stale:
        tidemark.spark.cluster_run(spark, uri, instant)
    assert stale.value.field == "instant"
    assert "stale" in stale.value.message
    assert _plan_at(uri, instant) == plan  # still pending
