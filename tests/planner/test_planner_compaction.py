"""Compaction through the planner service over real gRPC, on copies of merge-on-read
tables Hudi wrote: plans scheduled by Hudi's trigger strategies and slice filters, listed
and cancelled; a table's compaction policy followed by the trigger loop and kept in the
table; the backlog metrics; clustering leaving a pending compaction's groups alone; and
every bad field refused by name with the table unchanged."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from marker.conftest import metric
from table.log_testkit import before_hudi_compaction, empty_deltacommit

from planner.conftest import FAST_CLIENT, TEST_CONFIG, StartPlanner
from planner.plankit import hoodie_files
from tidemark.clients.planner import PlannerClient, plan_options
from tidemark.config import ServerConfig
from tidemark.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    TidemarkError,
)
from tidemark.proto.planner.v1 import planner_service_pb2 as pb
from tidemark.rpc.server import build_server
from tidemark.services.planner import planner_service
from tidemark.table import HoodieTable
from tidemark.table.leases.plan_run import run_lock
from tidemark.table.metadata.actions import COMPACTION
from tidemark.table.plans.compaction import pending_compactions
from tidemark.table.timeline.instant import instant_epoch_s

EVERY_DELTACOMMIT = pb.CompactionOptions(max_delta_commits=1)
TEN_YEARS_S = 10 * 365 * 86400
"""Longer than any fixture's age: a TIME_ELAPSED trigger never due in a test."""


@pytest.fixture
def v8(mor_tables: Path, tmp_path: Path) -> HoodieTable:
    """v8_trips_8i3u1d before Hudi compacted it: 5 deltacommits, no compaction, three
    partitions whose slices have logs (chennai 2 files of 2117 bytes, san_francisco 1 of
    1153, sao_paulo 1 of 978)."""
    return before_hudi_compaction(mor_tables, tmp_path)


def _groups(plan: pb.CompactionPlan) -> set[str]:
    return {op.partition_path for op in plan.operations}


