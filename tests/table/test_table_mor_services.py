"""Cleaning, archival and orphan removal on the merge-on-read tables Apache Hudi wrote
(tests/fixtures/hudi-mor, table versions 6, 8 and 9): a slice goes whole (base and logs),
a slice a pending compaction needs stays, deltacommits are archived, log files of
rolled-back deltacommits are orphans; hudi-rs and Tidemark's reader read the same rows
before and after each."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from table.log_testkit import MOR_NAMES, log_paths
from table.table_testkit import hudi_rs_table
from tidemark.cli import main
from tidemark.errors import FailedPreconditionError
from tidemark.table import HoodieTable
from tidemark.table.files.file_names import join_path
from tidemark.table.files.reader import read_snapshot
from tidemark.table.logfiles.data_blocks import avro_records
from tidemark.table.logfiles.file_names import next_log_file_name, parse_log_file_name
from tidemark.table.logfiles.framing import HeaderKey, read_blocks, read_log_file, write_log_file
from tidemark.table.maintenance.archival import (
    ArchiveSettings,
    archive,
    oldest_to_keep_for_compaction,
)
from tidemark.table.maintenance.clean import clean
from tidemark.table.maintenance.clean_plan import CleanPolicy, CleanSettings
from tidemark.table.maintenance.orphans import find_orphans, remove_orphans
from tidemark.table.metadata.actions import CLEAN, COMMIT, COMPACTION, DELTA_COMMIT
from tidemark.table.metadata.avro import write_single_record
from tidemark.table.metadata.clean import CleanMetadata, CleanPlan
from tidemark.table.metadata.compaction import COMPACTION_PLAN_SCHEMA
from tidemark.table.plans.compaction import delta_commits_since_compaction
from tidemark.table.timeline.archived import ArchivedTimeline
from tidemark.table.timeline.instant import TIMELINE_FOLDERS, Instant, State, new_instant_time
from tidemark.table.timeline.lsm import LsmTimeline
from tidemark.table.writes.hudi_metadata_table import remove_hudi_metadata_table

COMPACTED = ["v8_trips_8i3u1d", "v9_txns_simple_meta", "v9_txns_simple_nometa"]
"""Tables with a completed compaction (or clustering): older slices to clean."""
KEEP_ONE = {
    CleanPolicy.KEEP_LATEST_COMMITS: CleanSettings(retain_commits=1),
    CleanPolicy.KEEP_LATEST_FILE_VERSIONS: CleanSettings(
        CleanPolicy.KEEP_LATEST_FILE_VERSIONS, retain_versions=1
    ),
}
SMALL_ARCHIVE = ArchiveSettings(keep_min=2, keep_max=3)
LOOSE_FOR_COMPACTION = ArchiveSettings(keep_min=1, keep_max=2, compaction_delta_commits=1)
"""Archival keeping only the last deltacommit for compaction's count (Hudi's
``hoodie.compact.inline.max.delta.commits=1``), so older deltacommits can go."""


def copy_of(mor_tables: Path, tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(mor_tables / name, root)
    return root


def cleanable_copy(mor_tables: Path, tmp_path: Path, name: str) -> Path:
    """A copy without Hudi's metadata table (a clean refuses one), removed as a write
    with --disable-hudi-metadata-table removes it."""
    root = copy_of(mor_tables, tmp_path, name)
    remove_hudi_metadata_table(HoodieTable.open(str(root)), disable=True)
    return root


def _rows(rows: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    return sorted(tuple(repr(row[c]) for c in sorted(row)) for row in rows)


def snapshot(root: Path) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """What hudi-rs reads and what Tidemark's ``read_snapshot`` reads."""
    theirs = _rows(hudi_rs_table(str(root)).to_pylist())
    ours = _rows(read_snapshot(HoodieTable.open(str(root))).to_pylist())
    return theirs, ours


def table_files(root: Path) -> set[str]:
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and ".hoodie" not in p.parts
    }


