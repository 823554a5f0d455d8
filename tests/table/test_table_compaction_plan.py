"""Compaction plans as Hudi encodes them (the plan inside the fixture v8_trips_8i3u1d decoded
and encoded again), their instants on both timeline layouts, and the scheduling rules:
the deltacommit threshold, file groups in pending plans or writes left out, the IO bound."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import fastavro
import pytest

from table.log_testkit import HUDI_COMPACTION, before_hudi_compaction, empty_deltacommit
from tidemark.cli import main
from tidemark.errors import ConflictError, FailedPreconditionError
from tidemark.table import HoodieTable
from tidemark.table.leases.table_lock import changing
from tidemark.table.metadata.actions import COMMIT, COMPACTION, DELTA_COMMIT
from tidemark.table.metadata.commit import COMPACT_OPERATION, CommitMetadata, WriteStat
from tidemark.table.plans.compaction import (
    TOTAL_IO_MB,
    CompactionPlan,
    ScheduleOptions,
    pending_compaction,
    pending_compactions,
    plan_compaction,
    plan_of,
    refuse_compacting,
    save_plan,
)
from tidemark.table.timeline.instant import State, new_instant_time

EVERY_DELTACOMMIT = ScheduleOptions(max_delta_commits=1)


def _records(data: bytes) -> list[Any]:
    return list(fastavro.reader(io.BytesIO(data)))


def test_hudis_plan_decodes_and_encodes_to_the_same_record(mor_tables: Path) -> None:
    data = (
        mor_tables / "v8_trips_8i3u1d" / ".hoodie" / "timeline" / f"{HUDI_COMPACTION}"
        ".compaction.requested"
    ).read_bytes()
    plan = CompactionPlan.from_avro(data)
    assert plan.version == 2
    assert len(plan.operations) == 3
    chennai = next(op for op in plan.operations if op.partition_path == "city=chennai")
    assert chennai.base_instant == "20251220210108078"
    assert chennai.base_path == (
        "city=chennai/6e1d5cc4-c487-487d-abbe-fe9b30b1c0cc-0_2-986-2794_20251220210108078.parquet"
    )
    assert len(chennai.log_paths) == 2
    assert chennai.metrics["TOTAL_LOG_FILES_SIZE"] == 2117.0
    assert _records(plan.to_avro()) == _records(data)
    assert CompactionPlan.from_avro(plan.to_avro()) == plan


def test_hudis_completed_compaction_is_a_commit_with_its_plan(mor_tables: Path) -> None:
    table = HoodieTable.open(str(mor_tables / "v8_trips_8i3u1d"))
    instant = table.timeline.find(HUDI_COMPACTION)
    assert (instant.action, instant.state) == (COMMIT, State.COMPLETED)
    assert table.timeline.read_metadata(instant).operation_type == COMPACT_OPERATION
    assert len(plan_of(table, instant).operations) == 3
    assert pending_compactions(table) == []
    with pytest.raises(FailedPreconditionError, match="completed compaction") as refused:
        pending_compaction(table, HUDI_COMPACTION)
    assert refused.value.field == "instant"


def test_scheduling_plans_what_hudi_planned(mor_tables: Path, tmp_path: Path) -> None:
    """Every file group with logs, each slice's base and log file names as Hudi's plan."""
    table = before_hudi_compaction(mor_tables, tmp_path)
    hudi = CompactionPlan.from_avro(
        (
            mor_tables / "v8_trips_8i3u1d" / ".hoodie" / "timeline" / f"{HUDI_COMPACTION}"
            ".compaction.requested"
        ).read_bytes()
    )
    ours = plan_compaction(table, EVERY_DELTACOMMIT)
    assert ours is not None

    def slices(plan: CompactionPlan) -> set[tuple]:
        return {
            (op.partition_path, op.file_id, op.base_instant, op.data_file, frozenset(op.log_files))
            for op in plan.operations
        }

    assert slices(ours) == slices(hudi)


@pytest.mark.parametrize("name", ["v6_trips_8i1u", "v8_trips_8i3u1d"])
def test_a_plans_instants_on_either_layout(mor_tables: Path, tmp_path: Path, name: str) -> None:
    """requested and inflight as ``compaction``, completed as ``commit``: layout 1 in
    ``.hoodie/``, layout 2 in ``.hoodie/timeline/`` with the completion time."""
    root = shutil.copytree(mor_tables / name, tmp_path / name)
    table = HoodieTable.open(str(root))
    plan = plan_compaction(table, EVERY_DELTACOMMIT)
    assert plan is not None
    with changing(table, "compaction", merge_on_read=True):
        instant = save_plan(table, plan)
    folder = root / (".hoodie" if table.timeline.LAYOUT == 1 else ".hoodie/timeline")
    c = instant.timestamp
    assert (folder / f"{c}.compaction.requested").is_file()
    reopened = HoodieTable.open(str(root))
    assert [p.plan for p in pending_compactions(reopened)] == [plan]
    reopened.timeline.transition_inflight(c, COMPACTION)
    assert (folder / f"{c}.compaction.inflight").is_file()
    metadata = CommitMetadata.from_write_stats([], COMPACT_OPERATION, "")
    reopened.timeline.complete(c, COMMIT, reopened.timeline.encode_metadata(metadata, COMMIT))
    again = HoodieTable.open(str(root))
    done = again.timeline.find(c)
    assert (done.action, done.state) == (COMMIT, State.COMPLETED)
    assert (folder / done.file_name).is_file()
    assert done.file_name.endswith(".commit")
    assert pending_compactions(again) == []
    assert again.timeline.requested(done).action == COMPACTION
    assert plan_of(again, done) == plan
    assert again.timeline.read_metadata(done).is_compaction


def test_scheduling_waits_for_enough_deltacommits(mor_tables: Path, tmp_path: Path) -> None:
    table = before_hudi_compaction(mor_tables, tmp_path)
    deltacommits = len(table.timeline.completed(frozenset({DELTA_COMMIT})))
    assert plan_compaction(table, ScheduleOptions(max_delta_commits=deltacommits + 1)) is None
    assert plan_compaction(table, ScheduleOptions(max_delta_commits=deltacommits)) is not None
    after_hudis = HoodieTable.open(str(mor_tables / "v8_trips_8i3u1d"))
    assert plan_compaction(after_hudis) is None  # one deltacommit since, Hudi's default 5


def test_file_groups_of_pending_plans_are_never_planned_again(
    mor_tables: Path, tmp_path: Path
) -> None:
    table = before_hudi_compaction(mor_tables, tmp_path)
    first = plan_compaction(table, ScheduleOptions(max_delta_commits=1, target_io_mb=0.5))
    assert first is not None and len(first.operations) == 1
    with changing(table, "compaction", merge_on_read=True):
        save_plan(table, first)
        assert plan_compaction(table, EVERY_DELTACOMMIT) is None  # no deltacommit since
        empty_deltacommit(table)
        second = plan_compaction(table, EVERY_DELTACOMMIT)
        assert second is not None
        assert not first.file_groups() & second.file_groups()
        assert len(second.operations) == 2
        save_plan(table, second)
        empty_deltacommit(table)
        assert plan_compaction(table, EVERY_DELTACOMMIT) is None
        with pytest.raises(ConflictError, match="already in pending plan") as refused:
            save_plan(table, first)
    assert refused.value.field == "plan"


def test_groups_a_pending_write_names_are_not_planned(mor_tables: Path, tmp_path: Path) -> None:
    table = before_hudi_compaction(mor_tables, tmp_path)
    planned = plan_compaction(table, EVERY_DELTACOMMIT)
    assert planned is not None
    busy = planned.operations[0]
    writing = new_instant_time(after=table.timeline.latest_timestamp())
    log_name = f".{busy.file_id}_{writing}.log.1_0-1-0"
    stat = WriteStat(
        busy.file_id,
        f"{busy.partition_path}/{log_name}",
        busy.base_instant,
        1,
        0,
        1,
        0,
        0,
        0,
        busy.partition_path,
        log_version=1,
        log_offset=0,
        base_file=busy.data_file,
        log_files=(log_name,),
    )
    profile = CommitMetadata.from_write_stats([stat], "UPSERT", "")
    table.timeline.create_requested(writing, DELTA_COMMIT)
    table.timeline.transition_inflight(
        writing, DELTA_COMMIT, table.timeline.encode_metadata(profile, DELTA_COMMIT)
    )
    left = plan_compaction(table, EVERY_DELTACOMMIT)
    assert left is not None
    assert (busy.partition_path, busy.file_id) not in left.file_groups()
    assert len(left.operations) == len(planned.operations) - 1


def test_a_plans_io_is_bounded(mor_tables: Path, tmp_path: Path) -> None:
    """Largest logs first, until the operation that reaches the bound."""
    table = before_hudi_compaction(mor_tables, tmp_path)
    every = plan_compaction(table, EVERY_DELTACOMMIT)
    assert every is not None and len(every.operations) == 3
    ios = [op.metrics[TOTAL_IO_MB] for op in every.operations]
    sizes = [op.metrics["TOTAL_LOG_FILES_SIZE"] for op in every.operations]
    assert sizes == sorted(sizes, reverse=True)
    two = plan_compaction(table, ScheduleOptions(max_delta_commits=1, target_io_mb=ios[0] + 0.01))
    assert two is not None and two.operations == every.operations[:2]
    one = plan_compaction(table, ScheduleOptions(max_delta_commits=1, target_io_mb=0.01))
    assert one is not None and one.operations == every.operations[:1]


def test_version_6_writes_refuse_groups_in_a_pending_compaction(
    mor_tables: Path, tmp_path: Path
) -> None:
    root = shutil.copytree(mor_tables / "v6_trips_8i1u", tmp_path / "v6")
    table = HoodieTable.open(str(root))
    plan = plan_compaction(table, EVERY_DELTACOMMIT)
    assert plan is not None
    with changing(table, "compaction", merge_on_read=True):
        instant = save_plan(table, plan)
    group = next(iter(plan.file_groups()))
    with pytest.raises(ConflictError, match=f"pending compaction {instant.timestamp}") as refused:
        refuse_compacting(table, [group])
    assert refused.value.field == "compaction"
    refuse_compacting(table, [(group[0], "another-file-group")])


def test_the_cli_schedules_and_lists(
    mor_tables: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = str(before_hudi_compaction(mor_tables, tmp_path).uri)
    assert main(["compaction", "list", "--table", uri]) == 0
    assert capsys.readouterr().out.strip() == "no pending compaction"
    assert main(["compaction", "schedule", "--table", uri, "--max-delta-commits", "1"]) == 0
    instant = capsys.readouterr().out.strip().removeprefix("scheduled compaction ")
    assert main(["compaction", "list", "--table", uri, "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)["compactions"]
    assert (listed["instant"], listed["state"], listed["file_groups"]) == (
        instant,
        "requested",
        3,
    )
    assert main(["compaction", "schedule", "--table", uri, "--max-delta-commits", "0"]) == 2
    assert "max_delta_commits" in capsys.readouterr().err
