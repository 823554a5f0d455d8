"""Writes at table versions 8 and 9 (timeline layout 2), beside version 6: completion
times taken under the lock and moving forward, Avro commit metadata, the 1.x conflict
check; hudi-rs reads what the model expects after every step."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest

from table.table_testkit import Writer, hudi_rs_rows, people_config, rows, sorted_rows
from tidemark.cli import main
from tidemark.errors import ConflictError, FailedPreconditionError
from tidemark.table import HoodieTable
from tidemark.table.files.reader import read_snapshot
from tidemark.table.files.view import BaseFile
from tidemark.table.leases.storage_lease import StorageLease
from tidemark.table.metadata.actions import REPLACE_COMMIT
from tidemark.table.metadata.commit import CommitMetadata
from tidemark.table.plans.clustering import (
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    SliceInfo,
    pending_plans,
    plan_of,
    save_plan,
)
from tidemark.table.properties.config import read_properties
from tidemark.table.records.ordering import newer_than_stored
from tidemark.table.writes.commit import rollback, rollback_failed_writes
from tidemark.table.writes.markers import StorageMarkerReader
from tidemark.table.writes.pending_clustering import REJECT, ROLLBACK, GivenUp, PendingClustering

VERSIONS = [6, 8, 9]


def new_table(root: Path, version: int) -> Writer:
    config = dataclasses.replace(people_config(), table_version=version)
    return Writer(HoodieTable.create(str(root / f"people_v{version}"), config))


def data_rows(uri: str) -> list[tuple[int, str, str, float]]:
    return sorted(
        (r["id"], r["name"], r["region"], r["score"])
        for r in read_snapshot(HoodieTable.open(uri)).to_pylist()
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_commits_at_each_version_read_by_hudi_rs(version: int, tmp_path: Path) -> None:
    writer = new_table(tmp_path, version)
    uri = writer.table.uri
    writer.commit(rows((1, "Alice", "eu", 1.0), (2, "Bob", "us", 2.0), (3, "Carol", "eu", 3.0)))
    writer.commit(rows((1, "Alicia", "eu", 4.0), (4, "Diana", "us", 5.0)))
    model = [(1, "Alicia", "eu", 4.0), (2, "Bob", "us", 2.0), (3, "Carol", "eu", 3.0)]
    model.append((4, "Diana", "us", 5.0))
    assert data_rows(uri) == model
    assert sorted_rows(read_snapshot(HoodieTable.open(uri))) == hudi_rs_rows(uri)
    props = read_properties(HoodieTable.open(uri).storage)
    assert props["hoodie.table.version"] == str(version)
    assert props["hoodie.timeline.layout.version"] == ("1" if version == 6 else "2")


@pytest.mark.parametrize("version", [8, 9])
def test_layout_two_instants_carry_completion_times_and_avro(version: int, tmp_path: Path) -> None:
    writer = new_table(tmp_path, version)
    first = writer.commit(rows((1, "Alice", "eu", 1.0)))
    table = HoodieTable.open(writer.table.uri)
    (done,) = table.timeline.completed()
    assert done.timestamp == first and done.completion_time is not None
    assert done.completion_time > first
    folder = Path(writer.table.uri) / ".hoodie" / "timeline"
    names = sorted(path.name for path in folder.iterdir() if path.is_file())
    assert names == [
        f"{first}.commit.requested",
        f"{first}.inflight",
        f"{first}_{done.completion_time}.commit",
    ]
    with (folder / names[-1]).open("rb") as stream:
        reader = fastavro.reader(stream)
        assert isinstance(reader.writer_schema, dict)
        assert reader.writer_schema["name"] == "org.apache.hudi.avro.model.HoodieCommitMetadata"
        (record,) = list(reader)
    assert isinstance(record, dict) and record["operationType"] == "UPSERT"
    assert not (Path(writer.table.uri) / ".hoodie" / f"{first}.commit").exists()


def test_completion_time_is_after_every_time_any_writer_put_on_the_timeline(
    tmp_path: Path,
) -> None:
    """A starts, B starts later, A completes: A's completion time is after B's start."""
    first = new_table(tmp_path, 9)
    second = Writer(HoodieTable.open(first.table.uri))
    a = first.begin()
    b = second.begin()
    assert b > a
    first.finish(a, first.write_files(a, rows((1, "Alice", "eu", 1.0))))
    second.finish(b, second.write_files(b, rows((2, "Bob", "us", 2.0))))
    timeline = HoodieTable.open(first.table.uri).timeline
    done_a, done_b = timeline.find(a), timeline.find(b)
    assert done_a.completion_time is not None and done_b.completion_time is not None
    assert b < done_a.completion_time < done_b.completion_time
    assert timeline.last_completed() == done_b
    assert data_rows(first.table.uri) == [(1, "Alice", "eu", 1.0), (2, "Bob", "us", 2.0)]


def test_a_write_over_a_file_group_a_later_action_completed_is_refused(tmp_path: Path) -> None:
    """The 1.0 spec's conflict check: B completed after A started and wrote A's file group;
    A's completion is refused naming B, and the table keeps B's rows."""
    first = new_table(tmp_path, 8)
    uri = first.table.uri
    first.commit(rows((1, "Alice", "eu", 1.0)))
    second = Writer(HoodieTable.open(uri))
    a = first.begin()
    b = second.begin()
    stats_a = first.write_files(a, rows((1, "Alicia", "eu", 2.0)))
    second.finish(b, second.write_files(b, rows((1, "Ali", "eu", 3.0))))
    with pytest.raises(ConflictError, match=f"written by commit {b}, completed at") as refused:
        first.finish(a, stats_a)
    assert refused.value.field == "instant"
    assert not HoodieTable.open(uri).timeline.find(a).is_completed
    assert data_rows(uri) == [(1, "Ali", "eu", 3.0)]
    assert sorted_rows(read_snapshot(HoodieTable.open(uri))) == hudi_rs_rows(uri)


def test_writes_to_other_file_groups_complete_side_by_side(tmp_path: Path) -> None:
    first = new_table(tmp_path, 9)
    uri = first.table.uri
    second = Writer(HoodieTable.open(uri))
    a = first.begin()
    b = second.begin()
    stats_a = first.write_files(a, rows((1, "Alice", "eu", 1.0)))
    second.finish(b, second.write_files(b, rows((2, "Bob", "us", 2.0))))
    first.finish(a, stats_a)
    assert data_rows(uri) == [(1, "Alice", "eu", 1.0), (2, "Bob", "us", 2.0)]
    assert sorted_rows(read_snapshot(HoodieTable.open(uri))) == hudi_rs_rows(uri)


def planned_eu(tmp_path: Path, version: int) -> tuple[HoodieTable, BaseFile, ClusteringPlan]:
    """A table at ``version`` with file groups in "eu" and "us", and a plan of the "eu" one."""
    writer = new_table(tmp_path, version)
    writer.commit(rows((1, "Alice", "eu", 1.0), (2, "Bob", "us", 2.0)))
    table = HoodieTable.open(writer.table.uri)
    eu = next(f for f in table.view().latest_base_files() if f.partition_path == "eu")
    group = ClusteringGroup((SliceInfo(eu.partition_path, eu.file_id, eu.path, eu.size),), 1)
    return table, eu, ClusteringPlan((group,), ClusteringStrategy((), "linear", 1 << 30))


@pytest.mark.parametrize("version", VERSIONS)
def test_writers_honour_a_pending_plan_on_every_version(version: int, tmp_path: Path) -> None:
    """A plan saved in the version's clustering action (8 and 9: ``clustering``) is left
    alone by the rollback of failed writes, refused to an update of its file group, and
    rolled back (``--on-pending-clustering rollback``) with every file of it; an
    interrupted run of it is rolled back to the plan."""
    table, eu, plan = planned_eu(tmp_path, version)
    uri = table.uri
    touched = [(eu.partition_path, eu.file_id)]
    with StorageLease(table.storage, "test-writer") as lock:
        table.timeline.fence = lock
        planned = save_plan(table, plan)
        assert planned.action == ("replacecommit" if version == 6 else "clustering")
        assert rollback_failed_writes(table, StorageMarkerReader(table.storage), True) == []
        running = table.timeline.transition_inflight(planned.timestamp, planned.action)
        assert running.path == planned.path.replace(".requested", ".inflight")
        rollback(table, planned.timestamp, StorageMarkerReader(table.storage), keep_plan=True)
        (kept,) = pending_plans(table)  # an interrupted run goes back to its plan
        assert (kept.instant, kept.plan) == (planned, plan)
        pending = PendingClustering.load(table)
        assert pending.planned == {touched[0]: planned.timestamp}
        with pytest.raises(FailedPreconditionError, match=f"clustering plan {planned.timestamp}"):
            pending.resolve(touched, REJECT)
        assert pending.resolve(touched, ROLLBACK) == [GivenUp(planned.timestamp, 1, None)]
    table.timeline.reload()
    assert table.timeline.pending() == [] and pending_plans(table) == []
    assert not list((Path(uri) / ".hoodie").rglob(f"{planned.timestamp}.*"))
    assert sorted_rows(read_snapshot(HoodieTable.open(uri))) == hudi_rs_rows(uri)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_completed_clustering_keeps_its_plan_in_its_request(version: int, tmp_path: Path) -> None:
    """Completed as a replacecommit (8 and 9: ``<t>_<completion>.replacecommit``), the
    plan is still found (8 and 9: in ``<t>.clustering.requested``), by the timeline that
    completed it and by a fresh one, and no plan is pending; the reader drops the replaced
    file group (hudi-rs needs a real run's write stats: tests/spark/test_v1x_clustering)."""
    table, eu, plan = planned_eu(tmp_path, version)
    timeline = table.timeline
    replaced = CommitMetadata({}, "CLUSTER", {}, {eu.partition_path: [eu.file_id]})
    with StorageLease(table.storage, "test-runner") as lock:
        timeline.fence = lock
        planned = save_plan(table, plan)
        timeline.transition_inflight(planned.timestamp, planned.action)
        done = timeline.complete(
            planned.timestamp, REPLACE_COMMIT, timeline.encode_metadata(replaced, REPLACE_COMMIT)
        )
    if version == 6:
        assert done.path == f".hoodie/{planned.timestamp}.replacecommit"
    else:
        assert done.path == f".hoodie/timeline/{planned.timestamp}_{done.completion_time}" + (
            ".replacecommit"
        )
    assert timeline.requested(done).path == planned.path
    assert plan_of(table, done) == plan
    reopened = HoodieTable.open(table.uri)
    assert plan_of(reopened, reopened.timeline.find(planned.timestamp)) == plan
    assert pending_plans(reopened) == []
    assert data_rows(table.uri) == [(2, "Bob", "us", 2.0)]


@pytest.mark.parametrize("version", ["6", "8", "9"])
def test_create_takes_the_table_version(
    version: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "t"
    schema = '{"id": "int64", "name": "string"}'
    args = ["create", "--table", str(root), "--schema", schema, "--key", "id"]
    assert main([*args, "--table-version", version]) == 0
    assert f"(version {version}, COPY_ON_WRITE)" in capsys.readouterr().out
    props = read_properties(HoodieTable.open(str(root)).storage)
    assert props["hoodie.table.version"] == version
    assert (props.get("hoodie.table.initial.version") == version) == (version != "6")


def test_create_defaults_to_version_6_and_refuses_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = '{"id": "int64"}'
    args = ["create", "--schema", schema, "--key", "id"]
    assert main([*args, "--table", str(tmp_path / "a")]) == 0
    assert (
        read_properties(HoodieTable.open(str(tmp_path / "a")).storage)["hoodie.table.version"]
        == "6"
    )
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main([*args, "--table", str(tmp_path / "b"), "--table-version", "7"])
    assert "--table-version: invalid choice: 7" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("version", [8, 9])
def test_a_failed_write_rolls_back_on_the_version_timeline(version: int, tmp_path: Path) -> None:
    writer = new_table(tmp_path, version)
    uri = writer.table.uri
    writer.commit(rows((1, "Alice", "eu", 1.0)))
    failed = writer.begin()
    stats = writer.write_files(failed, rows((1, "Alicia", "eu", 2.0), (2, "Bob", "us", 2.0)))
    assert all((Path(uri) / stat.path).exists() for stat in stats)
    result = rollback(writer.table, failed, StorageMarkerReader(writer.table.storage))
    assert sorted(result.deleted_files) == sorted(stat.path for stat in stats)
    timeline = HoodieTable.open(uri).timeline
    done = timeline.find(result.rollback_instant)
    assert done.completion_time is not None and done.is_completed
    assert done.path.startswith(".hoodie/timeline/")
    ((_, metadata),) = timeline.rollbacks()
    assert [info.commit_time for info in metadata.instants_rollback] == [failed]
    assert failed not in {i.timestamp for i in timeline.instants()}
    assert data_rows(uri) == [(1, "Alice", "eu", 1.0)]
    assert sorted_rows(read_snapshot(HoodieTable.open(uri))) == hudi_rs_rows(uri)


def test_event_time_ordering_keeps_a_stored_record_that_orders_later() -> None:
    stored = pa.table({"_hoodie_record_key": ["1", "2", "3"], "score": [3.0, 5.0, 1.0]})
    incoming = pa.table(
        {"_hoodie_record_key": ["1", "2", "3", "9"], "score": [1.0, 5.0, None, 2.0]}
    )
    kept = newer_than_stored(
        incoming, stored, stored.column("_hoodie_record_key").combine_chunks(), people_config()
    )
    assert kept.column("_hoodie_record_key").to_pylist() == ["2", "3", "9"]
