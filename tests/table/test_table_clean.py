"""The cleaner: Hudi's policies, its timeline instants in Hudi's Avro, and reads (hudi-rs,
time travel) before and after, on tables written with pyarrow."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastavro.schema import to_parsing_canonical_form

from table.table_testkit import Writer, hudi_rs_rows, people_config, rows, sorted_rows
from tidemark.errors import FailedPreconditionError, InvalidArgumentError
from tidemark.storage import open_storage
from tidemark.table import HoodieTable
from tidemark.table.files.reader import read_snapshot
from tidemark.table.leases.table_lock import changing
from tidemark.table.maintenance.clean import clean
from tidemark.table.maintenance.clean_plan import CleanPolicy, CleanSettings
from tidemark.table.metadata.actions import CLEAN
from tidemark.table.metadata.clean import (
    CLEAN_METADATA_SCHEMA,
    CLEANER_PLAN_SCHEMA,
    CleanMetadata,
    CleanPlan,
)
from tidemark.table.plans.clustering import (
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    SliceInfo,
    save_plan,
)
from tidemark.table.timeline.instant import Instant, State


def upserts(people: Writer, count: int, region: str = "eu") -> list[str]:
    return [people.commit(rows((1, f"v{n}", region, float(n)))) for n in range(count)]


def files_in(root: str, partition: str) -> list[str]:
    return sorted(p.name for p in Path(root, partition).glob("*.parquet"))


def test_keep_latest_commits_keeps_every_snapshot_from_the_earliest_commit_to_retain(
    people: Writer, table_uri: str
) -> None:
    first = people.commit(rows((1, "a", "eu", 0.0), (2, "b", "us", 0.0)))
    instants = [first, *upserts(people, 5)]
    snapshots = {
        i: sorted_rows(read_snapshot(HoodieTable.open(table_uri), as_of=i)) for i in instants[-4:]
    }
    before = hudi_rs_rows(table_uri)

    result = clean(HoodieTable.open(table_uri), CleanSettings(retain_commits=3))

    retain = instants[-3]
    assert result.earliest_to_retain == retain
    # eu: the slices from the earliest commit to retain on, and the one visible at it
    assert [name.rsplit("_", 1)[1][:17] for name in files_in(table_uri, "eu")] == instants[-4:]
    assert len(files_in(table_uri, "us")) == 1  # a group's latest slice stays
    assert hudi_rs_rows(table_uri) == before
    for instant, expected in snapshots.items():  # the write before retain's is whole too
        assert sorted_rows(read_snapshot(HoodieTable.open(table_uri), as_of=instant)) == expected
    with pytest.raises(
        FailedPreconditionError, match=f"earliest instant still readable is {instants[-4]}"
    ):
        read_snapshot(HoodieTable.open(table_uri), as_of=instants[-5])

    table = HoodieTable.open(table_uri)
    (done,) = table.timeline.completed(frozenset({CLEAN}))
    assert done.timestamp == result.instants[0]
    storage = open_storage(table_uri)
    metadata = CleanMetadata.from_avro(storage.read(done.path))
    assert metadata.earliest_commit_to_retain == retain
    assert metadata.policy == "KEEP_LATEST_COMMITS"
    assert sorted(metadata.deleted_by_partition["eu"]) == sorted(result.deleted["eu"])
    plan = CleanPlan.from_avro(storage.read(Instant(done.timestamp, CLEAN, State.REQUESTED).path))
    assert plan.earliest_to_retain is not None and plan.earliest_to_retain.timestamp == retain
    assert sorted(plan.files_by_partition["eu"]) == sorted(result.deleted["eu"])


def test_schemas_are_hudis() -> None:
    """Field order and types as hudi-common's avsc (canonical forms compared)."""
    assert '"name":"filePathsToBeDeletedPerPartition"' in to_parsing_canonical_form(
        CLEANER_PLAN_SCHEMA
    )
    canonical = to_parsing_canonical_form(CLEAN_METADATA_SCHEMA)
    fields = [
        "policy",
        "startCleanTime",
        "timeTakenInMillis",
        "totalFilesDeleted",
        "earliestCommitToRetain",
        "lastCompletedCommitTimestamp",
        "partitionMetadata",
    ]
    positions = [canonical.index(f'"name":"{name}"') for name in fields]
    assert positions == sorted(positions)


def test_nothing_to_clean_writes_no_instant(people: Writer, table_uri: str) -> None:
    upserts(people, 3)
    result = clean(HoodieTable.open(table_uri), CleanSettings(retain_commits=3))
    assert result.instants == [] and result.files_deleted == 0
    assert not HoodieTable.open(table_uri).timeline.completed(frozenset({CLEAN}))


def test_keep_latest_file_versions(people: Writer, table_uri: str) -> None:
    instants = upserts(people, 4)
    result = clean(
        HoodieTable.open(table_uri),
        CleanSettings(policy=CleanPolicy.KEEP_LATEST_FILE_VERSIONS, retain_versions=2),
    )
    assert len(files_in(table_uri, "eu")) == 2
    assert result.earliest_to_retain == instants[2]  # the oldest slice kept
    assert hudi_rs_rows(table_uri)[0]["name"] == "v3"


