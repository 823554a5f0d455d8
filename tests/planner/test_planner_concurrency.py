"""Concurrent schedules of one table from two service processes never overlap: each
schedules under the table lock and re-reads the pending plans inside it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from itertools import combinations
from pathlib import Path

import pytest

from planner.conftest import StartPlanner
from planner.plankit import new_table, serve_planner
from tidemark.clients.planner import PlannerClient, plan_options
from tidemark.errors import ConflictError
from tidemark.services.planner.config import PlannerConfig
from tidemark.table import HoodieTable
from tidemark.table.leases.storage_lease import StorageLease
from tidemark.table.plans.clustering import pending_plans

PARTITIONS = {f"p{i}": [10, 20, 30] for i in range(6)}
ROUNDS = 4


def test_two_processes_never_plan_the_same_file_group(tmp_path: Path) -> None:
    table = new_table(tmp_path, PARTITIONS)
    services = [serve_planner() for _ in range(2)]
    try:
        clients = [PlannerClient(service.address) for service in services]
        options = plan_options(max_groups=1)
        with ThreadPoolExecutor(2 * ROUNDS) as pool:
            answers = list(
                pool.map(
                    lambda index: clients[index % 2].schedule(table.uri, options),
                    range(2 * ROUNDS),
                )
            )
    finally:
        for service in services:
            service.close()
    saved = pending_plans(HoodieTable.open(table.uri))
    assert sorted(a.plan.instant_time for a in answers if a.HasField("plan")) == [
        p.timestamp for p in saved
    ]
    assert len(saved) == len(PARTITIONS)  # eight calls, six groups to plan
    for first, second in combinations(saved, 2):
        assert first.plan.file_groups().isdisjoint(second.plan.file_groups())
    assert (
        sorted(a.reason for a in answers if not a.HasField("plan"))
        == [
            "0 of the 18 files below the small-file limit are free to cluster, the others are in "
            "a pending plan or a pending write; a group needs two"
        ]
        * 2
    )


def test_a_schedule_waits_for_the_lock_then_gives_up(
    start_planner: StartPlanner, small_files: HoodieTable
) -> None:
    planner = start_planner(PlannerConfig(lock_wait_s=1.0, trigger_poll_s=0.2))
    held = StorageLease(small_files.storage, "a long write")
    with held, pytest.raises(ConflictError, match="table is locked by 'a long write'") as raised:
        planner.schedule(small_files.uri, plan_options())
    assert raised.value.field == "table"
    assert pending_plans(small_files) == []
    assert planner.schedule(small_files.uri, plan_options()).HasField("plan")