def _wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 120.0) -> None:
    """Poll ``condition`` until it holds (the trigger loop runs in the service)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_schedule_list_cancel(planner: PlannerClient, v8: HoodieTable) -> None:
    response = planner.schedule_compaction(v8.uri, EVERY_DELTACOMMIT)
    plan = response.plan
    assert _groups(plan) == {"city=chennai", "city=san_francisco", "city=sao_paulo"}
    assert [op.log_bytes for op in plan.operations] == [2117, 1153, 978]
    assert (plan.state, plan.num_log_files, plan.log_bytes) == (
        pb.PLAN_STATE_REQUESTED,
        4,
        2117 + 1153 + 978,
    )
    [saved] = pending_compactions(HoodieTable.open(v8.uri))
    assert saved.timestamp == plan.instant_time
    assert {op.file_id for op in saved.plan.operations} == {op.file_id for op in plan.operations}
    assert [p.instant_time for p in planner.list_compactions(v8.uri)] == [plan.instant_time]
    again = planner.schedule_compaction(v8.uri, EVERY_DELTACOMMIT)
    assert not again.HasField("plan")
    assert "0 deltacommits since compaction" in again.reason
    cancelled = planner.cancel_compaction(v8.uri, plan.instant_time)
    assert cancelled.instant_time == plan.instant_time
    assert planner.list_compactions(v8.uri) == []
    assert not list(Path(v8.uri).rglob(f"{plan.instant_time}.compaction.*"))
    with pytest.raises(NotFoundError) as gone:
        planner.cancel_compaction(v8.uri, plan.instant_time)
    assert gone.value.field == "instant"


def test_trigger_strategies(planner: PlannerClient, v8: HoodieTable) -> None:
    """Hudi's four strategies over the fixture's 5 deltacommits, the first in 2025."""
    trigger = pb.CompactionTrigger
    cases = [
        (pb.CompactionOptions(max_delta_commits=6), False),
        (pb.CompactionOptions(max_delta_commits=5), True),
        (pb.CompactionOptions(trigger=trigger.COMPACTION_TRIGGER_TIME_ELAPSED), True),
        (
            pb.CompactionOptions(
                trigger=trigger.COMPACTION_TRIGGER_TIME_ELAPSED, max_delta_seconds=TEN_YEARS_S
            ),
            False,
        ),
        (
            pb.CompactionOptions(
                trigger=trigger.COMPACTION_TRIGGER_NUM_AND_TIME, max_delta_commits=6
            ),
            False,
        ),
        (
            pb.CompactionOptions(
                trigger=trigger.COMPACTION_TRIGGER_NUM_OR_TIME,
                max_delta_commits=6,
                max_delta_seconds=TEN_YEARS_S,
            ),
            False,
        ),
        (
            pb.CompactionOptions(
                trigger=trigger.COMPACTION_TRIGGER_NUM_OR_TIME, max_delta_commits=6
            ),
            True,
        ),
    ]
    for options, due in cases:
        response = planner.schedule_compaction(v8.uri, options)
        assert response.HasField("plan") == due, (options, response.reason)
        if due:
            planner.cancel_compaction(v8.uri, response.plan.instant_time)
        else:
            assert response.reason.startswith("no compaction due after")
    assert planner.list_compactions(v8.uri) == []


def test_slice_filters_and_the_io_bound(planner: PlannerClient, v8: HoodieTable) -> None:
    cases = [
        (pb.CompactionOptions(log_file_num_threshold=2), {"city=chennai"}),
        (
            pb.CompactionOptions(log_file_size_threshold_bytes=1000),
            {"city=chennai", "city=san_francisco"},
        ),
        (
            pb.CompactionOptions(
                partitions=pb.PartitionFilter(
                    list=pb.PartitionList(partition_paths=["city=sao_paulo"])
                )
            ),
            {"city=sao_paulo"},
        ),
        (
            pb.CompactionOptions(
                partitions=pb.PartitionFilter(recent=pb.RecentPartitions(count=1))
            ),
            {"city=sao_paulo"},
        ),
        (
            pb.CompactionOptions(partitions=pb.PartitionFilter(regex=".*o")),
            {"city=san_francisco", "city=sao_paulo"},
        ),
        (pb.CompactionOptions(target_io_mb=1), {"city=chennai", "city=san_francisco"}),
    ]
    for options, expected in cases:
        options.max_delta_commits = 1
        plan = planner.schedule_compaction(v8.uri, options).plan
        assert _groups(plan) == expected, options
        planner.cancel_compaction(v8.uri, plan.instant_time)
    nothing = planner.schedule_compaction(
        v8.uri, pb.CompactionOptions(max_delta_commits=1, log_file_num_threshold=3)
    )
    assert not nothing.HasField("plan")
    assert "no file slice to compact" in nothing.reason


def test_an_inflight_or_running_plan_is_not_cancelled(
    planner: PlannerClient, v8: HoodieTable
) -> None:
    first = planner.schedule_compaction(
        v8.uri, pb.CompactionOptions(max_delta_commits=1, target_io_mb=1)
    ).plan
    empty_deltacommit(v8)
    second = planner.schedule_compaction(v8.uri, EVERY_DELTACOMMIT).plan
    assert _groups(second) == {"city=sao_paulo"}
    v8.timeline.reload()
    v8.timeline.transition_inflight(first.instant_time, COMPACTION)
    with run_lock(v8.storage, second.instant_time, "a-runner", what="compaction"):
        before = hoodie_files(v8)
        for instant, says in [
            (first.instant_time, "is inflight"),
            (second.instant_time, "a-runner"),
        ]:
            with pytest.raises(FailedPreconditionError, match=says) as refused:
                planner.cancel_compaction(v8.uri, instant)
            assert refused.value.field == "instant"
        assert {p.instant_time for p in planner.list_compactions(v8.uri)} == {
            first.instant_time,
            second.instant_time,
        }
        assert hoodie_files(v8).keys() == before.keys()


def test_clustering_leaves_out_groups_in_a_pending_compaction(
    planner: PlannerClient, mor_tables: Path, tmp_path: Path
) -> None:
    """v6_nonpartitioned has two file groups, one with a log: clustering plans both until
    a compaction plans that one, then finds one file alone, too few to cluster."""
    root = shutil.copytree(mor_tables / "v6_nonpartitioned", tmp_path / "v6")
    uri = str(root)
    clustered = planner.schedule(uri, plan_options()).plan
    assert clustered.num_files == 2
    planner.cancel_plan(uri, clustered.instant_time)
    compaction = planner.schedule_compaction(uri, EVERY_DELTACOMMIT).plan
    assert len(compaction.operations) == 1
    response = planner.schedule(uri, plan_options())
    assert not response.HasField("plan")
    assert "1 of the 2 files" in response.reason
    planner.cancel_compaction(uri, compaction.instant_time)
    assert planner.schedule(uri, plan_options()).plan.num_files == 2


def test_a_policy_is_kept_in_the_table_and_followed(
    start_planner: StartPlanner, v8: HoodieTable
) -> None:
    first = start_planner()
    assert first.get_compaction_policy(v8.uri).WhichOneof("trigger") == "on_demand"
    policy = pb.CompactionPolicy(automatic=pb.CompactionOptions(max_delta_commits=6))
    saved = first.set_compaction_policy(v8.uri, policy)
    assert (saved.automatic.max_delta_commits, saved.automatic.max_delta_seconds) == (6, 3600)
    assert saved.automatic.target_io_mb == 500 * 1024
    second = start_planner()  # another process reads the policy from the table
    assert second.get_compaction_policy(v8.uri) == saved
    time.sleep(TEST_CONFIG.trigger_poll_s * 5)  # five polls with 5 deltacommits: none due
    assert pending_compactions(HoodieTable.open(v8.uri)) == []
    empty_deltacommit(v8)
    _wait_for(lambda: bool(pending_compactions(HoodieTable.open(v8.uri))), "a compaction")
    [scheduled] = pending_compactions(HoodieTable.open(v8.uri))
    assert len(scheduled.plan.operations) == 3
    cleared = second.set_compaction_policy(v8.uri, pb.CompactionPolicy(on_demand=pb.OnDemand()))
    assert cleared.WhichOneof("trigger") == "on_demand"
    assert first.get_compaction_policy(v8.uri).WhichOneof("trigger") == "on_demand"
    assert len(pending_compactions(HoodieTable.open(v8.uri))) == 1


def test_retention_archives_by_the_compaction_policys_delta_commits(
    planner: PlannerClient, v8: HoodieTable
) -> None:
    """Archival keeps the deltacommits the table's compaction trigger counts (Hudi's
    ``hoodie.compact.inline.max.delta.commits``): 5 by default, the policy's when set."""
    deltas = [i.timestamp for i in v8.timeline.completed()]
    planner.set_retention_policy(
        v8.uri, pb.RetentionPolicy(retain_commits=1, keep_min_commits=2, keep_max_commits=3)
    )
    assert planner.run_retention(v8.uri).archived_instants == []  # the latest 5 stay
    never_due = pb.CompactionOptions(
        trigger=pb.COMPACTION_TRIGGER_TIME_ELAPSED,
        max_delta_seconds=TEN_YEARS_S,
        max_delta_commits=2,
    )
    planner.set_compaction_policy(v8.uri, pb.CompactionPolicy(automatic=never_due))

    archived = planner.run_retention(v8.uri).archived_instants

    assert [entry.partition(".")[0] for entry in archived] == deltas[:-2]
    assert [i.timestamp for i in HoodieTable.open(v8.uri).timeline.completed()] == deltas[-2:]
    assert pending_compactions(HoodieTable.open(v8.uri)) == []