@pytest.mark.parametrize("policy", list(KEEP_ONE))
@pytest.mark.parametrize("name", MOR_NAMES)
def test_clean_and_archive_keep_every_row(
    mor_tables: Path, tmp_path: Path, name: str, policy: CleanPolicy
) -> None:
    root = copy_of(mor_tables, tmp_path, name)
    before = snapshot(root)
    remove_hudi_metadata_table(HoodieTable.open(str(root)), disable=True)
    table = HoodieTable.open(str(root))
    files_before = table_files(root)

    cleaned = clean(table, KEEP_ONE[policy])
    assert snapshot(root) == before
    deleted = {path for paths in cleaned.deleted.values() for path in paths}
    assert deleted == files_before - table_files(root)
    if name in COMPACTED:
        assert any("/." in path and ".log." in path for path in deleted), "no log cleaned"
        [instant] = table.timeline.completed(frozenset({CLEAN}))
        plan = CleanPlan.from_avro((root / instant.with_state(State.REQUESTED).path).read_bytes())
        metadata = CleanMetadata.from_avro((root / instant.path).read_bytes())
        recorded = {p for paths in metadata.deleted_by_partition.values() for p in paths}
        assert recorded == deleted == {p for ps in plan.files_by_partition.values() for p in ps}

    writes_before = [i.timestamp for i in table.timeline.completed() if i.action == DELTA_COMMIT]
    archived = archive(table, SMALL_ARCHIVE)
    assert snapshot(root) == before
    table = HoodieTable.open(str(root))
    moved = [i for i in writes_before if f"{i}.{DELTA_COMMIT}" in archived.archived]
    if len(writes_before) > SMALL_ARCHIVE.keep_max and name in COMPACTED:
        assert moved, "no deltacommit archived"
    folder = root / TIMELINE_FOLDERS[table.timeline.LAYOUT]
    for entry in archived.archived:  # every file of an archived instant left (a
        timestamp = entry.partition(".")[0]  # compaction's with its commit)
        assert not [p.name for p in folder.iterdir() if p.name.startswith(timestamp)]
    for timestamp in moved:
        assert not table.timeline.is_completed(timestamp)
        assert timestamp in table.archive.completed_writes()
        assert timestamp in table.archive.completed_deltacommits()


@pytest.mark.parametrize("name", ["v6_trips_8i1u", "v8_trips_8i3u1d"])
def test_a_latest_slices_log_whose_deltacommit_is_archived_still_reads(
    mor_tables: Path, tmp_path: Path, name: str
) -> None:
    root = cleanable_copy(mor_tables, tmp_path, name)
    before = snapshot(root)
    table = HoodieTable.open(str(root))
    last = table.timeline.completed()[-1]  # a deltacommit that appended to a latest slice
    assert last.action == DELTA_COMMIT
    _complete_deltacommit(root, table, new_instant_time(after=last.completed_at), last)
    result = archive(table, LOOSE_FOR_COMPACTION)
    assert f"{last.timestamp}.{DELTA_COMMIT}" in result.archived
    assert not HoodieTable.open(str(root)).timeline.is_completed(last.timestamp)
    assert snapshot(root) == before


def test_an_archived_compaction_takes_its_plan_along(mor_tables: Path, tmp_path: Path) -> None:
    root = cleanable_copy(mor_tables, tmp_path, "v8_trips_8i3u1d")
    table = HoodieTable.open(str(root))
    [compaction] = [i for i in table.timeline.completed() if i.action == COMMIT]
    requested = Instant(compaction.timestamp, COMPACTION, State.REQUESTED, layout=2)
    plan = (root / requested.path).read_bytes()
    clean(table, CleanSettings(retain_commits=1))
    result = archive(table, LOOSE_FOR_COMPACTION)
    assert f"{compaction.timestamp}.{COMMIT}" in result.archived
    assert not (root / requested.path).exists()
    assert isinstance(table.archive, LsmTimeline) and result.archive_file
    [row] = [
        i
        for i in table.archive.read_whole(result.archive_file)
        if i.timestamp == compaction.timestamp
    ]
    assert (row.action, row.plan) == (COMMIT, plan)
    reopened = HoodieTable.open(str(root))
    assert all(i.timestamp != compaction.timestamp for i in reopened.timeline.instants())


def test_a_clean_refuses_a_table_with_hudis_metadata_table(
    mor_tables: Path, tmp_path: Path
) -> None:
    root = copy_of(mor_tables, tmp_path, "v9_txns_simple_meta")
    before = snapshot(root)
    files = table_files(root)
    table = HoodieTable.open(str(root))
    with pytest.raises(FailedPreconditionError, match="metadata table") as refused:
        clean(table, CleanSettings(retain_commits=1))
    assert refused.value.field == "hoodie.table.metadata.partitions"
    assert table_files(root) == files
    assert snapshot(root) == before
    # a dry run only plans
    assert clean(table, CleanSettings(retain_commits=1), dry_run=True).deleted
    assert table_files(root) == files


