"""Commit completion (reconcile) and rollback of failed writes, checked with hudi-rs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from table.table_testkit import FIXTURES, Writer, hudi_rs_rows, people_config, rows, sorted_rows
from tidemark.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from tidemark.storage.local import TEMP_MARKER
from tidemark.table import HoodieTable
from tidemark.table.files.reader import read_snapshot
from tidemark.table.metadata.actions import COMMIT, ROLLBACK
from tidemark.table.metadata.commit import CommitMetadata
from tidemark.table.metadata.rollback import RollbackMetadata
from tidemark.table.timeline.instant import State
from tidemark.table.timeline.layout1 import Timeline
from tidemark.table.writes.commit import delete_stale_marker_dirs, rollback, rollback_failed_writes
from tidemark.table.writes.markers import StorageMarkerReader, marker_dir

FIRST = rows((1, "ann", "eu", 1.0), (2, "bob", "us", 2.0))


def _data_files(writer: Writer) -> set[str]:
    return {
        info.path
        for info in writer.table.storage.list("")
        if info.path.endswith(".parquet") and not info.path.startswith(".hoodie/")
    }


def test_reconcile_deletes_files_of_failed_attempts_direct_markers(people: Writer) -> None:
    instant = people.begin()
    failed_attempt = people.write_files(instant, FIRST, attempt=0)
    winning = people.write_files(instant, FIRST, attempt=1)
    assert {s.path for s in failed_attempt} <= _data_files(people)
    deleted = people.finish(instant, winning)
    assert sorted(deleted) == sorted(s.path for s in failed_attempt)
    assert _data_files(people) == {s.path for s in winning}
    assert not list(people.table.storage.list(marker_dir(instant) + "/"))
    assert sorted_rows(read_snapshot(HoodieTable.open(people.table.uri))) == hudi_rs_rows(
        people.table.uri
    )
    assert people.table.storage.exists("eu/.hoodie_partition_metadata")


def test_reconcile_with_timeline_server_marker_files(people: Writer) -> None:
    instant = people.begin()
    stray = people.write_files(instant, FIRST, attempt=0)
    storage = people.table.storage
    storage.delete_prefix(marker_dir(instant) + "/")
    winning = people.write_files(instant, FIRST, attempt=1)
    names = {
        info.path.split(marker_dir(instant) + "/")[1]
        for info in storage.list(marker_dir(instant) + "/")
    }
    storage.delete_prefix(marker_dir(instant) + "/")
    stray_names = {f"{s.partition_path}/{s.path.rpartition('/')[2]}.marker.CREATE" for s in stray}
    storage.write(f"{marker_dir(instant)}/MARKERS.type", b"TIMELINE_SERVER_BASED")
    storage.write(f"{marker_dir(instant)}/MARKERS0", "\n".join(sorted(names)).encode())
    storage.write(f"{marker_dir(instant)}/MARKERS1", "\n".join(sorted(stray_names)).encode())
    people.finish(instant, winning)
    assert _data_files(people) == {s.path for s in winning}
    assert not list(storage.list(marker_dir(instant) + "/"))


def test_commit_rejects_stats_of_other_instants(people: Writer) -> None:
    first = people.commit(FIRST)
    instant = people.begin()
    old_stats = people.table.timeline.read_metadata(people.table.timeline.find(first)).write_stats
    with pytest.raises(InvalidArgumentError) as error:
        people.finish(instant, old_stats)
    assert error.value.field == "write_stats"
    assert not people.table.timeline.is_completed(instant)


def test_failed_write_is_invisible_then_rolled_back(people: Writer) -> None:
    people.commit(FIRST)
    before = sorted_rows(read_snapshot(HoodieTable.open(people.table.uri)))
    instant = people.begin()
    failed = people.write_files(instant, rows((1, "ann", "eu", 99.0), (3, "cid", "asia", 3.0)))
    assert sorted_rows(read_snapshot(HoodieTable.open(people.table.uri))) == before
    assert hudi_rs_rows(people.table.uri) == before

    result = rollback(people.table, instant, StorageMarkerReader(people.table.storage))
    assert sorted(result.deleted_files) == sorted(s.path for s in failed)
    assert not _data_files(people) & {s.path for s in failed}
    timeline = Timeline(people.table.storage)
    assert [i.timestamp for i in timeline.instants() if i.timestamp == instant] == []
    rollback_instant = timeline.find(result.rollback_instant)
    assert rollback_instant.action == ROLLBACK and rollback_instant.state is State.COMPLETED
    metadata = RollbackMetadata.from_avro(people.table.storage.read(rollback_instant.path))
    assert [info.commit_time for info in metadata.instants_rollback] == [instant]
    assert metadata.total_files_deleted == len(failed)
    assert not list(people.table.storage.list(marker_dir(instant) + "/"))
    assert hudi_rs_rows(people.table.uri) == before
    people.commit(rows((5, "eve", "us", 5.0)))
    assert sorted_rows(read_snapshot(HoodieTable.open(people.table.uri))) == hudi_rs_rows(
        people.table.uri
    )
    assert len(hudi_rs_rows(people.table.uri)) == 3


def test_rollback_without_markers_finds_files_of_the_instant(people: Writer) -> None:
    people.commit(FIRST)
    instant = people.begin()
    failed = people.write_files(instant, rows((3, "cid", "asia", 3.0)))
    people.table.storage.delete_prefix(marker_dir(instant) + "/")
    result = rollback(people.table, instant, StorageMarkerReader(people.table.storage))
    assert result.deleted_files == [s.path for s in failed]


def _leave_temporary(writer: Writer, path: str) -> str:
    """What a task killed while writing ``path`` leaves on local disk."""
    partition, _, name = path.rpartition("/")
    temporary = f"{partition}/.{name}{TEMP_MARKER}0123abcd"
    (Path(writer.table.uri) / temporary).write_bytes(b"PAR1 partial")
    return temporary


def _temporaries(writer: Writer) -> list[str]:
    return sorted(p.name for p in Path(writer.table.uri).rglob(f"*{TEMP_MARKER}*"))


def test_rollback_and_reconcile_delete_temporaries_of_killed_tasks(people: Writer) -> None:
    committed = people.commit(FIRST)
    kept = _leave_temporary(people, f"eu/f-0_0-1-0_{committed}.parquet")
    failed = people.begin()
    stats = people.write_files(failed, FIRST)
    _leave_temporary(people, stats[0].path.replace("_0-1-0_", "_0-1-7_"))
    rollback(people.table, failed, StorageMarkerReader(people.table.storage))
    assert _temporaries(people) == [kept.rpartition("/")[2]]
    instant = people.begin()
    failed_attempt = people.write_files(instant, FIRST, attempt=0)
    _leave_temporary(people, failed_attempt[0].path)
    people.finish(instant, people.write_files(instant, FIRST, attempt=1))
    assert _temporaries(people) == [kept.rpartition("/")[2]]


def test_next_write_removes_files_a_rolled_back_write_published_late(people: Writer) -> None:
    """A writer that lost its lock kept writing after its rollback: one late file has a
    marker in a recreated marker dir, the other (marker lost) is found by its name in a
    partition the rollback named."""
    people.commit(FIRST)
    before = sorted_rows(read_snapshot(HoodieTable.open(people.table.uri)))
    failed = people.begin()
    people.write_files(failed, rows((3, "cid", "asia", 3.0)))
    markers = StorageMarkerReader(people.table.storage)
    rollback(people.table, failed, markers)
    late = people.write_files(
        failed, rows((3, "cid", "asia", 3.0), (4, "dan", "us", 4.0)), attempt=1
    )
    _leave_temporary(people, late[0].path.replace("_1-1-1_", "_1-1-2_"))
    asia = next(s for s in late if s.partition_path == "asia")
    people.table.storage.delete(f"{marker_dir(failed)}/{asia.path}.marker.CREATE")
    assert {s.path for s in late} <= _data_files(people)
    assert sorted_rows(read_snapshot(HoodieTable.open(people.table.uri))) == before
    assert rollback_failed_writes(people.table, markers, lock_held=True) == []
    delete_stale_marker_dirs(people.table)
    assert not any(failed in path for path in _data_files(people))
    assert _temporaries(people) == []
    assert not list(people.table.storage.list(".hoodie/.temp/"))
    assert sorted_rows(read_snapshot(HoodieTable.open(people.table.uri))) == hudi_rs_rows(
        people.table.uri
    )


def test_rollback_failed_writes_under_lock(people: Writer) -> None:
    people.commit(FIRST)
    failed = people.begin()
    people.write_files(failed, rows((3, "cid", "asia", 3.0)))
    current = people.begin()
    markers = StorageMarkerReader(people.table.storage)
    with pytest.raises(FailedPreconditionError) as not_locked:
        rollback_failed_writes(people.table, markers, lock_held=False)
    assert not_locked.value.field == "lock"
    results = rollback_failed_writes(people.table, markers, lock_held=True, exclude={current})
    assert [r.rolled_back.timestamp for r in results] == [failed]
    assert [i.timestamp for i in people.table.timeline.pending()] == [current]
    people.finish(current, people.write_files(current, rows((4, "dan", "us", 4.0))))
    assert [r["id"] for r in hudi_rs_rows(people.table.uri)] == [1, 2, 4]


def test_scheduled_clustering_plan_is_not_rolled_back(people: Writer) -> None:
    people.commit(FIRST)
    plan = people.begin()
    people.table.storage.delete(f".hoodie/{plan}.inflight")
    people.table.storage.delete(f".hoodie/{plan}.commit.requested")
    people.table.storage.write(f".hoodie/{plan}.replacecommit.requested", b"plan-bytes")
    people.table.timeline.reload()
    assert (
        rollback_failed_writes(people.table, StorageMarkerReader(people.table.storage), True) == []
    )
    assert people.table.storage.exists(f".hoodie/{plan}.replacecommit.requested")


def test_rollback_refusals(people: Writer) -> None:
    done = people.commit(FIRST)
    markers = StorageMarkerReader(people.table.storage)
    with pytest.raises(FailedPreconditionError) as completed:
        rollback(people.table, done, markers)
    assert completed.value.field == "instant"
    with pytest.raises(NotFoundError):
        rollback(people.table, "20200101000000000", markers)
    with pytest.raises(InvalidArgumentError):
        rollback(people.table, "latest", markers)
    assert [i.action for i in people.table.timeline.instants()] == [COMMIT]


def test_commit_metadata_round_trips_hudi_json() -> None:
    path = (
        FIXTURES
        / "v6_simplekeygen_nonhivestyle_overwritetable"
        / ".hoodie"
        / "20240707001303088.replacecommit"
    )
    original = json.loads(path.read_bytes())
    metadata = CommitMetadata.from_json(path.read_bytes())
    assert metadata.operation_type == "INSERT_OVERWRITE_TABLE"
    again = json.loads(metadata.to_json())
    assert again["partitionToReplaceFileIds"] == original["partitionToReplaceFileIds"]
    assert again["extraMetadata"] == original["extraMetadata"]
    stat, original_stat = (
        again["partitionToWriteStats"]["30"][0],
        original["partitionToWriteStats"]["30"][0],
    )
    assert set(stat) == set(original_stat)
    assert {k: v for k, v in stat.items() if k != "runtimeStats"} == {
        k: v for k, v in original_stat.items() if k != "runtimeStats"
    }
    with pytest.raises(InvalidArgumentError):
        CommitMetadata.from_json(b"{not json")
    assert CommitMetadata.from_json(b"").write_stats == []


def test_commit_reconcile_and_rollback_on_s3(s3_bucket: str) -> None:
    writer = Writer(HoodieTable.create(s3_bucket, people_config()))
    instant = writer.begin()
    stray = writer.write_files(instant, FIRST, attempt=0)
    winning = writer.write_files(instant, FIRST, attempt=1)
    assert sorted(writer.finish(instant, winning)) == sorted(s.path for s in stray)
    failed = writer.begin()
    writer.write_files(failed, rows((3, "cid", "asia", 3.0)))
    result = rollback(writer.table, failed, StorageMarkerReader(writer.table.storage))
    assert [p.rpartition("/")[0] for p in result.deleted_files] == ["asia"]
    assert _data_files(writer) == {s.path for s in winning}
    assert sorted(read_snapshot(HoodieTable.open(s3_bucket)).column("id").to_pylist()) == [1, 2]
