"""The planner service over real gRPC: schedule, list, get, cancel; refusals name their
field and change nothing; hudi-rs reads the table unchanged while a plan is pending."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from marker.conftest import metric
from table.log_testkit import MOR_FIXTURES
from table.table_testkit import Writer, hudi_rs_rows, people_config

from planner.conftest import FAST_CLIENT, SMALL_FILES, TEST_CONFIG, StartPlanner
from planner.plankit import VERSIONS, add_file_groups, hoodie_files, new_table
from tidemark.clients.marker import marker_writer_for
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
from tidemark.table.files.file_names import base_file_name, write_token
from tidemark.table.files.view import BaseFile
from tidemark.table.logfiles.file_names import LogFileName
from tidemark.table.metadata.actions import COMMIT, DELTA_COMMIT, ROLLBACK
from tidemark.table.metadata.commit import CommitMetadata, WriteStat
from tidemark.table.plans.clustering import pending_plans
from tidemark.table.timeline.instant import State, new_instant_time
from tidemark.table.writes.markers import IOType, MarkerSpec


@pytest.mark.parametrize("version", VERSIONS)
def test_schedule_list_get_cancel(planner: PlannerClient, tmp_path: Path, version: int) -> None:
    """On every table version: a plan is a requested instant of the version's clustering
    action (version 6: ``replacecommit``, 8 and 9: ``clustering``)."""
    small_files = new_table(tmp_path, SMALL_FILES, version)
    uri = small_files.uri
    rows = hudi_rs_rows(uri)
    sizes = {f.file_id: f.size for f in small_files.view().latest_base_files()}
    response = planner.schedule(
        uri, plan_options(sort_columns=["name", "score"], layout="hilbert", target_file_bytes=8000)
    )
    plan = response.plan
    assert response.reason == ""
    assert plan.state == pb.PLAN_STATE_REQUESTED
    assert [g.partition_path for g in plan.groups] == ["eu", "us"]
    assert [len(g.slices) for g in plan.groups] == [4, 2]
    for group in plan.groups:
        assert [s.size_bytes for s in group.slices] == sorted(
            (sizes[s.file_id] for s in group.slices), reverse=True
        )
        assert group.num_output_file_groups == -(-group.size_bytes // 8000)
    assert list(plan.sort_columns) == ["name", "score"] and plan.layout == pb.LAYOUT_HILBERT
    assert plan.num_files == 6 and plan.size_bytes == sum(g.size_bytes for g in plan.groups)

    (listed,) = planner.list_plans(uri)
    assert listed == plan
    assert planner.get_plan(uri, plan.instant_time) == plan
    (saved,) = pending_plans(HoodieTable.open(uri))
    assert saved.instant.state is State.REQUESTED
    requested = {6: f".hoodie/{plan.instant_time}.replacecommit.requested"}.get(
        version, f".hoodie/timeline/{plan.instant_time}.clustering.requested"
    )
    assert saved.instant.path == requested and (Path(uri) / requested).is_file()
    assert hudi_rs_rows(uri) == rows

    again = planner.schedule(uri, plan_options())
    assert not again.HasField("plan")
    assert "pending plan" in again.reason

    rollback = planner.cancel_plan(uri, plan.instant_time)
    timeline = HoodieTable.open(uri).timeline
    assert [(i.timestamp, i.action) for i in timeline.completed(frozenset({ROLLBACK}))] == [
        (rollback, ROLLBACK)
    ]
    assert planner.list_plans(uri) == [] and timeline.pending() == []
    assert not (Path(uri) / requested).exists()
    assert hudi_rs_rows(uri) == rows


def test_partition_filters_and_limits(planner: PlannerClient, small_files: HoodieTable) -> None:
    recent = planner.schedule(small_files.uri, plan_options(partitions="recent:1"))
    assert [g.partition_path for g in recent.plan.groups] == ["us"]
    listed = planner.schedule(
        small_files.uri, plan_options(partitions="list:eu,asia", max_groups=1)
    )
    assert [g.partition_path for g in listed.plan.groups] == ["eu"]
    nothing = planner.schedule(small_files.uri, plan_options(partitions="regex:a.*"))
    assert nothing.reason == "only 1 file in the selected partitions is below the small-file limit"


def table_without_commits(tmp_path: Path) -> str:
    return HoodieTable.create(str(tmp_path / "empty"), people_config()).uri


@pytest.mark.parametrize(
    ("call", "error", "field"),
    [
        (
            lambda c, t: c.schedule(t, plan_options(sort_columns=["nope"])),
            InvalidArgumentError,
            "sort_columns",
        ),
        (
            lambda c, t: c.schedule(t, plan_options(target_file_bytes=0)),
            InvalidArgumentError,
            "options.target_file_bytes",
        ),
        (
            lambda c, t: c.schedule(t, plan_options(target_file_bytes=-5)),
            InvalidArgumentError,
            "options.target_file_bytes",
        ),
        (
            lambda c, t: c.schedule(t, plan_options(max_groups=0)),
            InvalidArgumentError,
            "options.max_groups",
        ),
        (
            lambda c, t: c.schedule(t, plan_options(partitions="regex:(")),
            InvalidArgumentError,
            "options.partitions.regex",
        ),
        (
            lambda c, t: c.schedule(t, plan_options(partitions="recent:0")),
            InvalidArgumentError,
            "options.partitions.recent.count",
        ),
        (
            lambda c, t: c.schedule(t, plan_options(layout="zorder")),
            InvalidArgumentError,
            "options.sort_columns",
        ),
        (lambda c, t: c.cancel_plan(t, "2024"), InvalidArgumentError, "instant_time"),
        (
            lambda c, t: c.cancel_plan(t, HoodieTable.open(t).timeline.instants()[0].timestamp),
            FailedPreconditionError,
            "instant",
        ),
        (lambda c, t: c.get_plan(t, "20200101000000000"), NotFoundError, "instant"),
    ],
)
def test_bad_input_is_refused_naming_the_field(
    planner: PlannerClient,
    small_files: HoodieTable,
    call: Callable[[PlannerClient, str], object],
    error: type[TidemarkError],
    field: str,
) -> None:
    before = hoodie_files(small_files)
    with pytest.raises(error) as raised:
        call(planner, small_files.uri)
    assert raised.value.field == field
    assert hoodie_files(small_files) == before


def test_a_table_with_no_commits_is_refused(planner: PlannerClient, tmp_path: Path) -> None:
    uri = table_without_commits(tmp_path)
    table = HoodieTable.open(uri)
    before = hoodie_files(table)
    with pytest.raises(FailedPreconditionError, match="no completed commits") as raised:
        planner.schedule(uri, plan_options())
    assert raised.value.field == "table"
    assert hoodie_files(table) == before


@pytest.mark.parametrize("version", VERSIONS)
def test_a_plan_never_takes_file_groups_of_a_pending_write(
    planner: PlannerClient, tmp_path: Path, version: int
) -> None:
    """A failed upsert left MERGE markers naming the "us" file groups."""
    small_files = new_table(tmp_path, SMALL_FILES, version)
    stuck = Writer(small_files).begin()
    markers = marker_writer_for(MarkerSpec("direct", small_files.uri, stuck))
    for base in small_files.view().latest_base_files():
        if base.partition_path == "us":
            name = base_file_name(base.file_id, write_token(0, 1, 0), stuck)
            markers.create("us", name, IOType.MERGE)
    response = planner.schedule(small_files.uri, plan_options())
    assert [g.partition_path for g in response.plan.groups] == ["eu"]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_plan_never_takes_file_groups_a_pending_write_names_in_its_inflight(
    planner: PlannerClient, tmp_path: Path, version: int
) -> None:
    """A write Hudi left inflight without markers names the "us" file groups it updates
    in its inflight metadata (the workload profile: JSON on version 6, Avro on 8 and 9)."""
    table = new_table(tmp_path, SMALL_FILES, version)
    us = [f for f in table.view().latest_base_files() if f.partition_path == "us"]
    stats = [WriteStat(f.file_id, "", f.instant, 0, 0, 1, 0, 0, 0, "us") for f in us]
    profile = table.timeline.encode_metadata(CommitMetadata({"us": stats}, "UPSERT"), COMMIT)
    stuck = new_instant_time(after=table.timeline.latest_timestamp())
    table.timeline.create_requested(stuck, COMMIT)
    table.timeline.transition_inflight(stuck, COMMIT, profile)
    response = planner.schedule(table.uri, plan_options())
    assert [g.partition_path for g in response.plan.groups] == ["eu"]


def test_hot_file_groups_are_left_out(
    start_planner: StartPlanner, small_files: HoodieTable
) -> None:
    """A newer commit wrote two "us" file groups and one "eu": with hot_commits=1 (the
    request's, or the service's setting) the plan keeps to the older file groups; with
    hot_minutes=30 both commits are hot, so nothing is planned."""
    add_file_groups(small_files, {"us": [5, 5], "eu": [7]})
    hot = {(f.partition_path, f.file_id) for f in small_files.view().latest_base_files()}
    hot -= {(f.partition_path, f.file_id) for f in _files_before_last_commit(small_files)}
    planner = start_planner()
    every = planner.schedule(small_files.uri, plan_options(hot_commits=0))
    assert hot <= _planned(every)
    planner.cancel_plan(small_files.uri, every.plan.instant_time)
    service_setting = start_planner(replace(TEST_CONFIG, hot_commits=1))
    for client, options in ((planner, plan_options(hot_commits=1)), (service_setting, None)):
        response = client.schedule(small_files.uri, options or plan_options())
        assert _planned(response) and not _planned(response) & hot
        assert {(p, f) for p, f in _planned(every) if (p, f) not in hot} == _planned(response)
        planner.cancel_plan(small_files.uri, response.plan.instant_time)
    assert not planner.schedule(small_files.uri, plan_options(hot_minutes=30)).HasField("plan")
    with pytest.raises(InvalidArgumentError, match=r"options\.hot_commits: must be >= 0"):
        planner.schedule(small_files.uri, plan_options(hot_commits=-1))


def _files_before_last_commit(table: HoodieTable) -> list[BaseFile]:
    table.timeline.reload()
    previous = table.timeline.completed()[-2].timestamp
    return table.view(as_of=previous).latest_base_files()


def _planned(response: pb.SchedulePlanResponse) -> set[tuple[str, str]]:
    return {(g.partition_path, s.file_id) for g in response.plan.groups for s in g.slices}


def test_unreachable_service_is_one_error_naming_it(tmp_path: Path) -> None:
    client = PlannerClient("127.0.0.1:9", None)
    with pytest.raises(
        TidemarkError, match=re.escape("planner service at 127.0.0.1:9 is unreachable")
    ):
        client.list_plans(str(tmp_path))


def test_metrics_count_outcomes(small_files: HoodieTable) -> None:
    server = build_server(ServerConfig(port=0, metrics_port=0), [planner_service(TEST_CONFIG)])
    try:
        client = PlannerClient(f"127.0.0.1:{server.port}", FAST_CLIENT)
        plan = client.schedule(small_files.uri, plan_options()).plan
        client.schedule(small_files.uri, plan_options())
        client.cancel_plan(small_files.uri, plan.instant_time)
        client.get_policy(small_files.uri)
        port = server.metrics_port
        table = {"table": small_files.uri, "trigger": "request"}
        scheduled = metric(port, "tidemark_planner_schedules_total", outcome="scheduled", **table)
        nothing = metric(port, "tidemark_planner_schedules_total", outcome="nothing", **table)
        assert (scheduled, nothing) == (1, 1)
        assert metric(port, "tidemark_planner_cancelled_total") == 1
        assert metric(port, "tidemark_planner_watched_tables") == 1
    finally:
        server.stop(0)


def test_a_plan_never_takes_file_groups_a_pending_deltacommit_appends_to(
    planner: PlannerClient, tmp_path: Path
) -> None:
    """On a merge-on-read table a pending deltacommit names the groups it appends to in
    its log files' markers: with one of the two file groups busy, nothing is planned."""
    with zipfile.ZipFile(MOR_FIXTURES / "v6_nonpartitioned.zip") as archive:
        archive.extractall(tmp_path, [m for m in archive.namelist() if m.startswith("v6_")])
    table = HoodieTable.open(str(tmp_path / "v6_nonpartitioned"))
    first = table.view().latest_file_slices()[0]
    assert first.base is not None
    stuck = new_instant_time(after=table.timeline.latest_timestamp())
    table.timeline.create_requested(stuck, DELTA_COMMIT)
    markers = marker_writer_for(MarkerSpec("direct", table.uri, stuck))
    log = LogFileName(first.file_id, first.base.instant, 9, write_token(0, 1, 0))
    markers.create("", log.name, IOType.APPEND)
    response = planner.schedule(table.uri, plan_options())
    assert not response.HasField("plan")
    assert "1 of the 2 files" in response.reason