def test_version_6_archive_records_a_deltacommit_with_its_log_files(
    mor_tables: Path, tmp_path: Path
) -> None:
    root = copy_of(mor_tables, tmp_path, "v6_trips_8i1u")
    before = snapshot(root)
    table = HoodieTable.open(str(root))
    [first, second] = table.timeline.completed()
    # two more deltacommits (copies of the update's metadata) so that one can be archived
    for _ in range(2):
        timestamp = new_instant_time(after=table.timeline.latest_timestamp())
        _complete_deltacommit(root, table, timestamp, copied_from=second)
    result = archive(table, LOOSE_FOR_COMPACTION)
    assert snapshot(root) == before
    [log] = log_paths(root)
    assert f"{first.timestamp}.{DELTA_COMMIT}" in result.archived
    assert f"{second.timestamp}.{DELTA_COMMIT}" in result.archived
    assert isinstance(table.archive, ArchivedTimeline)
    entries = [
        record
        for info in table.archive.files()
        for block in read_blocks((root / info.path).read_bytes())
        for record in avro_records(block)
    ]
    update = next(
        e
        for e in entries
        if e["commitTime"] == second.timestamp and e["actionState"] == "COMPLETED"
    )
    assert update["actionType"] == DELTA_COMMIT
    stats = update["hoodieCommitMetadata"]["partitionToWriteStats"]
    [stat] = [stat for partition_stats in stats.values() for stat in partition_stats]
    assert stat["logFiles"] == [log.name]
    assert stat["baseFile"]


def _schedule_compaction(root: Path, table: HoodieTable) -> str:
    """A pending compaction of every latest slice with logs, as Hudi schedules one: the
    plan in ``<t>.compaction.requested``; returns its instant."""
    operations: list[dict[str, Any]] = [
        {
            "baseInstantTime": s.base_instant,
            "deltaFilePaths": [log.path.rpartition("/")[2] for log in s.logs],
            "dataFilePath": s.base.path.rpartition("/")[2] if s.base else None,
            "fileId": s.file_id,
            "partitionPath": s.partition_path,
            "metrics": {},
            "bootstrapFilePath": None,
        }
        for s in table.view().latest_file_slices()
        if s.logs
    ]
    plan = {"operations": operations, "extraMetadata": {}, "version": 2}
    timestamp = new_instant_time(after=table.timeline.latest_timestamp())
    requested = Instant(timestamp, COMPACTION, State.REQUESTED, layout=table.timeline.LAYOUT)
    (root / requested.path).write_bytes(write_single_record(COMPACTION_PLAN_SCHEMA, plan))
    table.timeline.reload()
    return timestamp


@pytest.mark.parametrize("policy", list(KEEP_ONE))
def test_a_slice_a_pending_compaction_needs_is_kept(
    mor_tables: Path, tmp_path: Path, policy: CleanPolicy
) -> None:
    """Version 6: once a compaction is scheduled at C, the next deltacommit's log is
    named with C, a slice of its own after the one the compaction reads; retaining one
    commit (or one version) would delete the compaction's slice but for the plan."""
    root = copy_of(mor_tables, tmp_path, "v6_trips_8i1u")
    table = HoodieTable.open(str(root))
    [needed] = [s for s in table.view().latest_file_slices() if s.logs]
    compaction = _schedule_compaction(root, table)
    [update] = table.timeline.completed()[-1:]
    appended = new_instant_time(after=compaction)
    _copy_log(root, table, needed.logs[0].path, named=compaction, written_by=appended)
    _complete_deltacommit(root, table, appended, copied_from=update)
    group = [s for s in table.view().file_slices() if s.file_id == needed.file_id]
    assert [s.base_instant for s in group] == [needed.base_instant, compaction]
    before = snapshot(root)

    cleaned = clean(table, KEEP_ONE[policy])
    assert cleaned.files_deleted == 0
    assert all((root / path).exists() for path in needed.paths)
    assert snapshot(root) == before

    # once the compaction is gone (rolled back), the slice it needed goes
    (root / f".hoodie/{compaction}.compaction.requested").unlink()
    cleaned = clean(table, KEEP_ONE[policy])
    assert {p for paths in cleaned.deleted.values() for p in paths} == set(needed.paths)