def test_backlog_metrics(v8: HoodieTable) -> None:
    server = build_server(ServerConfig(port=0, metrics_port=0), [planner_service(TEST_CONFIG)])
    try:
        client = PlannerClient(f"127.0.0.1:{server.port}", FAST_CLIENT)
        port = server.metrics_port
        table = {"table": v8.uri}
        assert client.list_compactions(v8.uri) == []
        assert metric(port, "tidemark_planner_compaction_pending_plans", **table) == 0
        assert metric(port, "tidemark_planner_compaction_log_bytes", **table) == 2117 + 1153 + 978
        plan = client.schedule_compaction(v8.uri, EVERY_DELTACOMMIT).plan
        client.schedule_compaction(v8.uri, EVERY_DELTACOMMIT)
        client.get_compaction_policy(v8.uri)  # watched: the trigger loop reads the backlog
        _wait_for(
            lambda: metric(port, "tidemark_planner_compaction_pending_plans", **table) == 1,
            "the backlog read again",
        )
        age = metric(port, "tidemark_planner_compaction_oldest_pending_seconds", **table)
        assert age >= time.time() - instant_epoch_s(plan.instant_time) - 60
        request = {**table, "trigger": "request"}
        scheduled = metric(
            port, "tidemark_planner_compaction_schedules_total", outcome="scheduled", **request
        )
        nothing = metric(
            port, "tidemark_planner_compaction_schedules_total", outcome="nothing", **request
        )
        assert (scheduled, nothing) == (1, 1)
        client.cancel_compaction(v8.uri, plan.instant_time)
        assert metric(port, "tidemark_planner_compaction_pending_plans", **table) == 0
        assert metric(port, "tidemark_planner_compaction_oldest_pending_seconds", **table) == 0
    finally:
        server.stop(0)


def _options(**fields: object) -> pb.CompactionOptions:
    return pb.CompactionOptions(**fields)  # type: ignore[arg-type]


