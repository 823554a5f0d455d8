"""Two planner replicas behind one round-robin target: schedules of one table land on
both, and the plans they save never share a file group (each schedules under the table
lock and re-reads the pending plans inside it)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from itertools import combinations
from pathlib import Path

from planner.plankit import new_table

from tidemark.clients.planner import PlannerClient, plan_options
from tidemark.services.planner import FULL_NAME as PLANNER
from tidemark.table import HoodieTable
from tidemark.table.plans.clustering import pending_plans

from .conftest import StartReplica, connected_to_all, round_robin_target

PARTITIONS = {f"p{i}": [10, 20, 30] for i in range(6)}
CALLS = 8


def test_schedules_through_one_target_over_two_replicas_never_overlap(
    start_replica: StartReplica, tmp_path: Path
) -> None:
    table = new_table(tmp_path, PARTITIONS)
    replicas = [start_replica("planner") for _ in range(2)]
    client = PlannerClient(round_robin_target(replicas))
    assert client.list_plans(table.uri) == []
    connected_to_all(replicas)

    with ThreadPoolExecutor(CALLS) as pool:
        answers = list(
            pool.map(lambda _: client.schedule(table.uri, plan_options(max_groups=1)), range(CALLS))
        )

    calls = [replica.calls(PLANNER, "SchedulePlan") for replica in replicas]
    assert sum(calls) == CALLS
    assert min(calls) > 0, calls
    saved = pending_plans(HoodieTable.open(table.uri))
    assert sorted(a.plan.instant_time for a in answers if a.HasField("plan")) == sorted(
        p.timestamp for p in saved
    )
    assert len(saved) == len(PARTITIONS)  # eight calls, six groups to plan
    for first, second in combinations(saved, 2):
        assert first.plan.file_groups().isdisjoint(second.plan.file_groups())