def _complete_deltacommit(
    root: Path, table: HoodieTable, timestamp: str, copied_from: Instant
) -> None:
    """A completed deltacommit at ``timestamp`` whose metadata is ``copied_from``'s."""
    table.timeline.create_requested(timestamp, DELTA_COMMIT)
    table.timeline.transition_inflight(timestamp, DELTA_COMMIT)
    table.timeline.complete(timestamp, DELTA_COMMIT, (root / copied_from.path).read_bytes())


def test_cleaning_counts_deltacommits_as_commits(mor_tables: Path, tmp_path: Path) -> None:
    root = cleanable_copy(mor_tables, tmp_path, "v8_trips_8i3u1d")
    table = HoodieTable.open(str(root))
    writes = [i for i in table.timeline.completed() if i.action in (COMMIT, DELTA_COMMIT)]
    # retaining as many commits as there are writes: nothing is old enough
    assert clean(table, CleanSettings(retain_commits=len(writes))).files_deleted == 0
    # one fewer: the earliest commit to retain is the second write, a deltacommit
    result = clean(table, CleanSettings(retain_commits=len(writes) - 1))
    assert (result.earliest_to_retain, result.files_deleted) == (writes[1].timestamp, 0)
    # from the compaction on: the slices before it are what a snapshot just before reads
    result = clean(table, CleanSettings(retain_commits=2))
    assert (result.earliest_to_retain, result.files_deleted) == (writes[-2].timestamp, 0)
    # from the last deltacommit on: the slices before the compaction go, base and logs
    result = clean(table, CleanSettings(retain_commits=1))
    assert result.earliest_to_retain == writes[-1].timestamp
    assert result.files_deleted == 7  # three base files, four log files


@pytest.mark.parametrize("name", ["v6_nonpartitioned_rollback", "v9_txns_simple_nometa"])
def test_orphan_removal_knows_log_files(mor_tables: Path, tmp_path: Path, name: str) -> None:
    root = copy_of(mor_tables, tmp_path, name)
    before = snapshot(root)
    table = HoodieTable.open(str(root))
    logs = {p.relative_to(root).as_posix() for p in log_paths(root)}
    orphans = find_orphans(table, grace_s=3600)
    if name == "v6_nonpartitioned_rollback":
        # the first log holds the rolled-back deltacommit's block only; the second the
        # rollback's command block, the third the next deltacommit's block
        assert [o.path for o in orphans] == [min(logs)]
    else:
        assert orphans == []
    # a log of a deltacommit that never completed (no instant names it) is an orphan
    model = sorted(logs)[-1]
    failed = "20200101000000000"
    # named as each version names logs: by the slice's base instant, or by the write's
    named = parse_log_file_name(model.rpartition("/")[2]).instant
    stray = _copy_log(
        root, table, model, named=named if table.timeline.LAYOUT == 1 else failed, written_by=failed
    )
    assert stray in {o.path for o in find_orphans(table, grace_s=3600)}
    remove_orphans(table, find_orphans(table, grace_s=3600))
    assert not (root / stray).exists()
    assert snapshot(root) == before
    assert find_orphans(table, grace_s=3600) == []


def _copy_log(root: Path, table: HoodieTable, model: str, *, named: str, written_by: str) -> str:
    """A copy of log file ``model`` as the next log of its file group named with
    ``named``, its blocks written by ``written_by``; returns its path."""
    partition, _, name = model.rpartition("/")
    file_id = parse_log_file_name(name).file_id
    existing = [path.name for path in (root / partition).iterdir()]
    copy = join_path(partition, next_log_file_name(existing, file_id, named, "0-9-9").name)
    blocks = [
        replace(block, header={**block.header, HeaderKey.INSTANT_TIME: written_by})
        for block in read_log_file(table.storage, model)
    ]
    write_log_file(table.storage, copy, blocks)
    return copy