def test_keep_latest_by_hours_keeps_recent_commits(people: Writer, table_uri: str) -> None:
    upserts(people, 3)
    result = clean(
        HoodieTable.open(table_uri),
        CleanSettings(policy=CleanPolicy.KEEP_LATEST_BY_HOURS, retain_hours=1),
    )
    assert result.files_deleted == 0
    assert len(files_in(table_uri, "eu")) == 3


def test_second_clean_lists_only_partitions_written_since(people: Writer, table_uri: str) -> None:
    people.commit(rows((2, "b", "us", 0.0)))
    upserts(people, 4)
    table = HoodieTable.open(table_uri)
    clean(table, CleanSettings(retain_commits=2))
    upserts(people, 3)
    table = HoodieTable.open(table_uri)
    table.storage.requests.reset()
    result = clean(table, CleanSettings(retain_commits=2))
    assert result.files_deleted == 3
    listed = table.storage.requests.snapshot()
    # each of the two plans (optimistic, then under the lock) lists only eu, never us
    assert set(result.deleted) == {"eu"}
    assert len(files_in(table_uri, "us")) == 1
    assert listed.get("list", 0) < 20


def test_pending_clustering_files_are_never_cleaned(people: Writer, table_uri: str) -> None:
    upserts(people, 4)
    table = HoodieTable.open(table_uri)
    (latest,) = table.view().latest_base_files()
    group = ClusteringGroup((SliceInfo("eu", latest.file_id, latest.path, latest.size),), 1)
    with changing(table, "test"):
        save_plan(table, ClusteringPlan((group,), ClusteringStrategy((), "linear", 1)))
    before = files_in(table_uri, "eu")
    result = clean(HoodieTable.open(table_uri), CleanSettings(retain_commits=1))
    assert result.files_deleted == 0
    assert files_in(table_uri, "eu") == before


def test_savepoints_and_bad_settings_are_refused(people: Writer, table_uri: str) -> None:
    upserts(people, 3)
    with pytest.raises(InvalidArgumentError, match="retain_commits"):
        CleanSettings(retain_commits=0)
    with pytest.raises(InvalidArgumentError, match="unknown cleaner policy"):
        CleanSettings(policy="KEEP_NOTHING")  # type: ignore[arg-type]
    Path(table_uri, ".hoodie", "20200101000000000.savepoint").write_bytes(b"")
    with pytest.raises(FailedPreconditionError, match="savepoints"):
        clean(HoodieTable.open(table_uri), CleanSettings(retain_commits=1))
    assert len(files_in(table_uri, "eu")) == 3


@pytest.mark.parametrize("version", [8, 9])
def test_layout_two_counts_retained_commits_by_completion_time(
    version: int, table_uri: str
) -> None:
    """A requested before B, B completed first: the 2nd latest completed write is A, and
    a slice goes once a later slice completed before A did (by requested order it would
    be B, and us's first slice would stay)."""
    people = Writer(HoodieTable.create(table_uri, people_config(table_version=version)))
    first = people.commit(rows((1, "a", "eu", 0.0), (2, "b", "us", 0.0)))
    second = people.commit(rows((1, "a1", "eu", 1.0)))
    late, early = people.begin(), people.begin()
    people.finish(early, people.write_files(early, rows((2, "b2", "us", 2.0))))
    people.finish(late, people.write_files(late, rows((1, "a2", "eu", 2.0))))
    people.commit(rows((2, "b3", "us", 3.0)))
    table = HoodieTable.open(table_uri)
    done = {i.timestamp: i.completed_at for i in table.timeline.completed()}
    assert late < early and done[early] < done[late]
    at_late = sorted_rows(read_snapshot(HoodieTable.open(table_uri), as_of=done[late]))
    at_early = sorted_rows(read_snapshot(HoodieTable.open(table_uri), as_of=done[early]))
    before = hudi_rs_rows(table_uri)

    result = clean(table, CleanSettings(retain_commits=2))

    assert result.earliest_to_retain == late
    assert {
        p: [f.rsplit("_", 1)[1][:17] for f in files] for p, files in result.deleted.items()
    } == {
        "eu": [first],
        "us": [first],
    }
    assert hudi_rs_rows(table_uri) == before
    assert sorted_rows(read_snapshot(HoodieTable.open(table_uri), as_of=done[late])) == at_late
    # early completed just before late: every slice it shows was kept
    assert sorted_rows(read_snapshot(HoodieTable.open(table_uri), as_of=done[early])) == at_early
    with pytest.raises(FailedPreconditionError, match=f"still readable is {done[early]}"):
        read_snapshot(HoodieTable.open(table_uri), as_of=done[second])
    timeline = HoodieTable.open(table_uri).timeline
    (cleaned,) = timeline.completed(frozenset({CLEAN}))
    assert cleaned.path == f".hoodie/timeline/{cleaned.timestamp}_{cleaned.completion_time}.clean"
    requested, inflight = (cleaned.with_state(s).path for s in (State.REQUESTED, State.INFLIGHT))
    storage = open_storage(table_uri)
    assert CleanPlan.from_avro(storage.read(requested)).file_count == 2
    assert storage.read(inflight) == b""  # Hudi 1.x leaves the inflight clean empty