BAD_OPTIONS = [
    (_options(max_delta_commits=0), "max_delta_commits"),
    (_options(max_delta_commits=-1), "max_delta_commits"),
    (_options(max_delta_seconds=0), "max_delta_seconds"),
    (_options(target_io_mb=-5), "target_io_mb"),
    (_options(log_file_size_threshold_bytes=-1), "log_file_size_threshold_bytes"),
    (_options(log_file_num_threshold=-1), "log_file_num_threshold"),
    (_options(trigger=9), "trigger"),
    (_options(partitions=pb.PartitionFilter(regex="(")), "partitions.regex"),
    (
        _options(partitions=pb.PartitionFilter(recent=pb.RecentPartitions())),
        "partitions.recent.count",
    ),
    (_options(partitions=pb.PartitionFilter(list=pb.PartitionList())), "partitions.list"),
]


@pytest.mark.parametrize(("options", "field"), BAD_OPTIONS)
def test_bad_options_are_refused_naming_the_field(
    planner: PlannerClient, v8: HoodieTable, options: pb.CompactionOptions, field: str
) -> None:
    before = hoodie_files(v8)
    with pytest.raises(InvalidArgumentError) as raised:
        planner.schedule_compaction(v8.uri, options)
    assert raised.value.field == f"options.{field}"
    with pytest.raises(InvalidArgumentError) as raised:
        planner.set_compaction_policy(v8.uri, pb.CompactionPolicy(automatic=options))
    assert raised.value.field == f"policy.automatic.{field}"
    assert hoodie_files(v8) == before


CALLS: list[tuple[Callable[[PlannerClient, str], object], type[TidemarkError], str]] = [
    (lambda c, t: c.list_compactions(t + "-missing"), NotFoundError, "table"),
    (lambda c, t: c.cancel_compaction(t, "yesterday"), InvalidArgumentError, "instant_time"),
    (lambda c, t: c.cancel_compaction(t, ""), InvalidArgumentError, "instant_time"),
    (lambda c, t: c.cancel_compaction(t, "20200101000000000"), NotFoundError, "instant"),
    (lambda c, t: c.get_compaction_policy(t + "-missing"), NotFoundError, "table"),
]


@pytest.mark.parametrize(("call", "error", "field"), CALLS)
def test_bad_input_is_refused_naming_the_field(
    planner: PlannerClient,
    v8: HoodieTable,
    call: Callable[[PlannerClient, str], object],
    error: type[TidemarkError],
    field: str,
) -> None:
    before = hoodie_files(v8)
    with pytest.raises(error) as raised:
        call(planner, v8.uri)
    assert raised.value.field == field
    assert hoodie_files(v8) == before


def test_a_completed_write_or_a_copy_on_write_table_is_refused(
    planner: PlannerClient, v8: HoodieTable, small_files: HoodieTable
) -> None:
    deltacommit = v8.timeline.last_completed()
    assert deltacommit is not None
    with pytest.raises(FailedPreconditionError, match="not a pending compaction") as refused:
        planner.cancel_compaction(v8.uri, deltacommit.timestamp)
    assert refused.value.field == "instant"
    before = hoodie_files(small_files)
    policy = pb.CompactionPolicy(automatic=pb.CompactionOptions())
    for call in (
        lambda: planner.schedule_compaction(small_files.uri, EVERY_DELTACOMMIT),
        lambda: planner.list_compactions(small_files.uri),
        lambda: planner.set_compaction_policy(small_files.uri, policy),
    ):
        with pytest.raises(FailedPreconditionError, match="copy-on-write") as refused:
            call()
        assert refused.value.field == "table"
    assert hoodie_files(small_files) == before


def test_a_due_policy_with_nothing_to_compact_asks_again_only_after_a_commit(
    v8: HoodieTable,
) -> None:
    """Due by its 5 deltacommits, but no slice has 3 log files: one schedule answers
    nothing, and polls with the same timeline ask no more (no lock, no log per poll)."""
    server = build_server(ServerConfig(port=0, metrics_port=0), [planner_service(TEST_CONFIG)])
    try:
        client = PlannerClient(f"127.0.0.1:{server.port}", FAST_CLIENT)
        options = pb.CompactionOptions(log_file_num_threshold=3)
        client.set_compaction_policy(v8.uri, pb.CompactionPolicy(automatic=options))
        labels = {"table": v8.uri, "trigger": "policy", "outcome": "nothing"}

        def asked() -> float:
            return metric(
                server.metrics_port, "tidemark_planner_compaction_schedules_total", **labels
            )

        _wait_for(lambda: asked() == 1, "the policy's first schedule")
        time.sleep(TEST_CONFIG.trigger_poll_s * 5)
        assert asked() == 1
        empty_deltacommit(v8)
        _wait_for(lambda: asked() == 2, "a schedule after the commit")
        assert pending_compactions(HoodieTable.open(v8.uri)) == []
    finally:
        server.stop(0)