@pytest.mark.parametrize("name", ["v6_trips_8i1u", "v8_trips_8i3u1d", "v9_txns_simple_nometa"])
def test_the_cli_cleans_and_archives_a_merge_on_read_table(
    mor_tables: Path, tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = cleanable_copy(mor_tables, tmp_path, name)
    before = snapshot(root)
    assert main(["clean", "--table", str(root), "--retain-commits", "1", "--json"]) == 0
    cleaned = json.loads(capsys.readouterr().out)
    assert main(["clean", "--table", str(root), "--orphans", "--json"]) == 0
    capsys.readouterr()
    assert (
        main(
            [
                "archive",
                "--table",
                str(root),
                "--keep-min-commits",
                "2",
                "--keep-max-commits",
                "3",
                "--retain-commits",
                "1",
                "--json",
            ]
        )
        == 0
    )
    archived = json.loads(capsys.readouterr().out)
    assert snapshot(root) == before
    if name != "v6_trips_8i1u":
        assert cleaned["files_deleted"] > 0
        assert archived["archived"]


def _add_deltacommits(root: Path, table: HoodieTable, count: int) -> list[str]:
    """``count`` completed deltacommits, copies of the last one's metadata."""
    model = table.timeline.completed(frozenset({DELTA_COMMIT}))[-1]
    added = []
    for _ in range(count):
        timestamp = new_instant_time(after=table.timeline.latest_timestamp())
        _complete_deltacommit(root, table, timestamp, copied_from=model)
        added.append(timestamp)
    return added


def test_archival_keeps_the_deltacommits_compaction_counts(
    mor_tables: Path, tmp_path: Path
) -> None:
    """Hudi's archiver on a merge-on-read table (``getOldestInstantToRetainForCompaction``):
    with fewer than N deltacommits since the last compaction, that compaction's commit and
    everything after it stay; with N or more, the latest N; the scheduler still counts
    enough of them to plan the next compaction."""
    root = cleanable_copy(mor_tables, tmp_path, "v8_trips_8i3u1d")
    table = HoodieTable.open(str(root))
    before = snapshot(root)
    [compaction] = table.timeline.completed(frozenset({COMMIT}))
    [after] = [
        i.timestamp
        for i in table.timeline.completed(frozenset({DELTA_COMMIT}))
        if i.timestamp > compaction.timestamp
    ]
    earlier = [
        i.timestamp for i in table.timeline.completed() if i.timestamp < compaction.timestamp
    ]
    deltas = [after, *_add_deltacommits(root, table, 2)]
    settings = ArchiveSettings(keep_min=1, keep_max=2, compaction_delta_commits=5)
    assert oldest_to_keep_for_compaction(table.timeline, 5) == compaction.timestamp

    result = archive(table, settings)
    assert [entry.partition(".")[0] for entry in result.archived] == earlier
    active = [i.timestamp for i in HoodieTable.open(str(root)).timeline.completed()]
    assert active == [compaction.timestamp, *deltas]
    assert snapshot(root) == before

    deltas += _add_deltacommits(root, table, 3)  # 6 since the compaction: the latest 5 stay
    assert oldest_to_keep_for_compaction(table.timeline, 5) == deltas[1]
    result = archive(table, settings)
    assert result.archived == [f"{compaction.timestamp}.{COMMIT}", f"{deltas[0]}.{DELTA_COMMIT}"]
    reopened = HoodieTable.open(str(root))
    assert [i.timestamp for i in reopened.timeline.completed()] == deltas[1:]
    assert delta_commits_since_compaction(reopened) == 5  # the trigger still fires
    assert snapshot(root) == before


def test_archival_keeps_a_pending_compaction_and_what_follows(
    mor_tables: Path, tmp_path: Path
) -> None:
    root = cleanable_copy(mor_tables, tmp_path, "v6_trips_8i1u")
    table = HoodieTable.open(str(root))
    first = [i.timestamp for i in table.timeline.completed()]
    pending = _schedule_compaction(root, table)
    later = _add_deltacommits(root, table, 3)
    assert oldest_to_keep_for_compaction(table.timeline, 1) == later[-1]
    result = archive(table, LOOSE_FOR_COMPACTION)
    assert [entry.partition(".")[0] for entry in result.archived] == first
    timeline = HoodieTable.open(str(root)).timeline
    assert [i.timestamp for i in timeline.instants()] == [pending, *later]


def test_tidemark_archive_takes_compactions_count(
    mor_tables: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = cleanable_copy(mor_tables, tmp_path, "v6_trips_8i1u")
    table = HoodieTable.open(str(root))
    first = [i.timestamp for i in table.timeline.completed()]
    _add_deltacommits(root, table, 3)  # 5 deltacommits, no compaction
    argv = ["archive", "--table", str(root), "--keep-min-commits", "2", "--keep-max-commits"]
    argv += ["3", "--retain-commits", "1", "--json"]
    assert main(argv) == 0  # Hudi's default N = 5: every deltacommit stays
    assert json.loads(capsys.readouterr().out)["archived"] == []
    assert main([*argv, "--compaction-delta-commits", "3"]) == 0
    archived = json.loads(capsys.readouterr().out)["archived"]
    assert archived == [f"{t}.{DELTA_COMMIT}" for t in first]
