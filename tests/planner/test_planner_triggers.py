"""Trigger policies: after every N commits, periodically, kept in the table across a
restart, and never scheduling on top of a pending plan's file groups."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from table.v1x_testkit import unzip_fixture

from planner.conftest import TEST_CONFIG, StartPlanner
from planner.plankit import VERSIONS, add_file_groups, new_table, serve_planner
from tidemark.clients.planner import PlannerClient, plan_options
from tidemark.config import MIB
from tidemark.errors import InvalidArgumentError
from tidemark.proto.planner.v1 import planner_service_pb2 as pb
from tidemark.services.planner.config import PlannerConfig
from tidemark.services.planner.triggers import commits_since_last_plan
from tidemark.table import HoodieTable
from tidemark.table.metadata.actions import COMMIT
from tidemark.table.plans.clustering import PendingPlan, pending_plans

WAIT_S = 30.0


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def plans_of(uri: str) -> list[PendingPlan]:
    return pending_plans(HoodieTable.open(uri))


def every(commits: int = 0, seconds: int = 0) -> pb.TriggerPolicy:
    """A policy with every option given (the service answers with defaults filled in)."""
    options = plan_options(
        sort_columns=["name"],
        small_file_limit_bytes=10 * MIB,
        target_file_bytes=1024 * MIB,
        max_bytes_per_group=2048 * MIB,
        max_groups=30,
    )
    if commits:
        return pb.TriggerPolicy(every_n_commits=commits, options=options)
    return pb.TriggerPolicy(every_seconds=seconds, options=options)


@pytest.mark.parametrize("version", VERSIONS)
def test_after_every_n_commits_and_never_on_a_pending_plan(
    start_planner: StartPlanner, tmp_path: Path, version: int
) -> None:
    table = new_table(tmp_path, {"eu": [10, 20]}, version)
    planner = start_planner()
    assert planner.set_policy(table.uri, every(commits=3)) == every(commits=3)
    add_file_groups(table, {"eu": [30]})
    time.sleep(1.0)
    assert plans_of(table.uri) == []  # two commits: not yet
    add_file_groups(table, {"eu": [40]})
    wait_for(lambda: len(plans_of(table.uri)) == 1, "the first plan")
    (first,) = plans_of(table.uri)
    assert first.plan.num_slices == 4
    assert first.plan.strategy.sort_columns == ("name",)
    for rows in (50, 60, 70):
        add_file_groups(table, {"eu": [rows]})
    wait_for(lambda: len(plans_of(table.uri)) == 2, "the second plan")
    second = plans_of(table.uri)[1]
    assert second.plan.num_slices == 3
    assert second.plan.file_groups().isdisjoint(first.plan.file_groups())


def test_periodic_trigger(start_planner: StartPlanner, tmp_path: Path) -> None:
    table = new_table(tmp_path, {"eu": [10, 20], "us": [5, 6]})
    planner = start_planner()
    planner.set_policy(table.uri, every(seconds=1))
    wait_for(lambda: len(plans_of(table.uri)) == 1, "a periodic plan")
    assert plans_of(table.uri)[0].plan.num_slices == 4


def test_policy_survives_a_restart(tmp_path: Path) -> None:
    """Set through one ``tidemark serve planner`` process, followed by the next one, which
    watches the table from its configuration."""
    table = new_table(tmp_path, {"eu": [10, 20]})
    first = serve_planner()
    try:
        PlannerClient(first.address).set_policy(table.uri, every(commits=2))
    finally:
        first.close()
    add_file_groups(table, {"eu": [30]})
    env = {"TIDEMARK_PLANNER_TABLES": table.uri, "TIDEMARK_PLANNER_TRIGGER_POLL_S": "0.2"}
    second = serve_planner(env)
    try:
        assert PlannerClient(second.address).get_policy(table.uri) == every(commits=2)
        wait_for(lambda: len(plans_of(table.uri)) == 1, "the restarted service's plan")
    finally:
        second.close()
    assert plans_of(table.uri)[0].plan.num_slices == 3


def test_on_demand_clears_the_policy(planner: PlannerClient, tmp_path: Path) -> None:
    table = new_table(tmp_path, {"eu": [10, 20]})
    planner.set_policy(table.uri, every(commits=1))
    cleared = planner.set_policy(table.uri, pb.TriggerPolicy(on_demand=pb.OnDemand()))
    assert cleared.WhichOneof("trigger") == "on_demand"
    assert planner.get_policy(table.uri).WhichOneof("trigger") == "on_demand"
    assert not (Path(table.uri) / ".hoodie/.tidemark/planner/trigger-policy.json").exists()


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        (pb.TriggerPolicy(every_n_commits=0), "policy.every_n_commits"),
        (pb.TriggerPolicy(every_seconds=0), "policy.every_seconds"),
        (
            pb.TriggerPolicy(every_n_commits=2, options=plan_options(max_groups=0)),
            "policy.options.max_groups",
        ),
    ],
)
def test_bad_policies_are_refused(
    planner: PlannerClient, tmp_path: Path, policy: pb.TriggerPolicy, field: str
) -> None:
    table = new_table(tmp_path, {"eu": [10]})
    with pytest.raises(InvalidArgumentError) as raised:
        planner.set_policy(table.uri, policy)
    assert raised.value.field == field
    assert planner.get_policy(table.uri).WhichOneof("trigger") is None or (
        planner.get_policy(table.uri).WhichOneof("trigger") == "on_demand"
    )


def test_config_is_validated() -> None:
    assert TEST_CONFIG.trigger_poll_s == 0.2
    with pytest.raises(Exception, match="lock_lease_s"):
        PlannerConfig(lock_lease_s=0.5)


def test_commits_are_counted_from_a_clustering_hudi_completed(tmp_path: Path) -> None:
    """Hudi 1.1 completed a clustering (``<t>.clustering.requested``, then
    ``<t>_<c>.replacecommit``) one commit before the end of this table's timeline."""
    root = unzip_fixture("v9_txns_simple_nometa", tmp_path)
    table = HoodieTable.open(str(root))
    assert len(table.timeline.completed(frozenset({COMMIT}))) == 10
    assert commits_since_last_plan(table) == 1
